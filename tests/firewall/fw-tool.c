/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A test helper around the firewall library and a few probes, run inside test
 * network namespaces by traffic.sh (and by hand when debugging):
 *
 *   fw-tool [-s STATE_DIR] [-t TABLE] [-n SHARDS] set VPS_ID FILE.json   apply, print the live configuration
 *   fw-tool [...] get VPS_ID | drift VPS_ID | remove VPS_ID | render VPS_ID FILE.json
 *   fw-tool [...] reconcile [KNOWN_ID...]                      ("-" alone: NULL, keep all)
 *   fw-tool [-t TABLE] table VPS_ID                            the server's shard table ("nodeagent-06")
 *   fw-tool [-t TABLE] guard VPS_ID MAC [ADDRESS...]           the server's anti-spoofing guard (fw_guard_set)
 *   fw-tool [-t TABLE] unguard VPS_ID | guard-render VPS_ID MAC [ADDRESS...]
 *   fw-tool probe-tcp HOST PORT TIMEOUT_MS                     prints ok, refused, unreachable or timeout
 *   fw-tool probe-ping HOST TIMEOUT_MS                         prints ok, unreachable or timeout
 *   fw-tool probe-udp HOST PORT TIMEOUT_MS                     one datagram to a port nobody listens on:
 *                                                              refused (the ICMP error came back) or timeout
 *   fw-tool serve PORT...                                      accept and close TCP connections until killed
 *   fw-tool blast HOST PORT COUNT                              send COUNT small UDP datagrams as fast as it
 *                                                              can, print the nanoseconds each took
 *                                                              (bench/firewall/bench-fw-path.sh)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/icmp6.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "firewall/fw.h"
#include "proto/firewall.h"

static int usage(void)
{
        fprintf(stderr, "usage: fw-tool [-s STATE_DIR] [-t TABLE] set|get|drift|remove|render|reconcile|table ...\n"
                        "       fw-tool probe-tcp HOST PORT MS | probe-ping HOST MS | probe-udp HOST PORT MS | serve PORT...\n");
        return 2;
}

static int fail(struct na_error *err)
{
        _cleanup_json_ json_t *j = na_error_to_json(err);
        char *text = json_dumps(j, JSON_COMPACT);
        fprintf(stderr, "fw-tool: %s\n%s\n", err->message, text ? text : "");
        free(text);
        return 1;
}

static void print_config(const struct fw_config *cfg)
{
        _cleanup_json_ json_t *j = proto_fw_encode(cfg);
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", text ? text : "null");
        free(text);
}

static int load_config(const char *file, struct fw_config *cfg, struct na_error *err)
{
        json_error_t jerr;
        _cleanup_json_ json_t *j = json_load_file(file, 0, &jerr);
        if (!j)
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "%s:%d: %s", file, jerr.line, jerr.text);
        return proto_fw_decode(j, cfg, err);
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai = NULL;
        char service[16];
        snprintf(service, sizeof(service), "%d", port);
        if (getaddrinfo(host, service, &hints, &ai) != 0 || !ai)
                return -1;
        memcpy(ss, ai->ai_addr, ai->ai_addrlen);
        *len = ai->ai_addrlen;
        freeaddrinfo(ai);
        return 0;
}

static int probe_tcp(const char *host, int port, int ms)
{
        struct sockaddr_storage ss;
        socklen_t len;
        if (resolve(host, port, &ss, &len) < 0)
                return usage();
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return 1;
        const char *result = "ok";
        if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
                if (errno != EINPROGRESS)
                        result = errno == ECONNREFUSED ? "refused" : "unreachable";
                else {
                        struct pollfd p = { .fd = fd, .events = POLLOUT };
                        int r = poll(&p, 1, ms);
                        int soerr = 0;
                        socklen_t sl = sizeof(soerr);
                        if (r == 0)
                                result = "timeout";
                        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)
                                result = soerr == ECONNREFUSED ? "refused" : "unreachable";
                }
        }
        close(fd);
        printf("%s\n", result);
        return 0;
}

static int probe_udp(const char *host, int port, int ms)
{
        struct sockaddr_storage ss;
        socklen_t len;
        if (resolve(host, port, &ss, &len) < 0)
                return usage();
        int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0)
                return 1;
        const char *result = "timeout";
        char byte = 0;
        if (send(fd, &byte, 1, 0) < 0)
                result = errno == ECONNREFUSED ? "refused" : "unreachable";
        else {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, ms) > 0 && recv(fd, &byte, 1, MSG_DONTWAIT) < 0)
                        result = errno == ECONNREFUSED ? "refused" : "unreachable";
                else if (p.revents & POLLIN)
                        result = "ok";
        }
        close(fd);
        printf("%s\n", result);
        return 0;
}

static int blast(const char *host, int port, long count)
{
        struct sockaddr_storage ss;
        socklen_t len;
        if (resolve(host, port, &ss, &len) < 0 || count <= 0)
                return usage();
        int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0)
                return 1;
        char payload[64] = { 0 };
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < count; i++)
                (void)send(fd, payload, sizeof(payload), 0); /* ICMP errors coming back fail a send now and then */
        clock_gettime(CLOCK_MONOTONIC, &b);
        close(fd);
        double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
        printf("%.0f\n", ns / (double)count);
        return 0;
}

static uint16_t checksum(const void *data, size_t len)
{
        const uint8_t *p = data;
        uint32_t sum = 0;
        for (size_t i = 0; i + 1 < len; i += 2)
                sum += (uint32_t)(p[i] << 8 | p[i + 1]);
        if (len & 1)
                sum += (uint32_t)(p[len - 1] << 8);
        while (sum >> 16)
                sum = (sum & 0xffff) + (sum >> 16);
        return htons((uint16_t)~sum);
}

/* One echo request on a raw ICMP socket; an echo reply with our id is "ok". */
static int probe_ping(const char *host, int ms)
{
        struct sockaddr_storage ss;
        socklen_t len;
        if (resolve(host, 0, &ss, &len) < 0)
                return usage();
        bool v6 = ss.ss_family == AF_INET6;
        int fd = socket(ss.ss_family, SOCK_RAW | SOCK_CLOEXEC, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
        if (fd < 0) {
                perror("fw-tool: raw socket");
                return 1;
        }
        uint16_t id = (uint16_t)getpid();
        uint8_t pkt[16] = { v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO, 0 };
        memcpy(pkt + 4, &id, 2);
        pkt[7] = 1;
        if (!v6) {
                uint16_t sum = checksum(pkt, sizeof(pkt));
                memcpy(pkt + 2, &sum, 2); /* the kernel computes ICMPv6 checksums itself */
        }
        if (sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&ss, len) < 0) {
                printf("unreachable\n");
                close(fd);
                return 0;
        }
        const char *result = "timeout";
        for (int left = ms; left > 0;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 100) == 0) {
                        left -= 100;
                        continue;
                }
                uint8_t buf[1500];
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n <= 0)
                        break;
                const uint8_t *icmp = buf;
                if (!v6) {
                        size_t ihl = (size_t)(buf[0] & 0x0f) * 4;
                        if ((size_t)n < ihl + 8)
                                continue;
                        icmp = buf + ihl;
                }
                uint8_t type = icmp[0];
                uint16_t rid;
                memcpy(&rid, icmp + 4, 2);
                if ((type == ICMP_ECHOREPLY && !v6) || (type == ICMP6_ECHO_REPLY && v6)) {
                        if (rid == id) {
                                result = "ok";
                                break;
                        }
                } else if ((type == ICMP_DEST_UNREACH && !v6) || (type == ICMP6_DST_UNREACH && v6)) {
                        result = "unreachable";
                        break;
                }
        }
        close(fd);
        printf("%s\n", result);
        return 0;
}

static int serve(int argc, char **argv)
{
        struct pollfd fds[16];
        int n = 0;
        for (int i = 0; i < argc && n < 16; i++) {
                int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), zero = 0, one = 1;
                struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)atoi(argv[i])),
                                          .sin6_addr = IN6ADDR_ANY_INIT };
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
                        perror("fw-tool: serve");
                        return 1;
                }
                fds[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
        }
        printf("serving\n");
        fflush(stdout);
        for (;;) {
                if (poll(fds, (nfds_t)n, -1) < 0 && errno != EINTR)
                        return 1;
                for (int i = 0; i < n; i++)
                        if (fds[i].revents & POLLIN) {
                                int c = accept4(fds[i].fd, NULL, NULL, SOCK_CLOEXEC);
                                if (c >= 0)
                                        close(c);
                        }
        }
}

int main(int argc, char **argv)
{
        struct fw_options opt = { .netns_fd = -1 };
        int i = 1;
        for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] && !argv[i][2]; i += 2) {
                if (argv[i][1] == 's')
                        opt.state_dir = argv[i + 1];
                else if (argv[i][1] == 't')
                        opt.table = argv[i + 1];
                else if (argv[i][1] == 'n')
                        opt.shards = (unsigned)atoi(argv[i + 1]);
                else
                        return usage();
        }
        if (i >= argc)
                return usage();
        const char *cmd = argv[i++];
        int left = argc - i;
        char **args = argv + i;

        if (streq(cmd, "probe-tcp") && left == 3)
                return probe_tcp(args[0], atoi(args[1]), atoi(args[2]));
        if (streq(cmd, "blast") && left == 3)
                return blast(args[0], atoi(args[1]), atol(args[2]));
        if (streq(cmd, "probe-udp") && left == 3)
                return probe_udp(args[0], atoi(args[1]), atoi(args[2]));
        if (streq(cmd, "probe-ping") && left == 2)
                return probe_ping(args[0], atoi(args[1]));
        if (streq(cmd, "serve") && left >= 1)
                return serve(left, args);

        struct na_error err = NA_ERROR_INIT;
        struct fw_config cfg, live;
        proto_fw_init(&cfg);
        proto_fw_init(&live);
        if (streq(cmd, "table") && left == 1) {
                char table[FW_TABLE_NAME_MAX];
                if (fw_server_table(opt.table, 0, args[0], table, &err) < 0)
                        return fail(&err);
                printf("%s\n", table);
                return 0;
        }
        if (streq(cmd, "render") && left == 2) {
                char *text = NULL;
                if (load_config(args[1], &cfg, &err) < 0 || fw_render_set(opt.table, args[0], &cfg, &text, &err) < 0)
                        return fail(&err);
                fputs(text, stdout);
                free(text);
                proto_fw_clear(&cfg);
                return 0;
        }

        if (streq(cmd, "guard-render") && left >= 2) {
                char *text = NULL;
                if (fw_guard_render(opt.table, args[0], args[1], (const char *const *)args + 2, (size_t)left - 2, &text,
                                    &err) < 0)
                        return fail(&err);
                fputs(text, stdout);
                free(text);
                return 0;
        }

        struct fw *fw = NULL;
        if (fw_open(&opt, &fw, &err) < 0)
                return fail(&err);
        int rc = 0;
        if (streq(cmd, "set") && left == 2) {
                if (load_config(args[1], &cfg, &err) < 0 || fw_set(fw, args[0], &cfg, &live, &err) < 0)
                        rc = fail(&err);
                else
                        print_config(&live);
        } else if (streq(cmd, "get") && left == 1) {
                if (fw_get(fw, args[0], &live, &err) < 0)
                        rc = fail(&err);
                else
                        print_config(&live);
        } else if (streq(cmd, "drift") && left == 1) {
                json_t *reasons = NULL;
                int n = fw_check_drift(fw, args[0], NULL, &reasons, &err);
                if (n < 0)
                        rc = fail(&err);
                else {
                        char *text = json_dumps(reasons, JSON_INDENT(2));
                        printf("%d\n%s\n", n, text ? text : "[]");
                        free(text);
                        json_decref(reasons);
                }
        } else if (streq(cmd, "guard") && left >= 2) {
                if (fw_guard_set(fw, args[0], args[1], (const char *const *)args + 2, (size_t)left - 2, &err) < 0)
                        rc = fail(&err);
        } else if (streq(cmd, "unguard") && left == 1) {
                if (fw_guard_remove(fw, args[0], &err) < 0)
                        rc = fail(&err);
        } else if (streq(cmd, "remove") && left == 1) {
                if (fw_remove(fw, args[0], &err) < 0)
                        rc = fail(&err);
        } else if (streq(cmd, "reconcile")) {
                struct fw_reconcile_stats st;
                const char *const *known = (left == 1 && streq(args[0], "-")) ? NULL : (const char *const *)args;
                if (fw_reconcile(fw, known, &st, &err) < 0)
                        rc = fail(&err);
                printf("applied %zu removed %zu failed %zu\n", st.applied, st.removed, st.failed);
        } else
                rc = usage();
        proto_fw_clear(&cfg);
        proto_fw_clear(&live);
        na_error_clear(&err);
        fw_close(fw);
        return rc;
}
