/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * VM driver figures (issues 4 and 15): vps.create up to the booting stage with a
 * small and a large template (copy-on-write: the time should not grow with image
 * size; target <= 50 ms), each with the median of its parts between two progress
 * stages, then the same parts done alone beside the programs they replaced and
 * libvirt's own define (+ start) on the same test driver, the floor
 * (bench-vm-peers.c); and a node with many servers on libvirt's test driver: a full
 * hello inventory and one vps.status job per server. Prints figures; asserts
 * nothing about time.
 *
 *   bench-vm [--small-mb 100] [--large-mb 2048] [--creates 9] [--servers 1000] [--keep]
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/kinds/kind-vps.h"
#include "agent/base/services.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/vm/vm-util.h"
#include "tests/drivers/vm/job-double.h"
#include "bench-vm-peers.h"

static char root[] = "/tmp/na-vm-bench-XXXXXX";

static void die(const char *what, const struct na_error *e)
{
        fprintf(stderr, "bench-vm: %s%s%s\n", what, e ? ": " : "", e ? e->message : "");
        exit(1);
}

/* A raw image of mb MiB with real bytes every 64 MiB (sparse between), and its sha256. */
static void make_image(const char *path, unsigned mb, char sha[65])
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ftruncate(fd, (off_t)mb << 20) < 0)
                die("create image", NULL);
        char block[1 << 20];
        for (size_t i = 0; i < sizeof(block); i++)
                block[i] = (char)(i * 2654435761u >> 13);
        for (unsigned off = 0; off < mb; off += 64)
                if (pwrite(fd, block, sizeof(block), (off_t)off << 20) != (ssize_t)sizeof(block))
                        die("write image", NULL);
        close(fd);
        struct na_error e = NA_ERROR_INIT;
        if (na_sha256_file(path, NULL, sha, &e) < 0)
                die("sha256", &e);
}

/* The stages vps.create reports, in order; the figure ends where "booting" begins. */
static const char *const stages[] = { "preparing-disk", "writing-image", "configuring", "booting" };
#define N_STAGES 4

struct timing {
        uint64_t start_us;
        uint64_t stage_us[N_STAGES]; /* when each stage began */
};

static void on_stage(void *userdata, const char *stage, int percent, const char *message)
{
        struct timing *t = userdata;
        for (size_t i = 0; stage && i < N_STAGES; i++)
                if (streq(stage, stages[i]) && !t->stage_us[i])
                        t->stage_us[i] = na_now_mono_us();
}

static double ms(uint64_t us)
{
        return (double)us / 1000.0;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double median_of(double *v, unsigned n)
{
        qsort(v, n, sizeof(double), cmp_double);
        return n ? v[(n - 1) / 2] : 0;
}

/* What each part of vps.create up to booting covers (between two stage reports). */
static const char *const part_names[N_STAGES] = {
        "checks, template lookup, connection",       /* start -> preparing-disk */
        "template verified (cached), password hash, metadata saved", /* -> writing-image */
        "disk overlay made",                         /* -> configuring */
        "cloud-init seed written, domain defined",   /* -> booting */
};

/*
 * Create servers from one template; prints the first (image verified) and the
 * median of the rest, with the median of each part between two stages.
 */
static void bench_create(const struct vm_driver *vm, struct vm_conn *conn, const char *tmpl, unsigned image_mb,
                         unsigned creates, unsigned *serial)
{
        double *samples = calloc((size_t)creates * (N_STAGES + 1), sizeof(double));
        if (!samples)
                die("calloc", NULL);
        double *parts = samples + creates;
        double first = 0;
        for (unsigned i = 0; i < creates; i++) {
                char id[40];
                snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012u", (*serial)++);
                struct vm_create_spec spec = {
                        .id = id,
                        .name = "bench",
                        .hostname = "bench",
                        .plan = { .cpu_cores = 1, .cpu_threads = 1, .ram_mb = 512,
                                  .storage_mb = (int64_t)image_mb + 1024, .network_speed_mbps = 100,
                                  .max_snapshots = 1 },
                        .tmpl = { .id = tmpl, .image_slug = "1", .os = PROTO_VPS_OS_LINUX },
                        .password = "Secret#123",
                };
                /* One address each in 198.18.0.0/15 (RFC 2544, for benchmarks): the node refuses a shared one. */
                char net[128];
                snprintf(net, sizeof(net), "{\"ipv4\": [{\"address\": \"198.18.%u.%u\", \"prefix\": 32}]}",
                         (*serial / 254) % 256, *serial % 254 + 1);
                _cleanup_json_ json_t *netdoc = json_loads(net, 0, NULL);
                struct na_error ne = NA_ERROR_INIT;
                if (!netdoc || proto_vps_network_decode(netdoc, "network", &spec.network, &ne) < 0)
                        die("network", &ne);
                struct timing t = { .start_us = na_now_mono_us() };
                struct na_progress p = { .stage = on_stage, .userdata = &t };
                struct proto_vps_server srv;
                struct na_error e = NA_ERROR_INIT;
                if (vm->create(conn, &spec, &p, &srv, &e) < 0)
                        die("create", &e);
                for (size_t s = 0; s < N_STAGES; s++)
                        if (!t.stage_us[s])
                                die("create did not report every stage", NULL);
                double v = ms(t.stage_us[N_STAGES - 1] - t.start_us);
                if (i == 0)
                        first = v;
                samples[i] = v;
                uint64_t prev = t.start_us;
                for (size_t s = 0; s < N_STAGES; s++) {
                        parts[s * creates + i] = ms(t.stage_us[s] - prev);
                        prev = t.stage_us[s];
                }
        }
        unsigned n = creates > 1 ? creates - 1 : 1, from = creates > 1 ? 1 : 0;
        printf("vps.create to booting, %5u MB template: first %8.1f ms (sha256 of the image included), "
               "then median %6.1f ms over %u creates\n",
               image_mb, first, median_of(samples + from, n), n);
        for (size_t s = 0; s < N_STAGES; s++)
                printf("    %-68s median %6.2f ms\n", part_names[s], median_of(parts + s * creates + from, n));
        free(samples);
}

int main(int argc, char **argv)
{
        unsigned small_mb = 100, large_mb = 2048, creates = 9, servers = 1000;
        bool keep = false;
        static const struct option opts[] = { { "small-mb", 1, NULL, 's' }, { "large-mb", 1, NULL, 'l' },
                                              { "creates", 1, NULL, 'c' },  { "servers", 1, NULL, 'n' },
                                              { "keep", 0, NULL, 'k' },     { NULL, 0, NULL, 0 } };
        for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
                switch (o) {
                case 's': small_mb = (unsigned)atoi(optarg); break;
                case 'l': large_mb = (unsigned)atoi(optarg); break;
                case 'c': creates = (unsigned)atoi(optarg); break;
                case 'n': servers = (unsigned)atoi(optarg); break;
                case 'k': keep = true; break;
                default: fprintf(stderr, "usage: bench-vm [--small-mb N] [--large-mb N] [--creates N] [--servers N] [--keep]\n"); return 2;
                }
        }
        if (creates < 1 || servers < 1)
                die("--creates and --servers must be at least 1", NULL);
        if (!mkdtemp(root))
                die("mkdtemp", NULL);
        char images[256], state[256], templates[256], node[256], uri[300];
        snprintf(images, sizeof(images), "%s/images", root);
        snprintf(state, sizeof(state), "%s/state", root);
        snprintf(templates, sizeof(templates), "%s/templates.json", root);
        snprintf(node, sizeof(node), "%s/node.xml", root);
        struct na_error e = NA_ERROR_INIT;
        if (na_mkdir_p(images, 0755, &e) < 0 || na_mkdir_p(state, 0700, &e) < 0)
                die("mkdir", &e);

        char small_path[300], large_path[300], s_small[65], s_large[65];
        snprintf(small_path, sizeof(small_path), "%s/small.raw", images);
        snprintf(large_path, sizeof(large_path), "%s/large.raw", images);
        uint64_t t0 = na_now_mono_us();
        make_image(small_path, small_mb, s_small);
        make_image(large_path, large_mb, s_large);
        printf("images: %u MB and %u MB raw (made and hashed in %.0f ms)\n", small_mb, large_mb,
               ms(na_now_mono_us() - t0));
        char text[1024];
        snprintf(text, sizeof(text),
                 "[{\"id\":\"small\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\",\"path\":\"small.raw\","
                 "\"sha256\":\"%s\"},{\"id\":\"large\",\"imageSlug\":\"1\",\"os\":\"linux\",\"format\":\"raw\","
                 "\"path\":\"large.raw\",\"sha256\":\"%s\"}]",
                 s_small, s_large);
        if (na_atomic_write(templates, text, strlen(text), 0644, &e) < 0)
                die("templates", &e);

        /* A node file with the many servers, all running. */
        FILE *x = fopen(node, "w");
        if (!x)
                die("node file", NULL);
        fprintf(x, "<node><cpu><nodes>1</nodes><sockets>2</sockets><cores>32</cores><threads>2</threads>"
                   "<active>128</active><mhz>2400</mhz><model>x86_64</model></cpu><memory>536870912</memory>\n");
        for (unsigned i = 0; i < servers; i++)
                fprintf(x,
                        "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>"
                        "<name>vps-11111111-0000-4000-8000-%012u</name><uuid>11111111-0000-4000-8000-%012u</uuid>"
                        "<memory>524288</memory><vcpu>1</vcpu><os><type>hvm</type></os>"
                        "<test:runstate>1</test:runstate></domain>\n",
                        i, i);
        fprintf(x, "</node>\n");
        fclose(x);
        snprintf(uri, sizeof(uri), "test://%s", node);

        const struct vm_driver *vm = &vm_libvirt_driver;
        struct vm_options o = { .uri = uri, .state_dir = state, .templates_file = templates, .images_dir = images };
        struct vm_conn *conn = NULL;
        t0 = na_now_mono_us();
        if (vm->open(&o, &conn, &e) < 0)
                die("open", &e);
        printf("open test driver with %u servers: %.1f ms\n", servers, ms(na_now_mono_us() - t0));

        unsigned serial = 0;
        bench_create(vm, conn, "small", small_mb, creates, &serial);
        bench_create(vm, conn, "large", large_mb, creates, &serial);
        char peers[300];
        snprintf(peers, sizeof(peers), "%s/peers", root);
        if (na_mkdir_p(peers, 0700, &e) < 0)
                die("mkdir", &e);
        bench_create_peers(uri, peers, small_path, creates);

        /* hello inventory */
        int reps = 5;
        double best = 1e18;
        size_t count = 0;
        for (int r = 0; r < reps; r++) {
                t0 = na_now_mono_us();
                json_t *inv = NULL;
                if (vm->inventory(conn, &inv, &e) < 0)
                        die("inventory", &e);
                double v = ms(na_now_mono_us() - t0);
                count = json_array_size(inv);
                json_decref(inv);
                best = v < best ? v : best;
        }
        printf("inventory (hello) of %zu servers: %.2f ms (best of %d)\n", count, best, reps);

        /* One vps.status job per server, through the handler (decode, driver, encode). */
        struct agent_services services = { .state_dir = state, .vm = vm, .vm_conn = conn };
        struct job_ctx ctx;
        memset(&ctx, 0, sizeof(ctx));
        ctx.services = &services;
        t0 = na_now_mono_us();
        for (unsigned i = 0; i < servers; i++) {
                snprintf(ctx.target, sizeof(ctx.target), "11111111-0000-4000-8000-%012u", i);
                json_t *data = NULL;
                if (job_double_run("vps.status", &ctx, NULL, &data, &e) < 0)
                        die("vps.status", &e);
                json_decref(data);
        }
        double total = ms(na_now_mono_us() - t0);
        printf("%u vps.status jobs: %.1f ms (%.1f us each)\n", servers, total, total * 1000.0 / servers);

        /*
         * vps.network.set with every server's metadata on disk: its claim reads every
         * other server's record (under the driver's lock), the cost that grows with the node.
         */
        char metadir[300];
        snprintf(metadir, sizeof(metadir), "%s/vps", state);
        for (unsigned i = 0; i < servers; i++) {
                struct vm_meta m = { .name = (char *)"bench", .template_id = (char *)"small",
                                     .image_slug = (char *)"1", .has_network = true, .created_at_ms = 1 };
                snprintf(m.id, sizeof(m.id), "11111111-0000-4000-8000-%012u", i);
                snprintf(m.hostname, sizeof(m.hostname), "bench");
                m.plan = (struct proto_vps_plan){ 1, 1, 512, 1024, 0, 0, 1 };
                char net[128];
                snprintf(net, sizeof(net), "{\"ipv4\": [{\"address\": \"198.19.%u.%u\", \"prefix\": 32}]}",
                         (i / 254) % 256, i % 254 + 1);
                _cleanup_json_ json_t *netdoc = json_loads(net, 0, NULL);
                if (!netdoc || proto_vps_network_decode(netdoc, "network", &m.network, &e) < 0 ||
                    vm_meta_save(metadir, &m, &e) < 0)
                        die("metadata", &e);
        }
        unsigned sets = servers < 50 ? servers : 50;
        t0 = na_now_mono_us();
        for (unsigned i = 0; i < sets; i++) {
                snprintf(ctx.target, sizeof(ctx.target), "11111111-0000-4000-8000-%012u", i);
                char net[160];
                snprintf(net, sizeof(net), "{\"network\": {\"ipv4\": [{\"address\": \"198.18.200.%u\", \"prefix\": 32}]}}",
                         i + 1);
                json_t *params = json_loads(net, 0, NULL), *data = NULL;
                if (job_double_run("vps.network.set", &ctx, params, &data, &e) < 0)
                        die("vps.network.set", &e);
                json_decref(params);
                json_decref(data);
        }
        total = ms(na_now_mono_us() - t0);
        printf("vps.network.set with %u servers' metadata: %.2f ms each (%u jobs)\n", servers, total / sets, sets);

        vm->close(conn);
        if (!keep) {
                char *const rm[] = { (char *)"/bin/rm", (char *)"-rf", (char *)"--one-file-system", root, NULL };
                na_spawn(rm, NULL, NULL, 0, &e);
        } else
                printf("kept %s\n", root);
        return 0;
}
