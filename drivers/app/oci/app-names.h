/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The names and paths the app runtime accepts, checked before any use: container ids
 * and file names, and absolute paths that stay what they say (no ".", "..", empty
 * components or control characters).
 */
#pragma once

#include <stdbool.h>

/*
 * A name we use for a container id, a file or a directory: 1 to 64 of [A-Za-z0-9_.-],
 * not starting with '.' or '-' (so never ".", ".." or an option).
 */
bool app_name_valid(const char *s);

/*
 * An absolute path shorter than 4000 bytes without "." or ".." components, empty
 * components ("//") or control characters; a trailing '/' is refused too, except for
 * "/" itself.
 */
bool app_path_clean(const char *p);
