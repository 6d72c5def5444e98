/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live file editing (AGENT-API 4.3, mode "files"): a session follows one file of an
 * app's volume and takes versioned writes of it.
 *
 * Following: one inotify instance for every files session, a watch on each file's
 * directory (opened through the safe path layer, watched as /proc/self/fd/N of that
 * descriptor: never a path the app could redirect), events matched to sessions by
 * the file's name. An event asks for a read; reads run on two threads of their own
 * (never the loop), each from the volume's root again, and what they find goes out
 * as a file or gone frame when the version differs from the last one the session
 * was told, at most one such frame per FILES_PUSH_GAP_MS. The directory gone (or
 * replaced) is noticed by the read: the watch follows the new one, or, while there
 * is none, a read every FILES_DIR_POLL_MS. A watch the kernel refuses (the node's
 * inotify instances or watches used up: EMFILE, ENOSPC) leaves the session following
 * the file by that same read every FILES_DIR_POLL_MS, said once as a warning.
 *
 * Writes: each a job of the app's own queue (jobs_submit_local), so a write and the
 * app's files jobs, backups, updates and other sessions' writes run one at a time;
 * its compare-and-swap on the version and the atomic replace are the volume layer's
 * (app_fs_file_replace_if). One write in flight per session; frames from the relay
 * are rate-limited.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/base/log.h"
#include "agent/base/services.h"
#include "agent/console/console-internal.h"
#include "agent/console/files-pace.h"
#include "agent/jobs/jobs.h"
#include "agent/jobs/workers.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app.h"
#include "proto/app-files.h"
#include "volume/volume.h"

#define FILES_READERS 2         /* threads reading files off the loop */
#define FILES_BACKLOG_MAX (256u * 1024u) /* a session holding this much unsent reads no more: file frames
                                          * supersede each other, and a reader that falls behind must not
                                          * make the 1 MiB queue drop an answer (written, conflict) */
#define FILES_WRITE_TIMEOUT_SEC 120
#define FILES_END_WAIT_MS 5000  /* consoles_files_end waits this long for the loop at most */
#define FILES_MASK                                                                                             \
        (IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB |        \
         IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct files_watch {
        int wd;
        unsigned refs;
};

static void schedule(struct console_session *s, bool settle);
static void arm(struct console_session *s, long long delay_ms);
static void read_start(struct console_session *s);

void console_files_release(struct app_fs *fs)
{
        app_fs_close(fs);
}

static const char *last_name(const char *path)
{
        const char *rel = proto_app_files_path_relative(path);
        const char *slash = strrchr(rel, '/');
        return slash ? slash + 1 : rel;
}

static void send_text(struct console_session *s, char *text)
{
        if (text)
                console_send(s, WS_TEXT, text, strlen(text));
        free(text);
}

static void send_error(struct console_session *s, const char *code, const char *field, const char *fmt, ...)
        _printf_(4, 5);
static void send_error(struct console_session *s, const char *code, const char *field, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        send_text(s, proto_console_error_text(code, msg, field));
}

/* ---- checks on the worker, before anything is dialled ---- */

int console_files_check(struct consoles *c, const char *app_id, const char *path, struct app_fs **ret_fs,
                        struct na_error *err)
{
        const struct agent_services *sv = c->opt.services;
        if (!sv->app || !sv->app->exists(sv->app_conn, app_id)) {
                na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: not on this node", app_id);
                return -ENOENT;
        }
        if (!sv->app->files)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: the app driver has no files", app_id);
        struct app_fs *fs = NULL;
        int r = sv->app->files(sv->app_conn, app_id, &fs, err); /* FILE_ACCESS_DISABLED */
        if (r < 0)
                return r;
        struct app_fs_file f = { 0 };
        r = app_fs_file_get(fs, path, PROTO_CONSOLE_FILES_CONTENT_MAX, &f, err); /* 422 on path: leaves the volume */
        if (r >= 0 && !f.exists) {
                const char *state = f.not_regular == EISDIR ? "directory"
                                    : f.not_regular == ELOOP ? "symlink"
                                    : f.not_regular        ? "special"
                                                           : NULL;
                if (!state)
                        r = na_error_set(err, ENOENT, NA_E_FILE_NOT_FOUND, "%s: no such file in app %s's volume", path,
                                         app_id);
                else {
                        r = na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: %s", path,
                                         f.not_regular == EISDIR ? "is a directory"
                                         : f.not_regular == ELOOP
                                                 ? "is a symbolic link; open the file it points to"
                                                 : "not a regular file");
                        na_error_detail(err, "state", json_string(state));
                }
        }
        app_fs_file_clear(&f);
        if (r < 0) {
                app_fs_close(fs);
                return r;
        }
        *ret_fs = fs;
        return 0;
}

/* ---- the directory's watch ---- */

static void on_inotify(void *userdata, int fd, uint32_t revents);

static void watch_drop(struct console_session *s)
{
        struct consoles *c = s->c;
        if (s->files_wd < 0)
                return;
        for (size_t i = 0; i < c->nwatches; i++)
                if (c->watches[i].wd == s->files_wd) {
                        if (--c->watches[i].refs == 0) {
                                (void)inotify_rm_watch(c->files_ino_fd, s->files_wd);
                                c->watches[i] = c->watches[--c->nwatches];
                        }
                        break;
                }
        s->files_wd = -1;
}

/* Room for one more watch in c's table: 0, or -ENOMEM. */
static int watches_reserve(struct consoles *c)
{
        if (c->nwatches < c->watches_cap)
                return 0;
        size_t cap = c->watches_cap ? c->watches_cap * 2 : 16;
        struct files_watch *w = reallocarray(c->watches, cap, sizeof(*w));
        if (!w)
                return -ENOMEM;
        c->watches = w;
        c->watches_cap = cap;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses w once stored in c's table, which owns it and frees it */
        return 0;
        NA_ANALYZER_FP_END
}

static int watch_add(struct console_session *s, struct na_error *err)
{
        struct consoles *c = s->c;
        if (c->files_ino_fd < 0) {
                int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
                if (fd < 0)
                        return na_error_sys(err, errno, "console %s: inotify", s->id);
                if (loop_watch(c->opt.loop, fd, EPOLLIN, on_inotify, c, err) < 0) {
                        close(fd);
                        return -EIO;
                }
                c->files_ino_fd = fd;
        }
        if (watches_reserve(c) < 0)
                return na_error_sys(err, ENOMEM, "console %s", s->id);
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(s->fs, "path", s->path, &dir, &name, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(dir, &st) < 0)
                return na_error_sys(err, errno, "console %s: stat the directory of %s", s->id, s->path);
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dir);
        int wd = inotify_add_watch(c->files_ino_fd, proc, FILES_MASK);
        if (wd < 0)
                return na_error_sys(err, errno, "console %s: watch the directory of %s", s->id, s->path);
        watch_drop(s);
        size_t i = 0;
        while (i < c->nwatches && c->watches[i].wd != wd)
                i++;
        if (i == c->nwatches)
                c->watches[c->nwatches++] = (struct files_watch){ .wd = wd, .refs = 0 };
        c->watches[i].refs++;
        s->files_wd = wd;
        s->dir_dev = st.st_dev;
        s->dir_ino = st.st_ino;
        return 0;
}

/* No watch: followed by a read every FILES_DIR_POLL_MS instead. The directory away is
 * the read's to say; the kernel out of inotify instances or watches is the operator's
 * to know (fs.inotify.max_user_instances, max_user_watches). */
static void watch_failed(struct console_session *s, const struct na_error *err)
{
        if (err->errnum == ENOENT || err->errnum == ENOTDIR)
                log_debug("console %s: %s", s->id, err->message);
        else
                log_warn("console %s: %s; the file is read every %d ms instead", s->id, err->message,
                         FILES_DIR_POLL_MS);
}

/* What the kernel says of a watch: every files session on it reads again. */
static void on_inotify(void *userdata, int fd, uint32_t revents)
{
        struct consoles *c = userdata;
        (void)revents;
        char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        return; /* EAGAIN: all read */
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        p += sizeof(*ev) + ev->len;
                        bool all = ev->mask & IN_Q_OVERFLOW;
                        if (ev->mask & IN_IGNORED)
                                for (size_t i = 0; i < c->nwatches; i++)
                                        if (c->watches[i].wd == ev->wd) {
                                                c->watches[i] = c->watches[--c->nwatches];
                                                break;
                                        }
                        pthread_mutex_lock(&c->lock);
                        for (struct console_session *s = c->sessions; s; s = s->next) {
                                if (s->mode != PROTO_CONSOLE_FILES || s->state != CONSOLE_OPEN)
                                        continue;
                                if (!all && s->files_wd != ev->wd)
                                        continue;
                                if (!all && ev->len && !streq(ev->name, last_name(s->path)))
                                        continue;
                                if (ev->mask & IN_IGNORED)
                                        s->files_wd = -1; /* the kernel dropped it (the directory went) */
                                /* A bare write may be the first of several (truncate, then write):
                                 * let it settle. A close, a rename or a delete is an end: read now. */
                                schedule(s, !all && (ev->mask & ~(uint32_t)(IN_MODIFY | IN_ATTRIB)) == 0);
                        }
                        pthread_mutex_unlock(&c->lock);
                }
        }
}

/* ---- reads off the loop ---- */

struct files_read {
        struct loop_post_node post;
        struct consoles *c;
        char id[PROTO_CONSOLE_SESSION_MAX + 1];
        struct app_fs *fs; /* a root of its own */
        char *path;
        struct app_fs_file f;
        struct na_error err;
        int r;
};

static void files_read_free(struct files_read *rq)
{
        app_fs_close(rq->fs);
        app_fs_file_clear(&rq->f);
        na_error_clear(&rq->err);
        free(rq->path);
        free(rq);
}

static void push(struct console_session *s, const struct app_fs_file *f)
{
        bool changed = !s->files_sent || f->exists != s->files_exists ||
                       (f->exists && !streq(f->version, s->files_version));
        if (!changed)
                return;
        if (f->exists)
                send_text(s, proto_console_file_text("file", s->path, f->version, f->bytes, f->content, f->bytes,
                                                     f->binary));
        else
                send_text(s, proto_console_gone_text(s->path));
        s->files_push_ms = na_now_mono_ms();
        s->files_sent = true;
        s->files_exists = f->exists;
        snprintf(s->files_version, sizeof(s->files_version), "%s", f->exists ? f->version : "");
}

static void read_done(void *userdata)
{
        struct files_read *rq = userdata;
        struct console_session *s = console_find_open(rq->c, rq->id);
        if (!s || s->mode != PROTO_CONSOLE_FILES || !s->fs) {
                files_read_free(rq);
                return;
        }
        s->files_reading = false;
        if (rq->r < 0) {
                log_debug("console %s: read %s: %s", s->id, s->path, rq->err.message);
                send_error(s, rq->err.code ? rq->err.code : NA_E_INTERNAL, NULL, "%s", rq->err.message);
        } else {
                const struct app_fs_file *f = &rq->f;
                if (f->exists && (s->files_wd < 0 || f->dir_dev != s->dir_dev || f->dir_ino != s->dir_ino)) {
                        struct na_error err = NA_ERROR_INIT;
                        if (watch_add(s, &err) < 0) /* a new directory at the path: follow it */
                                watch_failed(s, &err);
                        na_error_clear(&err);
                }
                if (s->files_writing) {
                        /* The session's own write may be what this read saw: its answer
                         * comes first, then a read again tells what else changed. */
                        s->files_reread = true;
                        s->files_dirty = false;
                } else
                        push(s, f);
                if (s->files_wd < 0 && !s->files_dirty && !s->files_writing)
                        arm(s, FILES_DIR_POLL_MS); /* no watch: the directory is away, or the kernel refused one */
        }
        files_read_free(rq);
        if (s->files_dirty) {
                s->files_dirty = false;
                schedule(s, false);
        }
}

static void read_work(void *userdata)
{
        struct files_read *rq = userdata;
        rq->r = app_fs_file_get(rq->fs, rq->path, PROTO_CONSOLE_FILES_CONTENT_MAX, &rq->f, &rq->err);
        app_fs_close(rq->fs);
        rq->fs = NULL;
        loop_post_queue(rq->c->opt.loop, &rq->post);
}

static void read_start(struct console_session *s)
{
        struct consoles *c = s->c;
        struct na_error err = NA_ERROR_INIT;
        if (s->qbytes + (s->ws ? ws_queued(s->ws) : 0) >= FILES_BACKLOG_MAX) {
                arm(s, FILES_PUSH_GAP_MS); /* the reader is behind: the newest state, once it caught up */
                return;
        }
        struct files_read *rq = calloc(1, sizeof(*rq));
        int fd = -1;
        if (rq && (rq->path = strdup(s->path)) && (fd = fcntl(app_fs_root_fd(s->fs), F_DUPFD_CLOEXEC, 3)) < 0)
                na_error_sys(&err, errno, "dup");
        if (!rq || !rq->path || fd < 0 || app_fs_adopt(fd, 0, 0, &rq->fs, &err) < 0) { /* adopt closes fd on failure */
                if (rq)
                        files_read_free(rq);
                log_warn("console %s: cannot read %s: %s", s->id, s->path, err.code ? err.message : "out of memory");
                na_error_clear(&err);
                arm(s, FILES_DIR_POLL_MS); /* try again */
                return;
        }
        rq->c = c;
        snprintf(rq->id, sizeof(rq->id), "%s", s->id);
        loop_post_init(&rq->post, read_done, rq);
        if (workers_submit(c->files_readers, read_work, rq) < 0) {
                files_read_free(rq);
                arm(s, FILES_DIR_POLL_MS);
                return;
        }
        s->files_reading = true;
}

static void arm(struct console_session *s, long long delay_ms)
{
        s->files_due_ms = na_now_mono_ms() + delay_ms;
        loop_timer_arm_ms(s->files_timer, (uint64_t)delay_ms);
}

/*
 * Something may have changed: read now, or once the gap since the last frame is over
 * (and, with settle, FILES_SETTLE_MS from now), whichever is later; an earlier due
 * time than the timer's wins.
 */
static void schedule(struct console_session *s, bool settle)
{
        if (s->state != CONSOLE_OPEN || !s->fs)
                return;
        if (s->files_reading) {
                s->files_dirty = true;
                return;
        }
        long long now = na_now_mono_ms();
        long long due = files_pace_due(s->files_sent, s->files_push_ms, settle, now);
        if (due > now) {
                if (!loop_timer_armed(s->files_timer) || due < s->files_due_ms)
                        arm(s, due - now);
                return;
        }
        loop_timer_disarm(s->files_timer);
        read_start(s);
}

static void timer_fired(void *userdata)
{
        struct console_session *s = userdata;
        if (s->state != CONSOLE_OPEN || !s->fs)
                return;
        if (s->files_reading) {
                s->files_dirty = true;
                return;
        }
        read_start(s);
}

/* ---- writes through the app's job queue ---- */

struct files_write_params {
        char session_id[PROTO_CONSOLE_SESSION_MAX + 1];
        char *path;
        bool has_base;
        char base[PROTO_CONSOLE_VERSION_MAX + 1];
        char *content;
        size_t len;
};

static void write_params_free(void *p)
{
        struct files_write_params *w = p;
        if (!w)
                return;
        free(w->path);
        free(w->content);
        free(w);
}

static int write_decode(json_t *params, void **ret, struct na_error *err)
{
        struct files_write_params *w = calloc(1, sizeof(*w));
        json_t *base = json_object_get(params, "baseVersion");
        json_t *content = json_object_get(params, "content");
        const char *sid = json_string_value(json_object_get(params, "sessionId"));
        const char *path = json_string_value(json_object_get(params, "path"));
        if (!w || !sid || !path || !json_is_string(content) || !(w->path = strdup(path)) ||
            !(w->content = malloc(json_string_length(content) + 1))) {
                write_params_free(w);
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "console.files.write: params");
        }
        snprintf(w->session_id, sizeof(w->session_id), "%s", sid);
        w->has_base = json_is_string(base);
        if (w->has_base)
                snprintf(w->base, sizeof(w->base), "%s", json_string_value(base));
        w->len = json_string_length(content);
        memcpy(w->content, json_string_value(content), w->len);
        w->content[w->len] = 0;
        *ret = w;
        return 0;
}

static int write_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct files_write_params *w = params;
        const struct agent_services *sv = job_services(ctx);
        struct app_fs *fs = NULL;
        int r = sv->app && sv->app->files ? sv->app->files(sv->app_conn, job_target_id(ctx), &fs, err)
                                          : na_error_set(err, ENOTSUP, NA_E_DRIVER, "no app driver");
        if (r < 0)
                return r;
        struct app_fs_file now = { 0 };
        bool conflict = false;
        r = app_fs_file_replace_if(fs, w->path, w->has_base ? w->base : NULL, w->content, w->len,
                                   PROTO_CONSOLE_FILES_CONTENT_MAX, &now, &conflict, err);
        app_fs_close(fs);
        if (r < 0)
                return r;
        json_t *d = json_pack("{s:b, s:b, s:o, s:I}", "conflict", conflict, "exists", now.exists, "version",
                              now.exists ? json_string(now.version) : json_null(), "bytes", (json_int_t)now.bytes);
        if (d && conflict && now.exists) {
                if (now.binary)
                        json_object_set_new(d, "binary", json_true());
                else if (now.content)
                        json_object_set_new(d, "content", json_stringn(now.content, now.bytes));
        }
        app_fs_file_clear(&now);
        if (!d)
                return na_error_sys(err, ENOMEM, "console %s: write", w->session_id);
        *ret = d;
        return 0;
}

/* Not in the registry: only a files session submits it (jobs_submit_local). */
static JOB_KIND(files_write_kind, "console.files.write", .target = PROTO_TARGET_APP, .changes = false,
                .decode = write_decode, .free_params = write_params_free, .run = write_run);

struct files_write_run {
        struct consoles *c;
        char id[PROTO_CONSOLE_SESSION_MAX + 1];
};

static void write_finished(void *userdata, struct job_ctx *job)
{
        struct files_write_run *w = userdata;
        struct console_session *s = console_find_open(w->c, w->id);
        free(w);
        if (!s || s->mode != PROTO_CONSOLE_FILES)
                return;
        s->files_writing = false;
        json_t *d = json_object_get(job->result, "data");
        if (job->state != JOB_SUCCEEDED || !json_is_object(d)) {
                const char *code = job->error.code ? job->error.code : NA_E_INTERNAL;
                send_error(s, code, streq(code, NA_E_VALIDATION) ? "path" : NULL, "write: %s",
                           job->error.code ? job->error.message : job_state_name(job->state));
                if (s->files_reread) {
                        s->files_reread = false;
                        schedule(s, false);
                }
                if (streq(code, NA_E_FILE_ACCESS_DISABLED))
                        console_end(s, 1000, "file-access-disabled");
                else if (streq(code, NA_E_APP_NOT_FOUND))
                        console_end(s, 1000, "target-deleted");
                return;
        }
        const char *version = json_string_value(json_object_get(d, "version"));
        uint64_t bytes = (uint64_t)json_integer_value(json_object_get(d, "bytes"));
        if (!json_is_true(json_object_get(d, "conflict"))) {
                send_text(s, proto_console_written_text(version ? version : "", bytes));
        } else {
                json_t *content = json_object_get(d, "content");
                send_text(s, proto_console_file_text("conflict", NULL, version, bytes, json_string_value(content),
                                                     json_string_length(content),
                                                     json_is_true(json_object_get(d, "binary"))));
        }
        /* The session has seen this version now: the read its own change causes sends nothing. */
        s->files_sent = true;
        s->files_exists = version != NULL;
        snprintf(s->files_version, sizeof(s->files_version), "%s", version ? version : "");
        if (s->files_reread) {
                s->files_reread = false;
                schedule(s, false);
        }
}

static const struct job_sink write_sink = {
        .finished = write_finished,
};

static void write_submit(struct console_session *s, const struct proto_console_files_write *in)
{
        struct proto_job pj;
        console_job_init(s, &pj, files_write_kind.name, FILES_WRITE_TIMEOUT_SEC,
                         json_pack("{s:s, s:s, s:o, s:o}", "sessionId", s->id, "path", s->path, "baseVersion",
                                   in->has_base ? json_string(in->base_version) : json_null(), "content",
                                   json_stringn(in->content, in->len)));
        struct files_write_run *w = calloc(1, sizeof(*w));
        if (!w || !pj.params) {
                free(w);
                proto_job_clear(&pj);
                send_error(s, NA_E_INTERNAL, NULL, "write: out of memory");
                return;
        }
        w->c = s->c;
        snprintf(w->id, sizeof(w->id), "%s", s->id);
        if (!jobs_submit_local(s->c->opt.jobs, &pj, &files_write_kind, &write_sink, w)) {
                proto_job_clear(&pj);
                free(w);
                send_error(s, NA_E_INTERNAL, NULL, "write: could not queue it");
                return;
        }
        s->files_writing = true;
}

void console_files_input(struct console_session *s, enum ws_kind kind, const uint8_t *data, size_t len)
{
        if (!files_rate_take(&s->files_rate, na_now_mono_ms())) {
                send_error(s, "RATE_LIMITED", NULL, "at most %.0f frames a second (a burst of %.0f); frame ignored",
                           FILES_RATE_PER_SEC, FILES_RATE_BURST);
                return;
        }
        if (kind != WS_TEXT) {
                send_error(s, NA_E_VALIDATION, NULL, "binary frames are not understood; send "
                                                     "{\"type\":\"write\",\"baseVersion\":…,\"content\":…}");
                return;
        }
        struct proto_console_files_write in = { 0 };
        struct na_error err = NA_ERROR_INIT;
        if (proto_console_files_write_decode((const char *)data, len, &in, &err) < 0) {
                const char *field = NULL;
                const char *key;
                json_t *v;
                json_object_foreach(err.details, key, v)
                {
                        if (!streq(key, "_errors")) {
                                field = key;
                                break;
                        }
                }
                send_error(s, err.code ? err.code : NA_E_VALIDATION, field, "%s", err.message);
                na_error_clear(&err);
                proto_console_files_write_clear(&in);
                return;
        }
        if (s->files_writing)
                send_error(s, NA_E_INVALID_STATE, NULL,
                           "a write is under way; wait for its answer (written, conflict or error)");
        else
                write_submit(s, &in);
        proto_console_files_write_clear(&in);
}

/* ---- start, stop ---- */

int console_files_start(struct console_session *s, struct na_error *err)
{
        struct consoles *c = s->c;
        if (!c->files_readers) {
                int r = workers_new(FILES_READERS, &c->files_readers, err);
                if (r < 0)
                        return r;
        }
        if (!(s->files_timer = loop_timer_new(c->opt.loop, timer_fired, s)))
                return na_error_sys(err, ENOMEM, "console %s", s->id);
        files_rate_init(&s->files_rate, na_now_mono_ms());
        struct na_error e = NA_ERROR_INIT;
        if (watch_add(s, &e) < 0) /* the directory may be gone already: the read says so */
                watch_failed(s, &e);
        na_error_clear(&e);
        read_start(s);
        return 0;
}

void console_files_stop(struct console_session *s)
{
        if (!s->fs && !s->files_timer)
                return;
        loop_timer_free(s->files_timer);
        s->files_timer = NULL;
        watch_drop(s);
        app_fs_close(s->fs);
        s->fs = NULL;
}

void console_files_free(struct consoles *c)
{
        workers_free(c->files_readers, true);
        c->files_readers = NULL;
        if (c->files_ino_fd >= 0) {
                loop_unwatch(c->opt.loop, c->files_ino_fd);
                close(c->files_ino_fd);
        }
        c->files_ino_fd = -1;
        free(c->watches);
        c->watches = NULL;
        c->nwatches = c->watches_cap = 0;
}

/* ---- the driver's hook: file access to an app ends ---- */

struct files_end {
        struct consoles *c;
        char app_id[80];
        char reason[64];
        pthread_mutex_t m;
        pthread_cond_t cv;
        bool done;
        atomic_int refs; /* the caller and the loop: the last one frees */
};

static void files_end_unref(struct files_end *e)
{
        if (atomic_fetch_sub(&e->refs, 1) != 1)
                return;
        pthread_mutex_destroy(&e->m);
        pthread_cond_destroy(&e->cv);
        free(e);
}

static void files_end_posted(void *userdata)
{
        struct files_end *e = userdata;
        struct consoles *c = e->c;
        /* on_closed may unlink s itself, never another session. */
        for (struct console_session *s = c->sessions, *next; s; s = next) {
                next = s->next;
                if (s->mode == PROTO_CONSOLE_FILES && s->state == CONSOLE_OPEN && streq(s->target_id, e->app_id))
                        console_end(s, 1000, e->reason); /* console_files_stop lets go of the volume */
        }
        pthread_mutex_lock(&e->m);
        e->done = true;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->m);
        files_end_unref(e);
}

void consoles_files_end(struct consoles *c, const char *app_id, const char *reason)
{
        if (!c)
                return;
        bool any = false;
        pthread_mutex_lock(&c->lock);
        for (struct console_session *s = c->sessions; s; s = s->next)
                if (s->mode == PROTO_CONSOLE_FILES && streq(s->target_id, app_id)) {
                        any = true;
                        if (s->state == CONSOLE_DIALING)
                                s->close_requested = true; /* its worker drops it after the dial */
                }
        pthread_mutex_unlock(&c->lock);
        if (!any)
                return;
        struct files_end *e = calloc(1, sizeof(*e));
        if (!e)
                return;
        e->c = c;
        snprintf(e->app_id, sizeof(e->app_id), "%s", app_id);
        snprintf(e->reason, sizeof(e->reason), "%s", reason);
        pthread_mutex_init(&e->m, NULL);
        pthread_cond_init(&e->cv, NULL);
        atomic_init(&e->refs, 2);
        if (loop_post(c->opt.loop, files_end_posted, e) < 0) {
                atomic_store(&e->refs, 1);
                files_end_unref(e);
                return;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += FILES_END_WAIT_MS / 1000;
        pthread_mutex_lock(&e->m);
        while (!e->done)
                if (pthread_cond_timedwait(&e->cv, &e->m, &until) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&e->m);
        files_end_unref(e);
}
