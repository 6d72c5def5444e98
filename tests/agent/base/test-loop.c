/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/base/loop.h: timers fire in deadline order, re-arm replaces, disarm, loop_post from
 * other threads keeps each thread's order, fd watches, signals, quit codes.
 * Every test has a watchdog timer: a bug fails the test instead of hanging it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <fcntl.h>

#include "agent/base/loop.h"
#include "common/timeutil.h"

#define WATCHDOG_MS 20000

struct fixture {
        struct loop *loop;
        struct loop_timer *watchdog;
};

static void watchdog_fired(void *userdata)
{
        struct fixture *f = userdata;
        loop_quit(f->loop, -99);
}

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        struct na_error err = NA_ERROR_INIT;
        if (loop_new(&f->loop, &err) < 0) {
                fprintf(stderr, "loop_new: %s\n", err.message);
                return -1;
        }
        f->watchdog = loop_timer_new(f->loop, watchdog_fired, f);
        loop_timer_arm_ms(f->watchdog, WATCHDOG_MS);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        loop_timer_free(f->watchdog);
        loop_free(f->loop);
        free(f);
        return 0;
}

static int run(struct fixture *f)
{
        int code = loop_run(f->loop);
        assert_int_not_equal(code, -99); /* the watchdog did not have to stop it */
        return code;
}

/* ---- timers ---- */

struct tick {
        struct fixture *f;
        int id;
        int *order;
        int *n;
        int fired;
        int rearm_left;
        bool quit;
        struct loop_timer *t;
};

static void tick_fn(void *userdata)
{
        struct tick *k = userdata;
        k->fired++;
        if (k->order)
                k->order[(*k->n)++] = k->id;
        if (k->rearm_left > 0) {
                k->rearm_left--;
                loop_timer_arm_ms(k->t, 1);
                return;
        }
        if (k->quit)
                loop_quit(k->f->loop, 7);
}

static void test_timers_in_deadline_order(void **state)
{
        struct fixture *f = *state;
        static const int delays[] = { 60, 10, 40, 0, 30, 20, 50 };
        struct tick ticks[7];
        int order[7], n = 0;
        uint64_t start = na_now_mono_us();
        for (int i = 0; i < 7; i++) {
                ticks[i] = (struct tick){ .f = f, .id = delays[i], .order = order, .n = &n, .quit = delays[i] == 60 };
                ticks[i].t = loop_timer_new(f->loop, tick_fn, &ticks[i]);
                loop_timer_arm_ms(ticks[i].t, (uint64_t)delays[i]);
                assert_true(loop_timer_armed(ticks[i].t));
        }
        assert_int_equal(run(f), 7);
        assert_true(na_now_mono_us() - start >= 60000); /* never early */
        assert_int_equal(n, 7);
        static const int want[] = { 0, 10, 20, 30, 40, 50, 60 };
        assert_memory_equal(order, want, sizeof(want));
        for (int i = 0; i < 7; i++) {
                assert_false(loop_timer_armed(ticks[i].t));
                loop_timer_free(ticks[i].t);
        }
}

static void test_timer_rearm_and_disarm(void **state)
{
        struct fixture *f = *state;
        /* Re-arms itself five times from its own callback, then quits. */
        struct tick again = { .f = f, .rearm_left = 5, .quit = true };
        again.t = loop_timer_new(f->loop, tick_fn, &again);
        loop_timer_arm_ms(again.t, 1);

        /* Armed twice: the second arming replaces the first, it fires once. */
        struct tick twice = { .f = f };
        twice.t = loop_timer_new(f->loop, tick_fn, &twice);
        loop_timer_arm_ms(twice.t, 5);
        loop_timer_arm_ms(twice.t, 2);

        /* Disarmed, or freed while armed: never fires. */
        struct tick off = { .f = f };
        off.t = loop_timer_new(f->loop, tick_fn, &off);
        loop_timer_arm_ms(off.t, 1);
        loop_timer_disarm(off.t);
        loop_timer_disarm(off.t); /* twice is fine */
        assert_false(loop_timer_armed(off.t));
        struct tick freed = { .f = f };
        freed.t = loop_timer_new(f->loop, tick_fn, &freed);
        loop_timer_arm_ms(freed.t, 1);
        loop_timer_free(freed.t);
        loop_timer_free(NULL);

        assert_int_equal(run(f), 7); /* "again" quits after its 6th firing */
        assert_int_equal(again.fired, 6);
        assert_false(loop_timer_armed(again.t));

        /* Then run well past every deadline above. */
        struct tick end = { .f = f, .quit = true };
        end.t = loop_timer_new(f->loop, tick_fn, &end);
        loop_timer_arm_ms(end.t, 30);
        assert_int_equal(run(f), 7);
        assert_int_equal(end.fired, 1);
        assert_int_equal(twice.fired, 1);
        assert_int_equal(off.fired, 0);
        assert_int_equal(freed.fired, 0);
        loop_timer_free(again.t);
        loop_timer_free(twice.t);
        loop_timer_free(off.t);
        loop_timer_free(end.t);
}

struct self_free {
        struct fixture *f;
        struct loop_timer *t;
        int fired;
};

static void self_free_fn(void *userdata)
{
        struct self_free *s = userdata;
        s->fired++;
        loop_timer_free(s->t); /* a callback may free its own timer */
        s->t = NULL;
        loop_quit(s->f->loop, 3);
}

static void test_timer_freed_in_callback(void **state)
{
        struct fixture *f = *state;
        struct self_free s = { .f = f };
        s.t = loop_timer_new(f->loop, self_free_fn, &s);
        loop_timer_arm_ms(s.t, 0);
        assert_int_equal(run(f), 3);
        assert_int_equal(s.fired, 1);
}

static void test_many_timers(void **state)
{
        struct fixture *f = *state;
        /* More timers than the heap's first allocation, armed in a scrambled order. */
        enum { N = 300 };
        struct tick *ticks = calloc(N, sizeof(*ticks));
        int *order = calloc(N, sizeof(int)), n = 0;
        for (int i = 0; i < N; i++) {
                int d = (i * 7919) % N; /* a permutation of 0..N-1 */
                ticks[i] = (struct tick){ .f = f, .id = d, .order = order, .n = &n, .quit = d == N - 1 };
                ticks[i].t = loop_timer_new(f->loop, tick_fn, &ticks[i]);
                loop_timer_arm_us(ticks[i].t, (uint64_t)d * 200 + 100);
        }
        /* Disarm every tenth: the heap must stay a heap. */
        for (int i = 0; i < N; i += 10)
                if (!ticks[i].quit)
                        loop_timer_disarm(ticks[i].t);
        assert_int_equal(run(f), 7);
        for (int i = 1; i < n; i++)
                assert_true(order[i - 1] < order[i]);
        /* Every timer fired but the disarmed tenth (the last one, which quits, is never a multiple of 10). */
        assert_int_equal(n, N - N / 10);
        for (int i = 0; i < N; i++) {
                assert_false(loop_timer_armed(ticks[i].t));
                loop_timer_free(ticks[i].t);
        }
        free(ticks);
        free(order);
}

/* ---- posts ---- */

#define POSTERS 4
#define POSTS_EACH 2000

struct post_state {
        struct fixture *f;
        int next[POSTERS];
        int total;
        int out_of_order;
};

struct post_item {
        struct post_state *ps;
        int thread, seq;
};

static void post_fn(void *userdata)
{
        struct post_item *it = userdata;
        struct post_state *ps = it->ps;
        if (it->seq != ps->next[it->thread])
                ps->out_of_order++;
        ps->next[it->thread] = it->seq + 1;
        if (++ps->total == POSTERS * POSTS_EACH)
                loop_quit(ps->f->loop, 11);
        free(it);
}

struct poster {
        struct post_state *ps;
        int thread;
        int failures;
};

static void *poster_main(void *arg)
{
        struct poster *p = arg;
        for (int i = 0; i < POSTS_EACH; i++) {
                struct post_item *it = malloc(sizeof(*it));
                *it = (struct post_item){ .ps = p->ps, .thread = p->thread, .seq = i };
                if (loop_post(p->ps->f->loop, post_fn, it) < 0)
                        p->failures++;
        }
        return NULL;
}

static void test_post_from_threads_in_order(void **state)
{
        struct fixture *f = *state;
        struct post_state ps = { .f = f };
        pthread_t th[POSTERS];
        struct poster p[POSTERS];
        for (int i = 0; i < POSTERS; i++) {
                p[i] = (struct poster){ .ps = &ps, .thread = i };
                assert_int_equal(pthread_create(&th[i], NULL, poster_main, &p[i]), 0);
        }
        assert_int_equal(run(f), 11);
        for (int i = 0; i < POSTERS; i++) {
                pthread_join(th[i], NULL);
                assert_int_equal(p[i].failures, 0);
                assert_int_equal(ps.next[i], POSTS_EACH);
        }
        assert_int_equal(ps.out_of_order, 0);
        assert_int_equal(ps.total, POSTERS * POSTS_EACH);
}

struct chain {
        struct fixture *f;
        int step;
};

static void chain_fn(void *userdata)
{
        struct chain *c = userdata;
        if (++c->step < 100)
                assert_int_equal(loop_post(c->f->loop, chain_fn, c), 0); /* posting from the loop thread */
        else
                loop_quit(c->f->loop, 5);
}

static void test_post_from_loop_thread(void **state)
{
        struct fixture *f = *state;
        struct chain c = { .f = f };
        assert_int_equal(loop_post(f->loop, chain_fn, &c), 0);
        assert_int_equal(run(f), 5);
        assert_int_equal(c.step, 100);
}

/* Post nodes (the posts that cannot fail): queued twice, run once; queued again from
 * its own run, run again; freed by its own run, never touched after. */
struct node_state {
        struct fixture *f;
        struct loop_post_node node;
        int runs;
        int *freed_runs;
};

static void node_fn(void *userdata)
{
        struct node_state *n = userdata;
        n->runs++;
        if (n->runs == 1) {
                loop_post_queue(n->f->loop, &n->node); /* again, from its own run */
                loop_post_queue(n->f->loop, &n->node); /* already queued: nothing */
        } else
                loop_quit(n->f->loop, 7);
}

static void node_free_fn(void *userdata)
{
        struct node_state *n = userdata;
        (*n->freed_runs)++;
        free(n); /* the node lives in what its run frees */
}

static void test_post_nodes(void **state)
{
        struct fixture *f = *state;
        struct node_state n = { .f = f };
        loop_post_init(&n.node, node_fn, &n);
        loop_post_queue(f->loop, &n.node);
        loop_post_queue(f->loop, &n.node);
        int freed_runs = 0;
        struct node_state *heap = calloc(1, sizeof(*heap));
        assert_non_null(heap);
        heap->freed_runs = &freed_runs;
        loop_post_init(&heap->node, node_free_fn, heap);
        loop_post_queue(f->loop, &heap->node);
        assert_int_equal(run(f), 7);
        assert_int_equal(n.runs, 2);
        assert_int_equal(freed_runs, 1);
}

/* Arming never allocates: the room is made when a timer is created. */
static void test_timer_new_makes_room(void **state)
{
        struct fixture *f = *state;
        struct loop_timer *t[100];
        for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
                t[i] = loop_timer_new(f->loop, NULL, NULL);
                assert_non_null(t[i]);
        }
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                loop_timer_arm_ms(t[i], 100000 + i);
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                loop_timer_free(t[i]);
}

/* ---- fd watches ---- */

struct pipe_state {
        struct fixture *f;
        int rfd, wfd;
        char got[64];
        size_t got_len;
        int reads, writes_ready;
};

static void on_read(void *userdata, int fd, uint32_t revents)
{
        struct pipe_state *p = userdata;
        assert_int_equal(fd, p->rfd);
        assert_true(revents & EPOLLIN);
        ssize_t n = read(fd, p->got + p->got_len, sizeof(p->got) - 1 - p->got_len);
        assert_true(n > 0);
        p->got_len += (size_t)n;
        p->reads++;
        if (p->got_len >= 5)
                loop_quit(p->f->loop, 21);
}

static void on_writable(void *userdata, int fd, uint32_t revents)
{
        struct pipe_state *p = userdata;
        assert_int_equal(fd, p->wfd);
        assert_true(revents & EPOLLOUT);
        p->writes_ready++;
        assert_int_equal(write(fd, "hello", 5), 5);
        loop_unwatch(p->f->loop, fd); /* once is enough */
}

static void test_fd_watch(void **state)
{
        struct fixture *f = *state;
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
        struct pipe_state p = { .f = f, .rfd = fds[0], .wfd = fds[1] };
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(loop_watch(f->loop, fds[0], EPOLLIN, on_read, &p, &err), 0);
        assert_int_equal(loop_watch(f->loop, fds[1], EPOLLOUT, on_writable, &p, &err), 0);
        assert_int_equal(run(f), 21);
        assert_string_equal(p.got, "hello");
        assert_int_equal(p.writes_ready, 1);

        /* Unwatched: data waits unread, the loop never calls. */
        loop_unwatch(f->loop, fds[0]);
        loop_unwatch(f->loop, fds[0]); /* twice is fine */
        loop_unwatch(f->loop, 100000);
        assert_int_equal(write(fds[1], "more", 4), 4);
        struct tick end = { .f = f, .quit = true };
        end.t = loop_timer_new(f->loop, tick_fn, &end);
        loop_timer_arm_ms(end.t, 30);
        int reads = p.reads;
        assert_int_equal(run(f), 7);
        assert_int_equal(p.reads, reads);

        /* Watched again (a new callback on the same fd): the waiting data arrives. */
        p.got_len = 0;
        memset(p.got, 0, sizeof(p.got));
        assert_int_equal(loop_watch(f->loop, fds[0], EPOLLIN, on_read, &p, &err), 0);
        assert_int_equal(write(fds[1], "!", 1), 1);
        assert_int_equal(run(f), 21);
        assert_string_equal(p.got, "more!");

        assert_int_equal(loop_watch(f->loop, -1, EPOLLIN, on_read, &p, &err), -EBADF);
        loop_unwatch(f->loop, fds[0]);
        loop_timer_free(end.t);
        close(fds[0]);
        close(fds[1]);
}

/* ---- a timer that re-arms itself at once never starves the descriptors ---- */

struct busy {
        struct fixture *f;
        struct loop_timer *t;
        unsigned fired;
        int rfd;
};

static void busy_fired(void *userdata)
{
        struct busy *b = userdata;
        b->fired++;
        loop_timer_arm_us(b->t, 0); /* due again at once: it waits for the next round */
}

static void busy_read(void *userdata, int fd, uint32_t revents)
{
        struct busy *b = userdata;
        (void)revents;
        char c;
        assert_int_equal(read(fd, &c, 1), 1);
        loop_quit(b->f->loop, 5);
}

static void test_zero_timer_does_not_starve_io(void **state)
{
        struct fixture *f = *state;
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
        struct busy b = { .f = f, .rfd = fds[0] };
        b.t = loop_timer_new(f->loop, busy_fired, &b);
        loop_timer_arm_us(b.t, 0);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(loop_watch(f->loop, fds[0], EPOLLIN, busy_read, &b, &err), 0);
        assert_int_equal(write(fds[1], "x", 1), 1);
        assert_int_equal(run(f), 5);
        assert_true(b.fired >= 1);
        loop_unwatch(f->loop, fds[0]);
        loop_timer_free(b.t);
        close(fds[0]);
        close(fds[1]);
}

/* ---- signals ---- */

struct sig_state {
        struct fixture *f;
        int signo;
};

static void on_signal(void *userdata, int signo)
{
        struct sig_state *s = userdata;
        s->signo = signo;
        loop_quit(s->f->loop, 31);
}

static void test_signals(void **state)
{
        struct fixture *f = *state;
        struct sig_state s = { .f = f };
        static const int sigs[] = { SIGUSR1, SIGUSR2 };
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(loop_signals(f->loop, sigs, 2, on_signal, &s, &err), 0);
        assert_int_equal(pthread_kill(pthread_self(), SIGUSR2), 0); /* blocked: waits in the signalfd */
        assert_int_equal(run(f), 31);
        assert_int_equal(s.signo, SIGUSR2);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGUSR1);
        sigaddset(&mask, SIGUSR2);
        pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_timers_in_deadline_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timer_rearm_and_disarm, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timer_freed_in_callback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_timers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_post_from_threads_in_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_post_from_loop_thread, setup, teardown),
                cmocka_unit_test_setup_teardown(test_post_nodes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timer_new_makes_room, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fd_watch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_zero_timer_does_not_starve_io, setup, teardown),
                cmocka_unit_test_setup_teardown(test_signals, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
