/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The fixture of test-app-runtime: a busybox "image", an app directory with its
 * overlay root (app-rootfs) and a 20 MB volume (app-volume), ids from app-ids, and
 * the test-only launcher that runs crun the way the monitor will: fork; in the child
 * app_crun_private_ns() when app_crun_needs_private_ns(); exec `crun --root R
 * --cgroup-manager=cgroupfs run [--detach] --bundle B ID` with stdout and stderr to a
 * file. The test runs in a mount namespace of its own (made private), so its mounts
 * neither leak into namespaces other processes make nor outlive it. group_teardown
 * removes containers, mounts, loop devices, cgroups and files.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "drivers/app/oci/app-ids.h"
#include "drivers/app/oci/app-oci-spec.h"

#define CRUN "/usr/bin/crun"
#define BUSYBOX "/bin/busybox"
#define VOLUME_MB 20

struct fixture {
        char *base;        /* 0711 so the app's mapped root can reach its root and volume */
        char lower[4096];  /* the "image": a busybox root */
        char app[4096];    /* app dir: upper, work, rootfs */
        char rootfs[4096];
        char image[4096];  /* the volume's image */
        char volume[4096]; /* its mount point */
        char crun_root[4096];
        char bundle[4096];
        char cgroup_parent[128];
        struct app_ids ids;
        int next;
        char used_ids[16][64];
        int n_used;
};

extern struct fixture F;

struct run {
        int status; /* crun's exit status; -1 when killed */
        char *out;  /* its stdout and stderr, and the container's */
};

/* Exit 77 without root or crun; build the fixture (a failure is fatal). */
int group_setup(void **state);
int group_teardown(void **state);

void die_errno(const char *what);
void sleep_ms(long ms);
/* Fail the test with err's message when r < 0; clear err. */
void must(int r, struct na_error *err, const char *what);
/* The config input of one run: this fixture's root, volume and ids, 1 core, 128 MB, 64 pids. */
struct app_oci_input base_input(const char *id, char *const *argv);
/* A fresh container id, remembered for the teardown. */
char *new_id(void);
/*
 * Write config.json (modify, when given, edits it first) and run crun in the
 * foreground, or --detach; sets in->cgroup_path. r.out is crun's and the container's
 * output (caller frees).
 */
struct run launch(struct app_oci_input *in, bool detach, void (*modify)(json_t *cfg));
/* /bin/sh -c script in a new container; tune edits the input first. */
struct run sh(const char *script, void (*tune)(struct app_oci_input *in), void (*modify)(json_t *cfg));
/* Fail unless the run's output contains text. */
void expect(const struct run *r, const char *text);
