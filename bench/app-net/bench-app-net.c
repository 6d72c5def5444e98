/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * App network benchmark (run by hand; prints figures, asserts nothing):
 *
 *   bench-app-net [--apps N] [--group G] [--joins J] [--nft PATH]
 *
 * In a private network namespace of its own (never the host's ruleset), with the
 * real app network code (drivers/app/net/app-net.c) but without containers: N apps are
 * registered (addresses, the state file, hosts files in their directories) in groups
 * of G; then J joins move one app between two groups, each: one nft batch (an
 * element out of a set, one into another), the state file replaced atomically
 * (fsync), and the hosts files of the app and of both groups rewritten. That is
 * everything app.group.join does apart from the job plumbing; a container would only
 * read the files. Then a join into a group of all N apps (N hosts files), and the
 * peer: the same two element changes done by the nft command (`nft -f -` with the
 * same two lines), J times, in the same run.
 * --dir puts the storage (state file, hosts files) elsewhere than /tmp, e.g. a tmpfs,
 * to tell the file system's share from ours.
 * Target (issue 12): a join <= 10 ms at 500 apps, O(the group).
 */
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "drivers/app/net/app-net-internal.h" /* the breakdown: the nft batch alone */

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void app_id(unsigned i, char buf[40])
{
        snprintf(buf, 40, "00000000-0000-4000-8000-%012u", i);
}

static void group_id(unsigned g, char buf[40])
{
        snprintf(buf, 40, "00000000-0000-4000-9000-%012u", g);
}

static void die(const char *what, struct na_error *e)
{
        fprintf(stderr, "bench-app-net: %s: %s\n", what, e ? e->message : "failed");
        exit(1);
}

static int nft_lines(const char *nft, const char *text)
{
        int pfd[2];
        if (pipe(pfd) < 0)
                return -1;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pfd[0], 0);
        posix_spawn_file_actions_addclose(&fa, pfd[1]);
        char f[] = "-f", dash[] = "-";
        char *argv[] = { (char *)nft, f, dash, NULL };
        pid_t pid;
        int r = posix_spawn(&pid, nft, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[0]);
        if (r) {
                close(pfd[1]);
                return -1;
        }
        ssize_t w = write(pfd[1], text, strlen(text));
        close(pfd[1]);
        int st;
        waitpid(pid, &st, 0);
        return w >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
        unsigned n = 500, gsize = 10, joins = 200;
        const char *nft = "/usr/sbin/nft", *base = "/tmp";
        static const struct option opts[] = { { "apps", 1, 0, 'a' }, { "group", 1, 0, 'g' }, { "joins", 1, 0, 'j' },
                                              { "nft", 1, 0, 'n' }, { "dir", 1, 0, 'd' },
                                              { 0, 0, 0, 0 } };
        for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
                if (c == 'a')
                        n = (unsigned)atoi(optarg);
                else if (c == 'g')
                        gsize = (unsigned)atoi(optarg);
                else if (c == 'j')
                        joins = (unsigned)atoi(optarg);
                else if (c == 'n')
                        nft = optarg;
                else if (c == 'd')
                        base = optarg;
                else
                        return 2;
        }
        if (n < 4 || gsize < 2 || joins < 1)
                return 2;
        if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0) {
                printf("bench-app-net: needs root and network namespaces (skipped)\n");
                return 77;
        }
        char tmpl[4096];
        snprintf(tmpl, sizeof(tmpl), "%s/bench-app-net.XXXXXX", base);
        char *dir = mkdtemp(tmpl);
        if (!dir)
                die(base, NULL);
        char apps[4200], path[4300];
        snprintf(apps, sizeof(apps), "%s/apps", dir);
        mkdir(apps, 0755);
        for (unsigned i = 0; i < n + 1; i++) {
                char id[40];
                app_id(i, id);
                snprintf(path, sizeof(path), "%s/%s", apps, id);
                mkdir(path, 0755);
        }
        struct na_error err = NA_ERROR_INIT;
        struct app_net_options o = { .storage_dir = dir, .apps_dir = apps, .network = "10.88.0.0/16",
                                     .ports = "20000-40000", .table = "bench_apps" };
        struct app_net *net;
        if (app_net_open(&o, &net, &err) < 0)
                die("open", &err);
        double t0 = now_ms();
        for (unsigned i = 0; i < n; i++) {
                char id[40], g[40], host[32];
                app_id(i, id);
                group_id(i / gsize, g);
                snprintf(host, sizeof(host), "app%u", i);
                if (app_net_register(net, id, host, g, &err) < 0)
                        die("register", &err);
        }
        double reg = now_ms() - t0;

        /* App 0 moves between group 0 and group 1, J times. */
        char mover[40], ga[40], gb[40];
        app_id(0, mover);
        group_id(0, ga);
        group_id(1, gb);
        double worst = 0;
        t0 = now_ms();
        for (unsigned j = 0; j < joins; j++) {
                double s = now_ms();
                if (app_net_group_set(net, mover, j % 2 ? ga : gb, &err) < 0)
                        die("join", &err);
                double d = now_ms() - s;
                if (d > worst)
                        worst = d;
        }
        double per_join = (now_ms() - t0) / joins;

        /* The nft part alone: the two element changes as app.group.join sends them (one batch). */
        double k0 = now_ms();
        for (unsigned j = 0; j < joins; j++) {
                struct nft_batch b;
                nft_batch_init(&b, "bench_apps");
                const char *from = j % 2 ? gb : ga, *to = j % 2 ? ga : gb;
                if ((j > 0 && app_net_nft_member(&b, from, 0x0a58ff02u, false, &err) < 0) ||
                    app_net_nft_member(&b, to, 0x0a58ff02u, true, &err) < 0 ||
                    nft_nl_apply(&net->nl, &b, &err) < 0)
                        die("batch", &err);
                nft_batch_clear(&b);
        }
        double batch = (now_ms() - k0) / joins;

        /* The peer: the same two element changes through the nft command. */
        char seta[40], setb[40], text[512];
        snprintf(seta, sizeof(seta), "g%s", "00000000000040009000000000000000");
        snprintf(setb, sizeof(setb), "g%s", "00000000000040009000000000000001");
        /* An address of no app, between the same two sets. */
        double p0 = now_ms();
        int peer_ok = 0;
        for (unsigned j = 0; j < joins; j++) {
                snprintf(text, sizeof(text), "add element inet bench_apps %s { 10.88.255.1 }\n"
                                             "delete element inet bench_apps %s { 10.88.255.1 }\n",
                         j % 2 ? seta : setb, j % 2 ? setb : seta);
                if (j == 0)
                        snprintf(text, sizeof(text), "add element inet bench_apps %s { 10.88.255.1 }\n", setb);
                if (nft_lines(nft, text) == 0)
                        peer_ok++;
        }
        double peer = (now_ms() - p0) / joins;

        /* A join into one group of all N apps: N hosts files. */
        char big[40];
        group_id(999999, big);
        for (unsigned i = 1; i < n; i++) {
                char id[40];
                app_id(i, id);
                if (app_net_group_set(net, id, big, &err) < 0)
                        die("fill the big group", &err);
        }
        t0 = now_ms();
        if (app_net_group_set(net, mover, big, &err) < 0)
                die("join the big group", &err);
        double big_join = now_ms() - t0;

        printf("app network, %u apps in groups of %u (no containers: nft, state file, hosts files)\n", n, gsize);
        printf("  register %u apps:                 %8.1f ms (%.3f ms each)\n", n, reg, reg / n);
        printf("  group join (group of %u), %u x:   %8.3f ms each (worst %.3f ms)  target <= 10 ms\n", gsize, joins,
               per_join, worst);
        printf("  of which the nft batch (2 element changes):    %8.3f ms each\n", batch);
        printf("  join into a group of %u apps:     %8.3f ms (%u hosts files)\n", n, big_join, n);
        printf("  peer: the two element changes with `%s -f -`: %8.3f ms each (%d/%u applied)\n", nft, peer,
               peer_ok, joins);
        printf("  ratio join / peer: %.2f\n", peer > 0 ? per_join / peer : 0);
        app_net_close(net);
        char rmp[] = "/bin/rm", rf[] = "-rf";
        char *rm[] = { rmp, rf, dir, NULL };
        pid_t pid;
        if (posix_spawn(&pid, "/bin/rm", NULL, NULL, rm, environ) == 0)
                waitpid(pid, NULL, 0);
        return 0;
}
