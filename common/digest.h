/* SHA-256 of files and buffers as lower-case hex. */
#pragma once

#include "common/error.h"
#include "common/progress.h"

/* SHA-256 of a file as 64 lower-case hex digits (buf of 65); checkpoint every 256 MiB. */
int na_sha256_file(const char *path, const struct na_progress *progress, char hex[65], struct na_error *err);
void na_sha256_hex(const unsigned char digest[32], char hex[65]);
