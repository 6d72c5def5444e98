/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libarchive, loaded on first use (drivers/app/app-archive-dl.c): naapp links no
 * libarchive; the archive_* functions it calls (app-layer.c, app-backup-write.c,
 * app-backup-extract.c) are stubs that dlopen() libarchive.so.13 the first time one
 * of them runs and call on into it. An app-only node that pulls no image and makes no
 * backup since it started never maps libarchive and what it brings (libxml2, ICU,
 * libstdc++, lzma, lz4, bz2, acl: 2.2 MB RSS on start, bench/soak/pss_drivers.py).
 * Loaded once, it stays loaded.
 *
 * Only the constructors (archive_read_new, archive_write_new, archive_entry_new) can
 * fail to load it: they return NULL, and app_archive_failed() then says why:
 *
 *   struct archive *a = archive_read_new();
 *   if (!a)
 *           return app_archive_failed(err, "layer");  // "layer: libarchive: <dlerror>" or ENOMEM
 *
 * A new archive_* call elsewhere in naapp fails to link until it has its stub there.
 */
#pragma once

#include "common/error.h"

/* After a constructor returned NULL: the loader's error when libarchive could not be
 * loaded, else ENOMEM; prefixed with what. Returns -errnum. */
int app_archive_failed(struct na_error *err, const char *what);
