/* SPDX-License-Identifier: GPL-2.0-or-later */
/* nodeagent-monitor: the container's output into ring lines (split, cut, partial flush, started pattern) and console lines into its stdin. */
#include "monitor/monitor.h"

#include <stdio.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

#define READ_CHUNK (64u * 1024u) /* a whole pipe buffer in one read */
#define READ_BUDGET (64u * 1024u) /* per readiness event, so one stream cannot starve the rest */
#define DRAIN_BUDGET (16u * 1024u * 1024u) /* after the end: a writer outside the container cannot hold us */

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void started_matched(struct monitor *m)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char text[64];
        snprintf(text, sizeof(text), "at_ms=%lld\n", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        mon_write_file(m->dirfd, "started", text);
        m->started = true;
        mon_notify(m, MON_PEND_STARTED);
}

/*
 * Complete lines wait in one batch per stream and go into the ring with one append
 * (one lock, one sync, one pwritev per 64 records) per read, not one per line:
 * app_ring_append splits a batch at its newlines. A batch is flushed before anything
 * else reaches the ring (another stream's lines, a system line) and before every
 * return to the loop, so order and the clients' notifications are as if each line
 * went alone.
 */
#define BATCH_MAX (64u * 1024u)
static char batch[BATCH_MAX + APP_RING_TEXT_MAX + 2];
static size_t batch_len;
static enum app_ring_stream batch_stream;

static void batch_flush(struct monitor *m)
{
        if (!batch_len)
                return;
        struct na_error err = NA_ERROR_INIT; /* nowhere to report a failed append: the lines are lost */
        app_ring_append(m->ring, batch_stream, batch, batch_len, NULL, &err);
        batch_len = 0;
}

/* The buffered line of s into the batch (and the ring, when the batch is full), or
 * dropped and counted when the app is over its lines per second. */
static void emit(struct monitor *m, struct mon_stream *s, int64_t now)
{
        if (!mon_rate_take(&m->rate, now)) {
                s->len = 0;
                return;
        }
        if (batch_len && (batch_stream != s->stream || batch_len + s->len + 1 > BATCH_MAX))
                batch_flush(m);
        batch_stream = s->stream;
        memcpy(batch + batch_len, s->buf, s->len);
        batch_len += s->len;
        batch[batch_len++] = '\n';
        if (m->have_re && !m->started) {
                s->buf[s->len] = '\0';
                if (regexec(&m->started_re, s->buf, 0, NULL, 0) == 0)
                        started_matched(m);
        }
        s->len = 0;
}

static void arm_timer(struct monitor *m)
{
        if (m->timer_armed)
                return;
        struct itimerspec its = { .it_value = { .tv_nsec = MON_PARTIAL_FLUSH_MS * 1000000L } };
        if (timerfd_settime(m->timerfd, 0, &its, NULL) == 0)
                m->timer_armed = true;
}

/* The number of '\n' in p[0..n), eight bytes at a time (exact: a byte's bit 7 in t is
 * clear only when the byte equals '\n'). */
static uint64_t count_newlines(const char *p, size_t n)
{
        const uint64_t nl = 0x0a0a0a0a0a0a0a0aull, low7 = 0x7f7f7f7f7f7f7f7full, high = 0x8080808080808080ull;
        uint64_t count = 0;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                uint64_t y = w ^ nl;
                uint64_t t = ((y & low7) + low7) | y;
                count += (uint64_t)__builtin_popcountll(~t & high);
        }
        for (; i < n; i++)
                count += p[i] == '\n';
        return count;
}

static void feed(struct monitor *m, struct mon_stream *s, const char *p, size_t n, int64_t now)
{
        while (n > 0) {
                if (!mon_rate_has(&m->rate, now)) {
                        /* Over the bound until the clock moves: every line that ends in this
                         * chunk is dropped, counted in bulk rather than split one by one. */
                        const char *last = memrchr(p, '\n', n);
                        if (last) {
                                size_t upto = (size_t)(last - p) + 1;
                                uint64_t lines = count_newlines(p, upto);
                                if (s->after_partial && s->len == 0 && p[0] == '\n')
                                        lines--; /* the newline that ends a flushed prompt */
                                mon_rate_drop(&m->rate, lines, now);
                                s->len = 0;
                                s->after_partial = false;
                                p += upto;
                                n -= upto;
                                continue;
                        }
                }
                const char *nl = memchr(p, '\n', n);
                size_t take = nl ? (size_t)(nl - p) : n;
                bool ends = nl != NULL;
                if (take > APP_RING_TEXT_MAX - s->len) {
                        take = APP_RING_TEXT_MAX - s->len;
                        ends = false;
                }
                memcpy(s->buf + s->len, p, take);
                s->len += take;
                p += take;
                n -= take;
                if (take > 0)
                        s->after_partial = false;
                if (ends) {
                        p++;
                        n--;
                        if (s->after_partial)
                                s->after_partial = false; /* the newline that ends a flushed prompt */
                        else
                                emit(m, s, now);
                } else if (s->len == APP_RING_TEXT_MAX)
                        emit(m, s, now);
        }
        if (s->len > 0)
                arm_timer(m);
}

/* One system line saying how many lines were dropped, once a report is due (or now with force). */
static void report_drops(struct monitor *m, int64_t now, bool force)
{
        uint64_t n = mon_rate_report_due(&m->rate, now, force);
        if (n > 0) {
                char text[160];
                int len = snprintf(text, sizeof(text), "output dropped: %llu lines (more than %u lines per second)",
                                   (unsigned long long)n, m->rate.per_sec);
                mon_system_line(m, text, (size_t)len);
        }
        if (mon_rate_report_in(&m->rate, now) >= 0)
                arm_timer(m); /* the next look at the pending report */
}

static void stream_close(struct monitor *m, struct mon_stream *s, int64_t now)
{
        if (s->len > 0)
                emit(m, s, now);
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        closep(&s->fd);
        s->fd = -1;
}

static void stream_read(struct monitor *m, struct mon_stream *s, size_t budget)
{
        static char chunk[READ_CHUNK];
        size_t done = 0;
        while (s->fd >= 0 && done < budget) {
                ssize_t n = read(s->fd, chunk, sizeof(chunk));
                int64_t now = mono_ms();
                if (n > 0) {
                        feed(m, s, chunk, (size_t)n, now);
                        done += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                stream_close(m, s, now); /* EOF or a read error */
        }
}

void mon_output_readable(struct monitor *m, int index)
{
        stream_read(m, &m->out[index], READ_BUDGET);
        batch_flush(m);
        report_drops(m, mono_ms(), false);
}

void mon_output_flush_partial(struct monitor *m)
{
        uint64_t expirations;
        (void)!read(m->timerfd, &expirations, sizeof(expirations));
        m->timer_armed = false;
        int64_t now = mono_ms();
        for (int i = 0; i < 2; i++)
                if (m->out[i].len > 0) {
                        emit(m, &m->out[i], now);
                        m->out[i].after_partial = true;
                }
        batch_flush(m);
        report_drops(m, now, false);
}

/* Everything still in the pipes (after the container ended), then the unfinished lines, then what was dropped. */
void mon_output_drain(struct monitor *m)
{
        for (int i = 0; i < 2; i++)
                stream_read(m, &m->out[i], DRAIN_BUDGET);
        int64_t now = mono_ms();
        for (int i = 0; i < 2; i++)
                if (m->out[i].len > 0)
                        emit(m, &m->out[i], now);
        batch_flush(m);
        report_drops(m, now, true);
}

void mon_system_line(struct monitor *m, const char *text, size_t len)
{
        batch_flush(m); /* the output before it stays before it */
        struct na_error err = NA_ERROR_INIT;
        app_ring_append(m->ring, APP_RING_SYSTEM, text, len, NULL, &err);
}

static void stdin_close(struct monitor *m)
{
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, m->stdin_fd, NULL);
        closep(&m->stdin_fd);
        m->stdin_fd = -1;
        m->stdin_len = 0;
}

static void stdin_write(struct monitor *m)
{
        while (m->stdin_fd >= 0 && m->stdin_len > 0) {
                ssize_t n = write(m->stdin_fd, m->stdin_buf, m->stdin_len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0) {
                        stdin_close(m); /* EPIPE: the container closed its stdin */
                        return;
                }
                memmove(m->stdin_buf, m->stdin_buf + n, m->stdin_len - (size_t)n);
                m->stdin_len -= (size_t)n;
        }
        if (m->stdin_fd >= 0)
                mon_epoll_mod(m, EPOLL_CTL_MOD, m->stdin_fd, m->stdin_len > 0 ? EPOLLOUT : 0,
                              MON_TAG(MON_TAG_STDIN, 0));
}

void mon_stdin_event(struct monitor *m, uint32_t events)
{
        if ((events & (EPOLLERR | EPOLLHUP)) && m->stdin_len == 0)
                stdin_close(m); /* the container closed its stdin */
        else
                stdin_write(m);
}

const char *mon_stdin_queue(struct monitor *m, const char *text, size_t len)
{
        if (m->stdin_fd < 0)
                return "stdin is closed";
        if (len + 1 > MON_STDIN_BUF - m->stdin_len)
                return "stdin buffer is full";
        memcpy(m->stdin_buf + m->stdin_len, text, len);
        m->stdin_buf[m->stdin_len + len] = '\n';
        m->stdin_len += len + 1;
        stdin_write(m);
        if (m->stdin_fd < 0)
                return "stdin is closed";
        return NULL;
}
