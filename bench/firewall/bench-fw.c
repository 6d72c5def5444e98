/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Firewall benchmark (run by hand; prints figures beside their limit and peer, asserts nothing):
 *
 *   bench-fw [--servers N] [--rules R] [--changes C] [--shards S] [--rounds K] [--nft PATH]
 *
 * In private network namespaces of its own (never the host's ruleset):
 *  1. N servers x R rules applied one fw_set() each (this also stores them);
 *  2. the full ruleset applied from the stored configurations by fw_reconcile()
 *     in a fresh namespace: the agent's start (one batch per shard table);
 *  3. the limit of 2: the same shard batches, built and encoded beforehand, only
 *     committed (the kernel's own time), in another fresh namespace; 2 and 3 run
 *     K times in turn (default 5, at most 9) and the best of each is compared;
 *  4. the same ruleset written in nft syntax and applied with `nft -f`, in fresh
 *     namespaces, in the same run: the peer;
 *  5. the migration from the single-table layout before shards (loaded with nft -f,
 *     then one fw_reconcile: one batch);
 *  6. one server's rules changed C times at that size, in the namespace of 3 (the
 *     batch alone, then fw_set without and with the live read-back the job returns).
 * Targets (issue 15): one server's change <= 1 ms median; full apply <= 1.1 x the
 * kernel's commit of the same batches.
 */
#include <dirent.h>
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

#include "common/names.h"
#include "firewall/fw-handle.h" /* the breakdown: reading the stored configurations, building, encoding, commit */
#include "firewall/fw-internal.h"
#include "firewall/fw.h"
#include "proto/firewall.h"

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void server_id(unsigned s, char id[37])
{
        snprintf(id, 37, "5e%06x-0000-4000-8000-%012x", s, s * 7919u);
}

/* A plausible server: ssh from an office, web, a few lists and ranges, outbound limits. */
static void make_config(unsigned s, unsigned nrules, unsigned variant, struct fw_config *cfg)
{
        proto_fw_init(cfg);
        cfg->enabled = true;
        cfg->inbound_policy = FW_ACTION_DENY;
        cfg->outbound_policy = FW_ACTION_ALLOW;
        cfg->rules = calloc(nrules, sizeof(*cfg->rules));
        cfg->n_rules = nrules;
        for (unsigned i = 0; i < nrules; i++) {
                struct fw_rule *r = &cfg->rules[i];
                const char *reason = NULL;
                char text[64];
                r->id = i + 1;
                r->enabled = true;
                r->type = i % 3 == 2 ? FW_OUTBOUND : FW_INBOUND;
                r->protocol = i % 4 == 3 ? FW_PROTO_UDP : FW_PROTO_TCP;
                r->action = i % 5 == 4 ? FW_ACTION_REJECT : r->type == FW_INBOUND ? FW_ACTION_ALLOW : FW_ACTION_DENY;
                switch (i % 4) {
                case 0:
                        snprintf(text, sizeof(text), "%u", 1000 + i + variant);
                        break;
                case 1:
                        snprintf(text, sizeof(text), "%u-%u", 2000 + i, 2100 + i + variant);
                        break;
                case 2:
                        snprintf(text, sizeof(text), "80,443,%u", 8000 + i + variant);
                        break;
                default:
                        snprintf(text, sizeof(text), "%u", 5000 + i);
                        break;
                }
                proto_fw_ports_parse(text, &r->port, &reason);
                if (i % 2 == 0) {
                        snprintf(text, sizeof(text), "10.%u.%u.0/24", (s >> 8) & 0xff, s & 0xff);
                        proto_fw_addr_parse(text, r->type == FW_INBOUND ? &r->source : &r->destination, &reason);
                }
                snprintf(r->comment, sizeof(r->comment), "rule %u of server %u", i + 1, s);
        }
}

/*
 * The same ruleset in nft syntax: what the library writes (a port list is one rule
 * per port) or, with sets, as one writes it for nft (a port list is an anonymous set).
 */
static void nft_rule_port(FILE *f, const char *ports, const struct fw_rule *r)
{
        char text[512];
        fputs("\t\t", f);
        if (r->source.family)
                fprintf(f, "%s saddr %s ", r->source.family == 2 ? "ip" : "ip6",
                        proto_fw_addr_format(&r->source, text, sizeof(text)));
        if (r->destination.family)
                fprintf(f, "%s daddr %s ", r->destination.family == 2 ? "ip" : "ip6",
                        proto_fw_addr_format(&r->destination, text, sizeof(text)));
        const char *proto = proto_fw_protocols[r->protocol];
        if (ports)
                fprintf(f, "%s dport %s ", proto, ports);
        else if (r->protocol != FW_PROTO_ALL)
                fprintf(f, "meta l4proto %s ", proto);
        fputs("counter", f);
        if (r->enabled)
                fprintf(f, " %s", r->action == FW_ACTION_ALLOW ? "accept"
                                  : r->action == FW_ACTION_DENY ? "drop"
                                  : r->protocol == FW_PROTO_TCP ? "reject with tcp reset"
                                                                : "reject");
        fprintf(f, " comment \"%s\"\n", r->comment);
}

static void nft_rule(FILE *f, const struct fw_rule *r, bool sets)
{
        char text[512];
        if (r->port.kind == FW_PORT_LIST && sets) {
                char list[512];
                snprintf(text, sizeof(text), "{ %s }", proto_fw_ports_format(&r->port, list, sizeof(list)));
                nft_rule_port(f, text, r);
        } else if (r->port.kind == FW_PORT_LIST) {
                for (size_t i = 0; i < r->port.n; i++) {
                        snprintf(text, sizeof(text), "%u", r->port.v[i]);
                        nft_rule_port(f, text, r);
                }
        } else
                nft_rule_port(f, r->port.kind == FW_PORT_ANY ? NULL : proto_fw_ports_format(&r->port, text, sizeof(text)),
                              r);
}

/* The head of one table in nft syntax: maps and base chains, as fw_build_infra makes them. */
static void nft_table_head(FILE *f, const char *table)
{
        fprintf(f,
                "table inet %s {\n"
                "\tmap vps-out-map {\n\t\ttype ifname : verdict\n\t}\n"
                "\tmap vps-in-map {\n\t\ttype ifname : verdict\n\t}\n"
                "\tchain vps-out {\n\t\ttype filter hook forward priority filter; policy accept;\n"
                "\t\tct state established,related accept\n\t\tiifname vmap @vps-out-map\n\t}\n"
                "\tchain vps-in {\n\t\ttype filter hook forward priority filter + 10; policy accept;\n"
                "\t\tct state established,related accept\n\t\toifname vmap @vps-in-map\n\t}\n",
                table);
}

/* Whether server s belongs in table t (shards 0: the one table); fills its id and tap name. */
static bool in_table(unsigned s, unsigned shards, unsigned t, char id[37], char ifname[NA_IFNAME_LEN])
{
        server_id(s, id);
        na_vps_ifname(id, ifname);
        return !shards || fw_shard_of(ifname, shards) == t;
}

/*
 * The ruleset in nft syntax: shards > 0: the sharded layout ("nodeagent-NN", each
 * server in its shard); shards = 0: the single table "nodeagent" of the layout before.
 */
static void nft_ruleset(FILE *f, struct fw_config *cfgs, unsigned n, bool sets, unsigned shards)
{
        unsigned tables = shards ? shards : 1;
        for (unsigned t = 0; t < tables; t++) {
                char table[FW_TABLE_NAME_MAX];
                if (shards)
                        fw_shard_table(FW_DEFAULT_TABLE, t, table);
                else
                        snprintf(table, sizeof(table), "%s", FW_DEFAULT_TABLE);
                nft_table_head(f, table);
                for (unsigned s = 0; s < n; s++) {
                        char id[37], ifname[NA_IFNAME_LEN];
                        if (!in_table(s, shards, t, id, ifname))
                                continue;
                        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                                fprintf(f, "\tchain %s-%s {\n\t\tcomment \"vps %s\"\n", ifname,
                                        dir == FW_INBOUND ? "in" : "out", id);
                                for (size_t i = 0; i < cfgs[s].n_rules; i++)
                                        if ((int)cfgs[s].rules[i].type == dir)
                                                nft_rule(f, &cfgs[s].rules[i], sets);
                                enum fw_action p = dir == FW_INBOUND ? cfgs[s].inbound_policy : cfgs[s].outbound_policy;
                                fprintf(f, "\t\tcounter %s\n\t}\n", p == FW_ACTION_ALLOW ? "accept" : "drop");
                        }
                }
                fputs("}\n", f);
                for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                        bool any = false;
                        for (unsigned s = 0; s < n; s++) {
                                char id[37], ifname[NA_IFNAME_LEN];
                                if (!in_table(s, shards, t, id, ifname))
                                        continue;
                                if (!any)
                                        fprintf(f, "add element inet %s %s {", table,
                                                dir == FW_INBOUND ? "vps-in-map" : "vps-out-map");
                                fprintf(f, "%s \"%s\" : jump %s-%s", any ? "," : "", ifname, ifname,
                                        dir == FW_INBOUND ? "in" : "out");
                                any = true;
                        }
                        if (any)
                                fputs(" }\n", f);
                }
        }
}

static int run(char *const argv[])
{
        pid_t pid;
        if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
                return -1;
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void remove_tree(const char *dir)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/firewall", dir);
        DIR *d = opendir(path);
        for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d)) {
                char file[1024];
                snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
                if (de->d_name[0] != '.')
                        unlink(file);
        }
        if (d)
                closedir(d);
        rmdir(path);
        rmdir(dir);
}

/*
 * A fresh network namespace for the next phase. The one left stays referenced until
 * the end: tearing a namespace with thousands of rules down runs in a kernel worker
 * and would compete with the next measurement for the CPUs.
 */
static int kept_ns[32];
static int n_kept_ns;

static int fresh_netns(void)
{
        if (n_kept_ns < 32)
                kept_ns[n_kept_ns++] = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        return unshare(CLONE_NEWNET);
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static int die(const char *what, struct na_error *err)
{
        fprintf(stderr, "bench-fw: %s: %s\n", what, err->message);
        return 1;
}

/* nft -f of a ruleset file in a fresh namespace (this thread comes back home after); ms or < 0. */
static double nft_file(const char *nft_path, const char *path)
{
        int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (home < 0 || fresh_netns() < 0)
                return -1;
        char nft_f[] = "-f", *file = strdup(path), *nft = strdup(nft_path);
        char *nft_argv[] = { nft, nft_f, file, NULL };
        double t0 = now_ms();
        int rc = run(nft_argv);
        double t = now_ms() - t0;
        free(file);
        free(nft);
        if (setns(home, CLONE_NEWNET) < 0)
                return -1;
        close(home);
        if (rc != 0) {
                fprintf(stderr, "bench-fw: %s -f %s failed (%d)\n", nft_path, path, rc);
                return -1;
        }
        return t;
}

static int write_ruleset(const char *path, struct fw_config *cfgs, unsigned n, bool sets, unsigned shards)
{
        FILE *f = fopen(path, "we");
        if (!f)
                return -1;
        nft_ruleset(f, cfgs, n, sets, shards);
        return fclose(f);
}

struct stats {
        double mean, median, p99;
};

static struct stats summarize(double *v, unsigned n)
{
        struct stats st = { 0 };
        if (!n)
                return st;
        qsort(v, n, sizeof(double), cmp_double);
        for (unsigned i = 0; i < n; i++)
                st.mean += v[i] / n;
        unsigned p99 = (n * 99) / 100 < n ? (n * 99) / 100 : n - 1;
        st.median = v[n / 2];
        st.p99 = v[p99];
        return st;
}

int main(int argc, char **argv)
{
        unsigned n = 1000, nrules = 10, changes = 200, shards = FW_DEFAULT_SHARDS, rounds = 5;
        char nft_default[] = "nft", *nft_path = nft_default;
        static const struct option opts[] = { { "servers", required_argument, NULL, 's' },
                                               { "rules", required_argument, NULL, 'r' },
                                               { "changes", required_argument, NULL, 'c' },
                                               { "shards", required_argument, NULL, 'S' },
                                               { "nft", required_argument, NULL, 'n' },
                                               { "rounds", required_argument, NULL, 'R' },
                                               { 0 } };
        for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
                if (c == 's')
                        n = (unsigned)atoi(optarg);
                else if (c == 'r')
                        nrules = (unsigned)atoi(optarg);
                else if (c == 'c')
                        changes = (unsigned)atoi(optarg);
                else if (c == 'S')
                        shards = (unsigned)atoi(optarg);
                else if (c == 'n')
                        nft_path = optarg;
                else if (c == 'R')
                        rounds = (unsigned)atoi(optarg);
                else
                        return 2;
        }
        if (n == 0 || nrules == 0 || nrules > FW_RULES_MAX || shards == 0 || shards > FW_SHARDS_MAX || rounds == 0 ||
            rounds > 9)
                return 2;
        if (unshare(CLONE_NEWNET) < 0) {
                perror("bench-fw: unshare(CLONE_NEWNET) (needs root)");
                return 77;
        }
        char dir[] = "/tmp/bench-fw.XXXXXX";
        if (!mkdtemp(dir))
                return 1;

        struct fw_config *cfgs = calloc(n, sizeof(*cfgs));
        for (unsigned s = 0; s < n; s++)
                make_config(s, nrules, 0, &cfgs[s]);

        /* 1. one fw_set per server, storing the configurations */
        struct na_error err = NA_ERROR_INIT;
        struct fw *fw = NULL;
        struct fw_options opt = { .state_dir = dir, .shards = shards, .netns_fd = -1 };
        if (fw_open(&opt, &fw, &err) < 0)
                return die("open", &err);
        double t0 = now_ms();
        for (unsigned s = 0; s < n; s++) {
                char id[37];
                server_id(s, id);
                if (fw_set(fw, id, &cfgs[s], NULL, &err) < 0)
                        return die("set", &err);
        }
        double one_by_one = now_ms() - t0;
        fw_close(fw);

        /*
         * 2 and 3, `rounds` times in turn (the machine may be busy with other work: the
         * best of each is compared, and the spread printed)
         */
        struct fw_reconcile_stats st;
        struct nft_nl nl = { 0 };
        double full = 1e18, full_max = 0, t_kernel = 1e18, kernel_max = 0, t_build = 0, t_encode = 0, t_load = 0,
               t_raw = 0;
        size_t n_ops = 0;
        for (unsigned round = 0; round < rounds; round++) {
                /* 2. the agent's start: everything stored, fresh namespace */
                if (fresh_netns() < 0)
                        return 1;
                if (fw_open(&opt, &fw, &err) < 0)
                        return die("open", &err);
                t0 = now_ms();
                if (fw_reconcile(fw, NULL, &st, &err) < 0)
                        return die("reconcile", &err);
                double t = now_ms() - t0;
                full = t < full ? t : full;
                full_max = t > full_max ? t : full_max;
                /*
                 * what the builder thread reads: the operations kept beside each stored
                 * configuration; decoding the configurations instead (when those are missing)
                 */
                char **ids = NULL;
                size_t n_ids = 0;
                t0 = now_ms();
                if (fw_state_list(fw, &ids, &n_ids, &err) < 0)
                        return die("list", &err);
                for (size_t i = 0; i < n_ids; i++) {
                        char ifname[NA_IFNAME_LEN], table[FW_TABLE_NAME_MAX];
                        struct nft_raw *raw = NULL;
                        na_vps_ifname(ids[i], ifname);
                        fw_shard_table(FW_DEFAULT_TABLE, fw_shard_of(ifname, shards), table);
                        if (fw_state_load_raw(fw, ids[i], table, &raw) < 0) {
                                fprintf(stderr, "bench-fw: no usable operations kept for %s\n", ids[i]);
                                return 1;
                        }
                        free(raw);
                }
                t_raw = now_ms() - t0;
                t0 = now_ms();
                for (size_t i = 0; i < n_ids; i++) {
                        struct fw_config c;
                        uint32_t next;
                        if (fw_state_load(fw, ids[i], &c, &next, &err) < 0)
                                return die("load", &err);
                        proto_fw_clear(&c);
                }
                t_load = now_ms() - t0;
                nft_strv_free(ids, n_ids);
                fw_close(fw);

                /* 3. its limit: the same shard batches built and encoded first, then only committed (fresh namespace) */
                if (fresh_netns() < 0)
                        return 1;
                if (nl.sock)
                        nft_nl_close(&nl);
                if (nft_nl_open(&nl, -1, &err) < 0)
                        return die("netlink", &err);
                struct nft_batch *sb = calloc(shards, sizeof(*sb));
                char **wire = calloc(shards, sizeof(*wire));
                size_t *wire_len = calloc(shards, sizeof(*wire_len));
                n_ops = 0;
                t0 = now_ms();
                for (unsigned k = 0; k < shards; k++) {
                        char table[FW_TABLE_NAME_MAX];
                        fw_shard_table(FW_DEFAULT_TABLE, k, table);
                        nft_batch_init(&sb[k], table);
                        if (fw_build_infra(&sb[k], table, &err) < 0)
                                return die("build", &err);
                        for (unsigned s = 0; s < n; s++) {
                                char id[37], ifname[NA_IFNAME_LEN];
                                server_id(s, id);
                                na_vps_ifname(id, ifname);
                                if (fw_shard_of(ifname, shards) == k &&
                                    fw_build_server(&sb[k], table, id, &cfgs[s], &err) < 0)
                                        return die("build", &err);
                        }
                        n_ops += sb[k].n;
                }
                t_build = now_ms() - t0;
                t0 = now_ms();
                for (unsigned k = 0; k < shards; k++)
                        if (nft_batch_serialize(&sb[k], 1, &wire[k], &wire_len[k], &err) < 0)
                                return die("encode", &err);
                t_encode = now_ms() - t0;
                t0 = now_ms();
                for (unsigned k = 0; k < shards; k++)
                        if (nft_nl_send(&nl, &sb[k], wire[k], wire_len[k], 1, &err) < 0)
                                return die("commit", &err);
                t = now_ms() - t0;
                t_kernel = t < t_kernel ? t : t_kernel;
                kernel_max = t > kernel_max ? t : kernel_max;
                for (unsigned k = 0; k < shards; k++) {
                        nft_batch_clear(&sb[k]);
                        free(wire[k]);
                }
                free(sb);
                free(wire);
                free(wire_len);
        }

        /* 4. nft -f of the same ruleset, fresh namespaces, same run: identical kernel objects, then with sets */
        double peer[2];
        char path[64];
        snprintf(path, sizeof(path), "%s/ruleset.nft", dir);
        for (int sets = 0; sets <= 1; sets++) {
                if (write_ruleset(path, cfgs, n, sets, shards) != 0 || (peer[sets] = nft_file(nft_path, path)) < 0)
                        return 1;
        }

        /* 5. the migration from the single table of the layout before shards: loaded by nft, then one reconcile */
        int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (write_ruleset(path, cfgs, n, false, 0) != 0 || home < 0 || fresh_netns() < 0)
                return 1;
        char nft_f[] = "-f";
        char *nft_argv[] = { nft_path, nft_f, path, NULL };
        if (run(nft_argv) != 0) {
                fprintf(stderr, "bench-fw: %s -f %s (old layout) failed\n", nft_path, path);
                return 1;
        }
        unlink(path);
        if (fw_open(&opt, &fw, &err) < 0)
                return die("open", &err);
        struct fw_reconcile_stats mst;
        t0 = now_ms();
        if (fw_reconcile(fw, NULL, &mst, &err) < 0)
                return die("migration", &err);
        double migration = now_ms() - t0;
        fw_close(fw);
        if (setns(home, CLONE_NEWNET) < 0)
                return 1;
        close(home);

        /*
         * 6. one server's change at that size, in the namespace 3 filled; in turn with the
         * same change where every server is in one table (the layout before shards), filled now
         */
        double *lat[4];
        for (int k = 0; k < 4; k++)
                lat[k] = calloc(changes ? changes : 1, sizeof(double));
        struct nft_nl nl1;
        if (fresh_netns() < 0)
                return 1;
        if (nft_nl_open(&nl1, -1, &err) < 0)
                return die("netlink", &err);
        char one_table[FW_TABLE_NAME_MAX];
        fw_shard_table(FW_DEFAULT_TABLE, 0, one_table);
        struct nft_batch all;
        nft_batch_init(&all, one_table);
        if (fw_build_infra(&all, one_table, &err) < 0)
                return die("build", &err);
        for (unsigned s = 0; s < n; s++) {
                char sid[37];
                server_id(s, sid);
                if (fw_build_server(&all, one_table, sid, &cfgs[s], &err) < 0)
                        return die("build", &err);
        }
        if (nft_nl_apply(&nl1, &all, &err) < 0)
                return die("one table", &err);
        nft_batch_clear(&all);
        char id[37], ifname[NA_IFNAME_LEN], table[FW_TABLE_NAME_MAX];
        server_id(n / 2, id);
        na_vps_ifname(id, ifname);
        fw_shard_table(FW_DEFAULT_TABLE, fw_shard_of(ifname, shards), table);
        struct fw_config alt[2];
        make_config(n / 2, nrules, 0, &alt[0]);
        make_config(n / 2, nrules, 7, &alt[1]);
        if (fw_open(&opt, &fw, &err) < 0)
                return die("open", &err);
        for (int k = 0; k < 3; k++)
                for (unsigned i = 0; i < changes; i++) {
                        const struct fw_config *c = &alt[(i + 1) % 2];
                        struct fw_config live;
                        t0 = now_ms();
                        if (k == 0) {
                                /* the change itself: its batch, built and committed; then the same in one table */
                                for (int one = 0; one <= 1; one++) {
                                        const char *t = one ? one_table : table;
                                        struct nft_batch b;
                                        nft_batch_init(&b, t);
                                        if (fw_build_infra(&b, t, &err) < 0 || fw_build_server(&b, t, id, c, &err) < 0 ||
                                            nft_nl_apply(one ? &nl1 : &nl, &b, &err) < 0)
                                                return die("change", &err);
                                        nft_batch_clear(&b);
                                        if (!one) {
                                                lat[0][i] = now_ms() - t0;
                                                t0 = now_ms();
                                        }
                                }
                                lat[3][i] = now_ms() - t0;
                                continue;
                        } else if (fw_set(fw, id, c, k == 2 ? &live : NULL, &err) < 0)
                                return die("change", &err);
                        lat[k][i] = now_ms() - t0;
                        if (k == 2)
                                proto_fw_clear(&live);
                }
        fw_close(fw);
        nft_nl_close(&nl);
        nft_nl_close(&nl1);

        unsigned kernel_rules = 0;
        for (unsigned s = 0; s < n; s++) {
                kernel_rules += 2; /* the policies */
                for (size_t i = 0; i < cfgs[s].n_rules; i++)
                        kernel_rules += cfgs[s].rules[i].port.kind == FW_PORT_LIST ? (unsigned)cfgs[s].rules[i].port.n : 1;
        }
        printf("firewall benchmark: %u servers x %u rules (%u rules, %u in the kernel), %u shard tables\n", n, nrules,
               n * nrules, kernel_rules, shards);
        static const char *const what[3] = { "one server's change (batch):", "... fw_set, stored (fsync):",
                                              "... and read back live:" };
        struct stats ls[4] = { 0 };
        for (int k = 0; changes && k < 4; k++)
                ls[k] = summarize(lat[k], changes);
        for (int k = 0; changes && k < 3; k++) {
                char note[64] = "";
                if (k == 0)
                        snprintf(note, sizeof(note), " (%u shards; target: median <= 1 ms)", shards);
                printf("  %-34s median %.3f ms, p99 %.3f ms, mean %.3f ms%s\n", what[k], ls[k].median, ls[k].p99,
                       ls[k].mean, note);
        }
        if (changes)
                printf("  the same batch, every server in one table (the layout before shards, in turn with the first "
                       "line): median %.3f ms, p99 %.3f ms (%.1fx the sharded median)\n",
                       ls[3].median, ls[3].p99, ls[3].median / ls[0].median);
        printf("  full apply (reconcile at start):   %9.1f ms (best of %u, worst %.1f; %zu servers, %u batches, %zu "
               "operations)\n",
               full, rounds, full_max, st.applied, shards, n_ops);
        printf("  the kernel's commit, same batches: %9.1f ms (best of %u, worst %.1f)  full apply / commit = %.3f "
               "(target <= 1.1)\n",
               t_kernel, rounds, kernel_max, full / t_kernel);
        printf("    the agent's own work, overlapped with the commits by a second thread: reading each server's "
               "operations kept beside its configuration %.1f ms\n",
               t_raw);
        printf("    (without them: decoding the stored configurations %.1f ms, building the batches %.1f ms, encoding "
               "them %.1f ms)\n",
               t_load, t_build, t_encode);
        printf("  nft -f, same ruleset (peer):       %9.1f ms  full apply / nft -f = %.3f\n", peer[0], full / peer[0]);
        printf("  nft -f, port lists as sets:        %9.1f ms  full apply / nft -f = %.3f\n", peer[1], full / peer[1]);
        printf("  migration from the single table:   %9.1f ms (%zu servers moved in one batch, old table deleted)\n",
               migration, mst.applied);
        printf("  one fw_set per server:             %9.1f ms (%.3f ms per server, stored with fsync)\n", one_by_one,
               one_by_one / n);

        /* leave nothing behind: the namespaces go with the process, the state directory here */
        remove_tree(dir);
        for (unsigned s = 0; s < n; s++)
                proto_fw_clear(&cfgs[s]);
        proto_fw_clear(&alt[0]);
        proto_fw_clear(&alt[1]);
        free(cfgs);
        for (int k = 0; k < 4; k++)
                free(lat[k]);
        for (int i = 0; i < n_kept_ns; i++)
                if (kept_ns[i] >= 0)
                        close(kept_ns[i]);
        return 0;
}
