/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define NA_UUID_STRLEN 36

/* A canonical 8-4-4-4-12 hexadecimal UUID (either case). */
bool na_uuid_valid(const char *s);
/* A random (version 4) UUID in lower case; buf of at least 37 bytes. */
int na_uuid_random(char *buf, size_t len);
