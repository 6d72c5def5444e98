/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The driver's thread: one epoll over the monitors of running apps. It turns their
 * messages into states and events (R: the started pattern matched; X: the container
 * ended), asks the crash rule of AGENT-API 4.2 (drivers/app-restart.h) what to do
 * with an exit nobody asked for, and carries out the restarts it scheduled and the
 * staggered starts after a node reboot. It never blocks on an app another thread is
 * changing: op_lock is only tried, and a busy app is tried again at the next tick.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/oci/app-volume.h"
#include "ring/app-ring.h"

#define TICK_MS 200


void app_watch_wake(struct app_conn *c)
{
        uint64_t one = 1;
        if (c->wakefd >= 0)
                (void)!write(c->wakefd, &one, sizeof(one));
}

void app_watch_attach(struct app_conn *c, struct app *a)
{
        pthread_mutex_lock(&a->st_lock);
        bool attached = a->monitor_fd >= 0;
        pthread_mutex_unlock(&a->st_lock);
        if (attached)
                return;
        int fd;
        struct na_error e = NA_ERROR_INIT;
        if (app_monitor_connect(a->dir, &fd, &e) < 0) {
                na_error_clear(&e);
                app_watch_wake(c); /* gone already: the tick reads its exit */
                return;
        }
        pthread_mutex_lock(&a->st_lock);
        a->monitor_fd = fd;
        pthread_mutex_unlock(&a->st_lock);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = a };
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void app_watch_detach(struct app_conn *c, struct app *a)
{
        pthread_mutex_lock(&a->st_lock);
        int fd = a->monitor_fd;
        a->monitor_fd = -1;
        pthread_mutex_unlock(&a->st_lock);
        if (fd >= 0) {
                epoll_ctl(c->epfd, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
        }
}

static void system_line(struct app *a, const char *fmt, ...) _printf_(2, 3);
static void system_line(struct app *a, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        struct na_error e = NA_ERROR_INIT;
        (void)app_ring_append_once(a->dir, APP_RING_SYSTEM, msg, strlen(msg), NULL, &e);
        na_error_clear(&e);
}

static void emit_exited(struct app_conn *c, struct app *a, int code, int sig, bool crash_loop)
{
        if (c->o.on_event)
                c->o.on_event(c->o.userdata, "app.exited", a->id, proto_app_exited_encode(code, sig, crash_loop));
}

void app_report_exit(struct app_conn *c, struct app *a, int code, int sig, bool crash_loop)
{
        pthread_mutex_lock(&a->st_lock);
        bool first = !a->exit_reported;
        a->exit_reported = true;
        a->has_exit = true;
        a->exit_code = code;
        a->exit_signal = sig;
        pthread_mutex_unlock(&a->st_lock);
        if (first)
                emit_exited(c, a, code, sig, crash_loop);
}

/* Save the record when nobody else is changing the app (they save it themselves). */
static void try_save(struct app *a)
{
        if (pthread_mutex_trylock(&a->op_lock) != 0)
                return;
        struct na_error e = NA_ERROR_INIT;
        (void)app_meta_save(a, &e);
        na_error_clear(&e);
        pthread_mutex_unlock(&a->op_lock);
}

/* The container ended (code, sig as the monitor said). st_lock is not held. */
static void exited(struct app_conn *c, struct app *a, int code, int sig)
{
        int64_t now = (int64_t)na_now_real_ms();
        pthread_mutex_lock(&a->st_lock);
        if (a->exit_reported) {
                pthread_mutex_unlock(&a->st_lock); /* the stop path said it already */
                return;
        }
        a->exit_reported = true;
        a->has_exit = true;
        a->exit_code = code;
        a->exit_signal = sig;
        if (a->stopping || a->removed) {
                /* Asked for: the stop finishes the state. */
                pthread_mutex_unlock(&a->st_lock);
                emit_exited(c, a, code, sig, false);
                return;
        }
        /* Unasked: the crash rule (drivers/app-restart.h) decides; this thread carries it out. */
        struct app_restart_decision d = app_restart_decide(&a->crashes, now, c->o.crash_backoff_ms);
        bool loop = d.crash_loop;
        if (!loop) {
                a->restart_at_ms = now + d.wait_ms;
                a->restart_resume = false;
        }
        app_set_state(c, a, PROTO_APP_CRASHED);
        pthread_mutex_unlock(&a->st_lock);
        emit_exited(c, a, code, sig, loop);
        if (loop) {
                system_line(a, "crashed %d times in %d minutes: left stopped (crash loop); start it again when fixed",
                            APP_RESTART_MAX + 1, APP_RESTART_WINDOW_MS / 60000);
                a->want_running = false;
        } else
                system_line(a, "crashed (exit code %d); restarting in %.1f s (%zu of %d in %d minutes)", code,
                            d.wait_ms / 1000.0, d.nth, APP_RESTART_MAX, APP_RESTART_WINDOW_MS / 60000);
        try_save(a);
}

static void monitor_message(struct app_conn *c, struct app *a)
{
        char buf[512];
        for (;;) {
                /* Under st_lock: a stop may detach (close) the fd from another thread. */
                pthread_mutex_lock(&a->st_lock);
                int fd = a->monitor_fd;
                ssize_t n = fd >= 0 ? recv(fd, buf, sizeof(buf), MSG_DONTWAIT) : -1;
                int recv_errno = errno;
                pthread_mutex_unlock(&a->st_lock);
                if (fd < 0)
                        return;
                errno = recv_errno;
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        /* The monitor went without saying X (killed): its exit record, if any, says how. */
                        app_watch_detach(c, a);
                        struct app_exit ex;
                        struct na_error e = NA_ERROR_INIT;
                        if (app_monitor_read_exit(a->dir, &ex, &e) == 0 && ex.at_ms >= a->started_ms)
                                exited(c, a, ex.code, ex.signal);
                        else
                                exited(c, a, 128 + SIGKILL, SIGKILL);
                        na_error_clear(&e);
                        return;
                }
                struct app_monitor_msg m;
                struct na_error e = NA_ERROR_INIT;
                if (app_monitor_parse_message(buf, (size_t)n, &m, &e) < 0) {
                        na_error_clear(&e);
                        continue;
                }
                if (m.type == APP_MONITOR_MSG_STARTED) {
                        pthread_mutex_lock(&a->st_lock);
                        if (a->state == PROTO_APP_STARTING)
                                app_set_state(c, a, PROTO_APP_RUNNING);
                        pthread_mutex_unlock(&a->st_lock);
                } else if (m.type == APP_MONITOR_MSG_EXIT) {
                        app_watch_detach(c, a);
                        exited(c, a, m.exit_code, m.exit_signal);
                        return;
                }
        }
}

/* The monitor ended before the watcher could listen to it (an app that exits at once). */
static void reap_unheard(struct app_conn *c)
{
        struct app *gone[64];
        size_t n = 0;
        pthread_mutex_lock(&c->lock);
        for (struct app *a = c->apps; a && n < ARRAY_SIZE(gone); a = a->next) {
                pthread_mutex_lock(&a->st_lock);
                bool up = a->state == PROTO_APP_STARTING || a->state == PROTO_APP_RUNNING;
                if (up && a->monitor_fd < 0 && !a->stopping && !a->removed && !a->restart_at_ms)
                        gone[n++] = a;
                pthread_mutex_unlock(&a->st_lock);
        }
        pthread_mutex_unlock(&c->lock);
        for (size_t i = 0; i < n; i++) {
                struct app *a = gone[i];
                if (pthread_mutex_trylock(&a->op_lock) != 0)
                        continue; /* a job is starting or stopping it: not unheard */
                pthread_mutex_lock(&a->st_lock);
                bool still = (a->state == PROTO_APP_STARTING || a->state == PROTO_APP_RUNNING) && a->monitor_fd < 0 &&
                             !a->stopping;
                int64_t started = a->started_ms;
                pthread_mutex_unlock(&a->st_lock);
                pthread_mutex_unlock(&a->op_lock);
                if (!still || app_monitor_alive(a->dir, NULL))
                        continue;
                struct app_exit ex;
                struct na_error e = NA_ERROR_INIT;
                if (app_monitor_read_exit(a->dir, &ex, &e) == 0 && ex.at_ms >= started)
                        exited(c, a, ex.code, ex.signal);
                else
                        exited(c, a, 128 + SIGKILL, SIGKILL);
                na_error_clear(&e);
        }
}

/* One due restart: the app's op_lock is only tried (a job at it: the next tick). */
static void restart_due(struct app_conn *c, struct app *a, int64_t now)
{
        if (pthread_mutex_trylock(&a->op_lock) != 0)
                return;
        pthread_mutex_lock(&a->st_lock);
        bool go = a->restart_at_ms && a->restart_at_ms <= now && !a->removed;
        bool resume = a->restart_resume;
        if (go)
                a->restart_at_ms = 0;
        pthread_mutex_unlock(&a->st_lock);
        if (go) {
                struct na_error e = NA_ERROR_INIT;
                if (app_start_locked(c, a, true, &e) < 0) {
                        system_line(a, "%s failed: %s", resume ? "start after the node's restart" : "restart",
                                    e.message);
                        pthread_mutex_lock(&a->st_lock);
                        app_set_state(c, a, PROTO_APP_CRASHED);
                        pthread_mutex_unlock(&a->st_lock);
                } else if (!resume) {
                        pthread_mutex_lock(&a->st_lock);
                        a->restarts++;
                        pthread_mutex_unlock(&a->st_lock);
                        (void)app_meta_save(a, &e);
                }
                na_error_clear(&e);
        }
        pthread_mutex_unlock(&a->op_lock);
}

#define DUE_MAX 64

struct due_batch {
        struct app_conn *c;
        struct app **apps;
        size_t n, next;
        int64_t now;
        pthread_mutex_t lock;
};

static void *due_worker(void *userdata)
{
        struct due_batch *d = userdata;
        for (;;) {
                pthread_mutex_lock(&d->lock);
                size_t i = d->next < d->n ? d->next++ : d->n;
                pthread_mutex_unlock(&d->lock);
                if (i == d->n)
                        return NULL;
                restart_due(d->c, d->apps[i], d->now);
        }
}

/*
 * Restarts that are due, and apps whose monitor is gone without a word. Due starts run
 * start_parallel at a time (after a node reboot with no stagger, every app that ran is
 * due at once: one at a time, 1,000 of them took minutes); this thread waits for them.
 */
static void tick(struct app_conn *c)
{
        reap_unheard(c);
        int64_t now = (int64_t)na_now_real_ms();
        /* Apps are never freed while the driver is open (a deleted one is only marked),
         * so the pointers stay good once the list's lock is dropped. */
        struct app *due[DUE_MAX];
        size_t n = 0;
        pthread_mutex_lock(&c->lock);
        for (struct app *a = c->apps; a && n < ARRAY_SIZE(due); a = a->next) {
                pthread_mutex_lock(&a->st_lock);
                if (a->restart_at_ms && a->restart_at_ms <= now && !a->removed)
                        due[n++] = a;
                pthread_mutex_unlock(&a->st_lock);
        }
        pthread_mutex_unlock(&c->lock);
        if (n == 0)
                return;
        struct due_batch d = { .c = c, .apps = due, .n = n, .now = now, .lock = PTHREAD_MUTEX_INITIALIZER };
        pthread_t helpers[DUE_MAX];
        size_t want = c->o.start_parallel ? c->o.start_parallel : 4, started = 0;
        if (want > n)
                want = n;
        /* This thread is one of the workers; the others are helpers for this tick only. */
        for (size_t i = 1; i < want; i++)
                if (pthread_create(&helpers[started], NULL, due_worker, &d) == 0)
                        started++;
        due_worker(&d);
        for (size_t i = 0; i < started; i++)
                pthread_join(helpers[i], NULL);
        pthread_mutex_destroy(&d.lock);
}

/* Once, after the agent started: re-attach, take the exits it missed, start after a reboot. */
static void resume_all(struct app_conn *c)
{
        unsigned stagger = c->o.start_stagger_ms, n = 0; /* 0: all at once (start_parallel at a time) */
        int64_t now = (int64_t)na_now_real_ms();
        pthread_mutex_lock(&c->lock);
        for (struct app *a = c->apps; a; a = a->next) {
                if (app_monitor_alive(a->dir, NULL)) {
                        pthread_mutex_lock(&a->st_lock);
                        app_set_state(c, a, a->deploy->tmpl.started_pattern && !app_monitor_started(a->dir)
                                                    ? PROTO_APP_STARTING
                                                    : PROTO_APP_RUNNING);
                        pthread_mutex_unlock(&a->st_lock);
                        app_watch_attach(c, a);
                        app_report_cgroup(c, a);
                        continue;
                }
                if (!a->want_running)
                        continue;
                struct app_exit ex;
                struct na_error e = NA_ERROR_INIT;
                if (app_monitor_read_exit(a->dir, &ex, &e) == 0 && ex.at_ms >= a->started_ms) {
                        /* It ended while the agent was away: as if seen now. */
                        exited(c, a, ex.code, ex.signal);
                } else {
                        /* Its monitor is gone without an exit record: the node restarted. */
                        pthread_mutex_lock(&a->st_lock);
                        a->restart_at_ms = now + (int64_t)stagger * n++;
                        a->restart_resume = true;
                        pthread_mutex_unlock(&a->st_lock);
                }
                na_error_clear(&e);
        }
        pthread_mutex_unlock(&c->lock);
}

/*
 * After resume: the volume of every stopped app whose SFTP login is on is mounted, so
 * a login after a node reboot finds it (nodeagent-sftpd cannot mount; the files kinds
 * and app.sftp.set mount on demand themselves). Apps are prepended and never freed
 * while the connection is open: the walk from the head taken under the lock is stable.
 */
static void mount_stopped(struct app_conn *c)
{
        pthread_mutex_lock(&c->lock);
        struct app *head = c->apps;
        pthread_mutex_unlock(&c->lock);
        for (struct app *a = head; a && !__atomic_load_n(&c->quit, __ATOMIC_ACQUIRE); a = a->next) {
                /* Never wait here: a job holding op_lock may wait for an exit this thread records
                 * (and a job on the app mounts what it needs itself). */
                if (pthread_mutex_trylock(&a->op_lock) != 0)
                        continue;
                pthread_mutex_lock(&a->st_lock);
                bool skip = a->removed || a->want_running || !a->deploy || !a->deploy->tmpl.file_access;
                pthread_mutex_unlock(&a->st_lock);
                if (!skip && app_oci_sftp_enabled(a) && !app_monitor_alive(a->dir, NULL)) {
                        char img[4200], disk[4200];
                        app_path_in(a, "disk.img", img, sizeof(img));
                        app_path_in(a, "disk", disk, sizeof(disk));
                        bool mounted = false;
                        struct na_error e = NA_ERROR_INIT;
                        int r = app_volume_is_mounted(disk, &mounted, &e);
                        if (r >= 0 && !mounted)
                                r = app_volume_mount(img, disk, &e);
                        if (r < 0)
                                system_line(a, "mount the volume for SFTP after the node's restart: %s", e.message);
                        na_error_clear(&e);
                }
                pthread_mutex_unlock(&a->op_lock);
        }
}

/*
 * After resume: an app.update the agent's death cut short (its intent still in the app's
 * record) is put back on the previous version (app-oci-update.c), once per app. An app a
 * job holds is tried again at the next tick (an update job puts it back itself first).
 * True when every app was seen.
 */
static bool recover_updates(struct app_conn *c)
{
        pthread_mutex_lock(&c->lock);
        struct app *head = c->apps;
        pthread_mutex_unlock(&c->lock);
        bool all = true;
        for (struct app *a = head; a && !__atomic_load_n(&c->quit, __ATOMIC_ACQUIRE); a = a->next) {
                if (pthread_mutex_trylock(&a->op_lock) != 0) {
                        all = false;
                        continue;
                }
                if (a->update && !a->removed) {
                        struct na_error e = NA_ERROR_INIT;
                        if (app_update_recover_locked(c, a, &e) < 0)
                                system_line(a, "update: putting the previous version back failed: %s", e.message);
                        na_error_clear(&e);
                }
                pthread_mutex_unlock(&a->op_lock);
        }
        return all;
}

static void *watch_main(void *userdata)
{
        struct app_conn *c = userdata;
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
        bool resumed = false, recovered = false;
        while (!__atomic_load_n(&c->quit, __ATOMIC_ACQUIRE)) {
                if (!resumed && __atomic_load_n(&c->resumed, __ATOMIC_ACQUIRE)) {
                        resumed = true;
                        resume_all(c);
                        mount_stopped(c);
                }
                if (resumed && !recovered)
                        recovered = recover_updates(c);
                struct epoll_event ev[32];
                int n = epoll_wait(c->epfd, ev, 32, TICK_MS);
                for (int i = 0; i < n; i++) {
                        if (ev[i].data.ptr == NULL) {
                                uint64_t v;
                                (void)!read(c->wakefd, &v, sizeof(v));
                                continue;
                        }
                        monitor_message(c, ev[i].data.ptr);
                }
                tick(c);
        }
        return NULL;
}

int app_watch_start(struct app_conn *c, struct na_error *err)
{
        c->epfd = epoll_create1(EPOLL_CLOEXEC);
        c->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->epfd < 0 || c->wakefd < 0)
                return na_error_sys(err, errno, "apps: watcher");
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->wakefd, &ev) < 0)
                return na_error_sys(err, errno, "apps: watcher");
        int e = pthread_create(&c->thread, NULL, watch_main, c);
        if (e)
                return na_error_sys(err, e, "apps: watcher thread");
        c->thread_started = true;
        return 0;
}

void app_watch_stop(struct app_conn *c)
{
        if (c->thread_started) {
                __atomic_store_n(&c->quit, true, __ATOMIC_RELEASE);
                app_watch_wake(c);
                pthread_join(c->thread, NULL);
                c->thread_started = false;
        }
        for (struct app *a = c->apps; a; a = a->next)
                if (a->monitor_fd >= 0) {
                        close(a->monitor_fd);
                        a->monitor_fd = -1;
                }
        if (c->epfd >= 0)
                close(c->epfd);
        if (c->wakefd >= 0)
                close(c->wakefd);
        c->epfd = c->wakefd = -1;
}

void app_oci_resume(struct app_conn *c)
{
        __atomic_store_n(&c->resumed, true, __ATOMIC_RELEASE);
        app_watch_wake(c);
}
