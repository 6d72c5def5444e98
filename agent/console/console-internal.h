/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A console session, shared by the session core (consoles.c) and its modes (console-app.c). */
#pragma once

#include <pthread.h>
#include <stdint.h>

#include "agent/console/consoles.h"
#include "agent/console/files-pace.h"
#include "agent/base/loop.h"
#include "agent/console/ws.h"
#include "proto/console.h"

#define CONSOLE_QUEUE_MAX (1024u * 1024u) /* bytes per session not yet on the socket */
#define CONSOLE_CLOSED_REMEMBERED 1024    /* closed session ids refused for reuse */

enum console_state { CONSOLE_DIALING, CONSOLE_OPEN, CONSOLE_CLOSING };

struct console_frame {
        struct console_frame *next;
        enum ws_kind kind;
        size_t len;
        char data[];
};

struct console_session {
        struct consoles *c;
        struct console_session *prev, *next; /* c->sessions, under c->lock */
        char id[PROTO_CONSOLE_SESSION_MAX + 1];
        char target_id[80];
        enum proto_target_type target_type;
        enum proto_console_mode mode;
        int64_t idle_sec;
        enum console_state state; /* under c->lock while DIALING */
        bool close_requested;     /* console.close arrived (under c->lock) */
        int64_t opened_ms;

        struct ws_dialed *dialed; /* DIALING → OPEN, handed over with start_post */
        struct ws *ws;
        struct loop_post_node start_post, close_post;
        struct loop_timer *idle_timer;
        char reason[64]; /* why we end it: the console.closed reason */

        struct console_frame *qhead, *qtail;
        size_t qbytes;
        uint64_t dropped, dropped_unsaid;
        uint64_t frames_out, bytes_out, frames_in;

        /* app mode (console-app.c) */
        struct app_follower *follower; /* shared by the app's sessions */
        int64_t next_seq;              /* the next ring seq this session has not seen */
        int64_t last_seq;

        /* vps modes (console-vps.c) */
        int vps_fd;      /* the driver's console socket; -1 */
        uint8_t *vps_in; /* relay bytes the socket has not taken yet */
        size_t vps_in_len;
        char vps_path[64];           /* the serial pty, opened again after a hangup */
        unsigned vps_retries;
        struct loop_timer *vps_timer;

        /* files mode (console-files.c) */
        struct app_fs *fs;            /* the app's volume (its root), from console.open's checks */
        char *path;                   /* the file, as console.open named it */
        int files_wd;                 /* the inotify watch of its directory; -1: none */
        uint64_t dir_dev, dir_ino;    /* that directory */
        struct loop_timer *files_timer; /* the next read (coalescing, or a poll while the directory is away) */
        int64_t files_push_ms;        /* when the last file/gone frame went out */
        int64_t files_due_ms;         /* when files_timer fires, while armed */
        bool files_reading, files_dirty, files_writing;
        bool files_reread;            /* a read came back while a write was unanswered: read again after it */
        bool files_sent, files_exists; /* a file/gone frame went out; whether the file was there */
        char files_version[PROTO_CONSOLE_VERSION_MAX + 1]; /* of the last file frame, or the last write */
        struct files_rate files_rate; /* frames from the relay (files-pace.h) */
};

struct consoles {
        struct consoles_options opt;
        pthread_mutex_t lock;
        struct console_session *sessions;
        unsigned count;
        char (*closed_ids)[PROTO_CONSOLE_SESSION_MAX + 1]; /* a ring of CONSOLE_CLOSED_REMEMBERED */
        unsigned closed_next;
        struct app_follower *followers; /* loop thread only: one per app with sessions */
        /* files mode (console-files.c), loop thread only */
        int files_ino_fd;                 /* one inotify instance for every files session; -1 until needed */
        struct files_watch *watches;      /* its watches and how many sessions share each */
        size_t nwatches, watches_cap;
        struct workers *files_readers;    /* reads off the loop */
};

/* consoles.c: queue a frame for the relay (dropping the oldest beyond CONSOLE_QUEUE_MAX). */
void console_send(struct console_session *s, enum ws_kind kind, const void *data, size_t len);
/* A system line of the session's own (app mode): not in the app's ring. */
void console_system(struct console_session *s, const char *fmt, ...) _printf_(2, 3);
/* End the session: close frame with code and reason, then console.closed. */
void console_end(struct console_session *s, uint16_t code, const char *reason);

/* console-app.c */
int console_app_start(struct console_session *s, struct na_error *err);
void console_app_input(struct console_session *s, const uint8_t *data, size_t len);
void console_app_stop(struct console_session *s);

/* console-files.c */
/* Worker (console.open): the app, its file access and the file, before anything is dialled. */
int console_files_check(struct consoles *c, const char *app_id, const char *path, struct app_fs **ret_fs,
                        struct na_error *err);
int console_files_start(struct console_session *s, struct na_error *err);
void console_files_input(struct console_session *s, enum ws_kind kind, const uint8_t *data, size_t len);
void console_files_stop(struct console_session *s);
/* Close what console_files_check gave (NULL-safe; any thread). */
void console_files_release(struct app_fs *fs);
/* consoles_free: the inotify instance and the readers. */
void console_files_free(struct consoles *c);
/* A job of the session's app submitted by the session itself (a power action, a write):
 * a generated id, attempt 1, created now; params taken (may be NULL: check pj->params). */
void console_job_init(struct console_session *s, struct proto_job *pj, const char *kind, int64_t timeout_sec,
                      json_t *params);
/* The session with id, open, in consoles c (loop thread), or NULL. */
struct console_session *console_find_open(struct consoles *c, const char *id);

/* console-vps.c */
int console_vps_start(struct console_session *s, struct na_error *err);
void console_vps_input(struct console_session *s, const uint8_t *data, size_t len);
void console_vps_drained(struct console_session *s);
void console_vps_stop(struct console_session *s);
