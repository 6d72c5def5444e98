/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The peers and limits printed beside bench-vm's vps.create figure, measured in
 * the same run: each part of a create done alone (the seed, the disk overlay, the
 * password hash, a fsynced metadata write, one fsync, the libvirt define and start on
 * the same test driver) and the programs the driver used to spawn for two of them
 * (`xorriso -as mkisofs` for the seed, `qemu-img create` for the overlay), then the
 * floor they give: define + the 5 fsyncs a create makes before booting.
 *
 *   bench_create_peers(uri, "/tmp/x", "/tmp/x/images/small.raw", 9);
 */
#pragma once

/* Medians over reps runs of each part, printed one per line. dir must exist and be writable. */
void bench_create_peers(const char *uri, const char *dir, const char *template_raw, unsigned reps);
