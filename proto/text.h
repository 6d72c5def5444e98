/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Bytes as JSON text: a JSON string of any bytes, each invalid UTF-8 sequence (and
 * each NUL) replaced by U+FFFD, one replacement per offending byte. For output and
 * console lines whose bytes come from a program, not from a person.
 *
 *   json_t *t = proto_text_json(buf, len);   // NULL only when out of memory
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

json_t *proto_text_json(const char *s, size_t len);

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one (NUL is valid here). */
size_t proto_utf8_seq(const unsigned char *p, size_t left);
