/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/base/loop.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>

#include "common/timeutil.h"

struct watch {
        loop_io_fn fn;
        void *userdata;
        uint32_t events;
};

struct loop_timer {
        struct loop *loop;
        loop_fn fn;
        void *userdata;
        uint64_t deadline_us;
        size_t heap_index; /* SIZE_MAX when not armed */
};


struct loop {
        int epfd, eventfd, sigfd;
        struct watch **watches; /* indexed by fd */
        size_t nwatches;

        struct loop_timer **heap; /* room for every timer: arming never allocates */
        size_t heap_len, heap_cap, ntimers;

        pthread_mutex_t post_lock;
        struct loop_post_node *post_head, *post_tail;

        loop_signal_fn sig_fn;
        void *sig_userdata;

        bool quit;
        bool no_pwait2; /* the kernel (or valgrind) lacks epoll_pwait2 */
        int exit_code;
};

/* ---- timers: a binary min-heap on deadline ---- */

static void heap_swap(struct loop *l, size_t a, size_t b)
{
        struct loop_timer *t = l->heap[a];
        l->heap[a] = l->heap[b];
        l->heap[b] = t;
        l->heap[a]->heap_index = a;
        l->heap[b]->heap_index = b;
}

static void heap_up(struct loop *l, size_t i)
{
        while (i > 0) {
                size_t p = (i - 1) / 2;
                if (l->heap[p]->deadline_us <= l->heap[i]->deadline_us)
                        break;
                heap_swap(l, i, p);
                i = p;
        }
}

static void heap_down(struct loop *l, size_t i)
{
        for (;;) {
                size_t c = 2 * i + 1, m = i;
                if (c < l->heap_len && l->heap[c]->deadline_us < l->heap[m]->deadline_us)
                        m = c;
                if (c + 1 < l->heap_len && l->heap[c + 1]->deadline_us < l->heap[m]->deadline_us)
                        m = c + 1;
                if (m == i)
                        break;
                heap_swap(l, i, m);
                i = m;
        }
}

static void heap_remove(struct loop *l, struct loop_timer *t)
{
        size_t i = t->heap_index;
        if (i == SIZE_MAX)
                return;
        l->heap_len--;
        if (i != l->heap_len) {
                l->heap[i] = l->heap[l->heap_len];
                l->heap[i]->heap_index = i;
                heap_down(l, i);
                heap_up(l, i);
        }
        t->heap_index = SIZE_MAX;
}

struct loop_timer *loop_timer_new(struct loop *l, loop_fn fn, void *userdata)
{
        if (l->ntimers == l->heap_cap) {
                size_t cap = l->heap_cap ? l->heap_cap * 2 : 16;
                struct loop_timer **h = realloc(l->heap, cap * sizeof(*h));
                if (!h)
                        return NULL;
                l->heap = h;
                l->heap_cap = cap;
        }
        struct loop_timer *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        l->ntimers++;
        t->loop = l;
        t->fn = fn;
        t->userdata = userdata;
        t->heap_index = SIZE_MAX;
        return t;
}

void loop_timer_free(struct loop_timer *t)
{
        if (!t)
                return;
        loop_timer_disarm(t);
        t->loop->ntimers--;
        free(t);
}

void loop_timer_arm_us(struct loop_timer *t, uint64_t delay_us)
{
        struct loop *l = t->loop;
        heap_remove(l, t);
        /* heap_cap >= ntimers (loop_timer_new made room), so this never allocates. */
        t->deadline_us = na_now_mono_us() + (delay_us ? delay_us : 1);
        t->heap_index = l->heap_len;
        l->heap[l->heap_len++] = t;
        heap_up(l, t->heap_index);
}

void loop_timer_arm_ms(struct loop_timer *t, uint64_t delay_ms)
{
        loop_timer_arm_us(t, delay_ms * 1000);
}

void loop_timer_disarm(struct loop_timer *t)
{
        if (t->heap_index == SIZE_MAX)
                return;
        heap_remove(t->loop, t);
}

bool loop_timer_armed(const struct loop_timer *t)
{
        return t->heap_index != SIZE_MAX;
}

/* Run the timers that are due; say how long epoll may sleep until the next one. */
static struct timespec *timers_fire(struct loop *l, struct timespec *ts)
{
        uint64_t now = na_now_mono_us();
        while (l->heap_len && l->heap[0]->deadline_us <= now && !l->quit) {
                struct loop_timer *t = l->heap[0];
                heap_remove(l, t);
                t->fn(t->userdata); /* may re-arm or free t: re-armed, it waits for the next round */
        }
        if (!l->heap_len)
                return NULL;
        now = na_now_mono_us();
        uint64_t wait = l->heap[0]->deadline_us > now ? l->heap[0]->deadline_us - now : 0;
        ts->tv_sec = (time_t)(wait / NA_USEC_PER_SEC);
        ts->tv_nsec = (long)(wait % NA_USEC_PER_SEC) * 1000;
        return ts;
}

/* ---- fd watches ---- */

int loop_watch(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *userdata, struct na_error *err)
{
        if (fd < 0)
                return na_error_set(err, EBADF, NA_E_INTERNAL, "loop: watch of a negative fd");
        if ((size_t)fd >= l->nwatches) {
                size_t n = (size_t)fd + 64;
                struct watch **w = realloc(l->watches, n * sizeof(*w));
                if (!w)
                        return na_error_sys(err, ENOMEM, "loop: watch fd %d", fd);
                memset(w + l->nwatches, 0, (n - l->nwatches) * sizeof(*w));
                l->watches = w;
                l->nwatches = n;
        }
        struct epoll_event ev = { .events = events, .data.fd = fd };
        struct watch *w = l->watches[fd];
        if (w) {
                if (w->events != events && epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
                        return na_error_sys(err, errno, "loop: modify fd %d", fd);
        } else {
                w = calloc(1, sizeof(*w));
                if (!w)
                        return na_error_sys(err, ENOMEM, "loop: watch fd %d", fd);
                if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                        int e = errno;
                        free(w);
                        return na_error_sys(err, e, "loop: watch fd %d", fd);
                }
                l->watches[fd] = w;
        }
        w->fn = fn;
        w->userdata = userdata;
        w->events = events;
        return 0;
}

void loop_unwatch(struct loop *l, int fd)
{
        if (fd < 0 || (size_t)fd >= l->nwatches || !l->watches[fd])
                return;
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
        free(l->watches[fd]);
        l->watches[fd] = NULL;
}

/* ---- posts from other threads ---- */

void loop_post_init(struct loop_post_node *n, loop_fn fn, void *userdata)
{
        memset(n, 0, sizeof(*n));
        n->fn = fn;
        n->userdata = userdata;
}

void loop_post_queue(struct loop *l, struct loop_post_node *n)
{
        pthread_mutex_lock(&l->post_lock);
        if (n->queued) {
                pthread_mutex_unlock(&l->post_lock);
                return;
        }
        n->queued = true;
        n->next = NULL;
        bool was_empty = !l->post_head;
        if (l->post_tail)
                l->post_tail->next = n;
        else
                l->post_head = n;
        l->post_tail = n;
        pthread_mutex_unlock(&l->post_lock);
        if (was_empty) {
                uint64_t one = 1;
                (void)!write(l->eventfd, &one, sizeof(one));
        }
}

int loop_post(struct loop *l, loop_fn fn, void *userdata)
{
        struct loop_post_node *n = malloc(sizeof(*n));
        if (!n)
                return -ENOMEM;
        loop_post_init(n, fn, userdata);
        n->owned = true;
        loop_post_queue(l, n);
        return 0;
}

static void posts_run(struct loop *l)
{
        uint64_t n;
        (void)!read(l->eventfd, &n, sizeof(n));
        pthread_mutex_lock(&l->post_lock);
        struct loop_post_node *p = l->post_head;
        l->post_head = l->post_tail = NULL;
        for (struct loop_post_node *q = p; q; q = q->next)
                q->queued = false; /* from here on a new post of the same node queues it again */
        pthread_mutex_unlock(&l->post_lock);
        while (p) {
                /* fn may free the object p is embedded in, or queue p again: read all first. */
                struct loop_post_node *next = p->next;
                loop_fn fn = p->fn;
                void *userdata = p->userdata;
                if (p->owned)
                        free(p);
                fn(userdata);
                p = next;
        }
}

/* ---- signals ---- */

int loop_signals(struct loop *l, const int *signals, size_t n, loop_signal_fn fn, void *userdata,
                 struct na_error *err)
{
        sigset_t mask;
        sigemptyset(&mask);
        for (size_t i = 0; i < n; i++)
                sigaddset(&mask, signals[i]);
        if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
                return na_error_sys(err, errno, "loop: block signals");
        int fd = signalfd(l->sigfd, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "loop: signalfd");
        l->sigfd = fd;
        l->sig_fn = fn;
        l->sig_userdata = userdata;
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = -4 };
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
        return 0;
}

static void signals_read(struct loop *l)
{
        struct signalfd_siginfo si;
        while (read(l->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                if (l->sig_fn)
                        l->sig_fn(l->sig_userdata, (int)si.ssi_signo);
}

/* ---- the loop ---- */

int loop_new(struct loop **ret, struct na_error *err)
{
        _cleanup_(loop_freep) struct loop *l = calloc(1, sizeof(*l));
        if (!l)
                return na_error_sys(err, ENOMEM, "loop");
        l->epfd = l->eventfd = l->sigfd = -1;
        pthread_mutex_init(&l->post_lock, NULL);
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        l->eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (l->epfd < 0 || l->eventfd < 0)
                return na_error_sys(err, errno, "loop: create epoll or eventfd");
        /* Internal fds carry negative tags in data.fd so they never meet a watch. */
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = -3 };
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->eventfd, &ev) < 0)
                return na_error_sys(err, errno, "loop: watch eventfd");
        *ret = TAKE_PTR(l);
        return 0;
}

void loop_free(struct loop *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->nwatches; i++)
                free(l->watches[i]);
        free(l->watches);
        for (size_t i = 0; i < l->heap_len; i++)
                l->heap[i]->heap_index = SIZE_MAX;
        free(l->heap);
        struct loop_post_node *p = l->post_head;
        while (p) {
                struct loop_post_node *next = p->next;
                if (p->owned)
                        free(p);
                p = next;
        }
        int fds[] = { l->epfd, l->eventfd, l->sigfd };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        pthread_mutex_destroy(&l->post_lock);
        free(l);
}

void loop_quit(struct loop *l, int code)
{
        l->quit = true;
        l->exit_code = code;
}

/* epoll_pwait2 (Linux 5.11) sleeps to the microsecond; older kernels round up to a millisecond. */
static int loop_epoll_wait(struct loop *l, struct epoll_event *events, int max, const struct timespec *timeout)
{
        if (!l->no_pwait2) {
                int n = epoll_pwait2(l->epfd, events, max, timeout, NULL);
                if (n >= 0 || errno != ENOSYS)
                        return n;
                l->no_pwait2 = true;
        }
        int ms = -1;
        if (timeout) {
                uint64_t us = (uint64_t)timeout->tv_sec * NA_USEC_PER_SEC + (uint64_t)timeout->tv_nsec / 1000;
                ms = us > (uint64_t)INT_MAX * 1000 ? INT_MAX : (int)((us + 999) / 1000);
        }
        return epoll_wait(l->epfd, events, max, ms);
}

int loop_run(struct loop *l)
{
        struct epoll_event events[64];
        l->quit = false;
        while (!l->quit) {
                /*
                 * Timers need no descriptor: epoll sleeps until the earliest deadline.
                 * A timerfd was reprogrammed on every change of the earliest timer (curl
                 * moves its timeout on nearly every request), and timerfd_settime cost a
                 * fifth of the agent's CPU at 3,000 jobs/s on this virtual machine.
                 */
                struct timespec ts, *timeout = timers_fire(l, &ts);
                if (l->quit)
                        break;
                int n = loop_epoll_wait(l, events, (int)ARRAY_SIZE(events), timeout);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                for (int i = 0; i < n && !l->quit; i++) {
                        int fd = events[i].data.fd;
                        if (fd == -3)
                                posts_run(l);
                        else if (fd == -4)
                                signals_read(l);
                        else if ((size_t)fd < l->nwatches && l->watches[fd]) {
                                struct watch *w = l->watches[fd];
                                w->fn(w->userdata, fd, events[i].events);
                        }
                }
        }
        return l->exit_code;
}
