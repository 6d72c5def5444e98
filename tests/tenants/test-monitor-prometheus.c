/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The Prometheus endpoint (agent/daemon/prometheus-http.c) with a large page and a slow reader
 * (gcc -fanalyzer, issue 20): the page goes out whole however slowly the scraper reads,
 * without ever blocking the loop. It used to write with send() on its non-blocking
 * socket and ignore a short write: a page larger than the socket buffers was cut. The
 * real loop runs in a thread; the health callback writes a 4.7 MiB page; the client
 * shrinks its receive buffer and sleeps before reading.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/base/loop.h"
#include "agent/daemon/prometheus-http.h"

#define PAGE_LINES 65536
#define LINE_BYTES 75 /* the line below: a page of 4.7 MiB */

static void health(void *userdata, FILE *out)
{
        (void)userdata;
        for (int i = 0; i < PAGE_LINES; i++)
                fprintf(out, "nodeagent_test_line{n=\"%08d\"} %040d\n", i, i);
}

static void *run_loop(void *arg)
{
        loop_run(arg);
        return NULL;
}

static void quit(void *arg)
{
        loop_quit(arg, 0);
}

static int free_port(void)
{
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        close(fd);
        return ntohs(a.sin_port);
}

static void test_large_page_slow_reader(void **state)
{
        (void)state;
        struct loop *l = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(loop_new(&l, &err), 0);
        int port = free_port();
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        struct prometheus *p = NULL;
        assert_int_equal(prometheus_open(l, addr, NULL, health, NULL, &p, &err), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, run_loop, l), 0);

        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        const char *req = "GET /metrics HTTP/1.0\r\n\r\n";
        assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
        struct timespec nap = { 0, 300 * 1000000L };
        nanosleep(&nap, NULL); /* a slow scraper: the agent's socket buffer fills meanwhile */
        size_t cap = 8u << 20, got = 0;
        char *buf = malloc(cap);
        assert_non_null(buf);
        for (;;) {
                ssize_t n = recv(fd, buf + got, cap - got, 0);
                if (n <= 0)
                        break;
                got += (size_t)n;
                if (got < 65536)
                        nanosleep(&(struct timespec){ 0, 20 * 1000000L }, NULL);
        }
        close(fd);
        assert_true(loop_post(l, quit, l) == 0);
        pthread_join(t, NULL);
        prometheus_close(p);
        loop_free(l);

        buf[got < cap ? got : cap - 1] = '\0';
        char *body = strstr(buf, "\r\n\r\n");
        assert_non_null(body);
        body += 4;
        size_t want = (size_t)PAGE_LINES * LINE_BYTES;
        const char *cl = strstr(buf, "Content-Length: ");
        assert_non_null(cl);
        assert_int_equal(strtoull(cl + 16, NULL, 10), want);
        print_message("received %zu of %zu body bytes\n", got - (size_t)(body - buf), want);
        assert_int_equal(got - (size_t)(body - buf), want);
        free(buf);
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_large_page_slow_reader) };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
