/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of apps (AGENT-API 4.2): params decoders of app.deploy, app.power,
 * app.command.set, app.console.send, app.output, image.pull and image.delete
 * (image.list, app.status and app.delete take none; the files, SFTP, backup,
 * exposure, group and metrics kinds are not here), the canonical form of a deploy,
 * and the encoders of App, app.status, app.output, images and the app events. No I/O, no
 * logging: JSON in, validated C structs out (or VALIDATION_ERROR with per-field
 * _errors, every field read before failing), and back. The decisions taken where the
 * contract is silent are in proto/README.md, "Apps".
 *
 * Decoders fit the job layer's decode(json_t *params, void **ret, err) after a cast,
 * as the vps ones do. Decoded params are owned (free them with their _free
 * function); a deploy keeps a reference to its params document and borrows strings
 * from it.
 *
 *   struct proto_app_deploy *d;
 *   int r = proto_app_deploy_decode(params, &d, &err);
 *   if (r < 0) return r;                                            // 422 with details
 *   char *const *argv = proto_app_deploy_argv(d);                  // NULL: the image's
 *   json_t *stored = proto_app_deploy_canonical(d);                 // keep; compare later
 *   proto_app_deploy_free(d);
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/app-image-ref.h"

/* App states: the reference's two (3.1) and the three of events and app.status. */
enum proto_app_state {
        PROTO_APP_RUNNING,
        PROTO_APP_STOPPED,
        PROTO_APP_STARTING,
        PROTO_APP_STOPPING,
        PROTO_APP_CRASHED,
};
extern const char *const proto_app_states[]; /* indexed by the enum, NULL-terminated */
const char *proto_app_state_name(enum proto_app_state s);
/* The App record's state (reference 2.1): "running" for running, starting and stopping; else "stopped". */
const char *proto_app_record_state_name(enum proto_app_state s);

enum proto_app_type {
        PROTO_APP_TYPE_APP,
        PROTO_APP_TYPE_BOT,
        PROTO_APP_TYPE_GAME_SERVER,
        PROTO_APP_TYPE_DATABASE,
        PROTO_APP_TYPE_SERVICE,
};
extern const char *const proto_app_types[]; /* "app", "bot", "game_server", "database", "service", NULL */

#define PROTO_APP_NAME_MAX 100           /* characters */
#define PROTO_APP_HOSTNAME_MAX 63        /* [a-z0-9-], no hyphen at either end */
#define PROTO_APP_VERSION_MAX 63         /* characters */
#define PROTO_APP_SFTP_USER_MAX 63       /* [a-z0-9._-], starting with a letter or digit */
#define PROTO_APP_TEMPLATE_ID_MAX 100    /* characters (also plan.id) */
#define PROTO_APP_COMMAND_ARGS_MAX 100   /* exec form: 1..100 items */
#define PROTO_APP_COMMAND_ARG_MAX 1000   /* of 1..1000 characters */
#define PROTO_APP_ENV_MAX 100            /* entries */
#define PROTO_APP_ENV_NAME_MAX 128       /* bytes of [A-Za-z_][A-Za-z0-9_]* */
#define PROTO_APP_ENV_VALUE_MAX 32768    /* bytes */
#define PROTO_APP_VOLUME_PATH_MAX 255    /* bytes */
#define PROTO_APP_VOLUME_PATH_DEFAULT "/home/container"
#define PROTO_APP_USER_MAX 255          /* template.user: "user" or "user:group", bytes */
#define PROTO_APP_LINE_MAX 4096          /* a console line (and a stop line), bytes */
#define PROTO_APP_PATTERN_MAX 1024       /* startedPattern, characters */
#define PROTO_APP_PORTS_MAX 64
#define PROTO_APP_CPU_MILLIS_MIN 10      /* cpuCores 0.01 */
#define PROTO_APP_CPU_MILLIS_MAX 256000  /* cpuCores 256 */
#define PROTO_APP_MEMORY_MIN 16
#define PROTO_APP_MEMORY_MAX 1048576
#define PROTO_APP_QUOTA_MIN 16
#define PROTO_APP_QUOTA_MAX 16777216
#define PROTO_APP_PIDS_MIN 16
#define PROTO_APP_PIDS_MAX 65536
#define PROTO_APP_PIDS_DEFAULT 512
#define PROTO_APP_GRACE_DEFAULT 30
#define PROTO_APP_GRACE_MAX 3600
#define PROTO_APP_OUTPUT_LIMIT_DEFAULT 100
#define PROTO_APP_OUTPUT_LIMIT_MAX 1000
#define PROTO_APP_IMAGE_REF_MAX 400      /* a formatted image reference fits in this many bytes */

/* ---- field rules (exposed for tests and the driver) --------------------------- */

/* NULL when valid, else why not (a sentence without the value). */
const char *proto_app_hostname_problem(const char *s);
const char *proto_app_sftp_username_problem(const char *s);
const char *proto_app_volume_path_problem(const char *s);
const char *proto_app_pattern_problem(const char *s); /* POSIX ERE, checked with regcomp */
/*
 * template.user: "user" or "user:group", each a name ([A-Za-z0-9_.][A-Za-z0-9_.-]*,
 * at most 32 bytes, an optional trailing '$') or a number 0..65535 (the ids an app's
 * user namespace maps). Whether the image has the names is the driver's question.
 */
const char *proto_app_user_problem(const char *s);
/* An environment variable name: 1..128 of [A-Za-z_][A-Za-z0-9_]*. */
bool proto_app_env_name_valid(const char *s);

/* Signals a graceful stop may use: SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM. */
bool proto_app_stop_signal_allowed(int sig);
/* "SIGTERM" for 15; any standard signal 1..31 has a name; NULL otherwise. */
const char *proto_app_signal_name(int sig);
/* A signal as an image's StopSignal writes it: "SIGINT", "INT" or "2"; 0 when not a standard signal 1..31. */
int proto_app_signal_parse(const char *s);

/* ---- params ------------------------------------------------------------------- */

/* How a graceful stop is asked for: a signal, or a line written to the console. */
enum proto_app_stop_kind { PROTO_APP_STOP_SIGNAL, PROTO_APP_STOP_LINE };
struct proto_app_stop {
        enum proto_app_stop_kind kind;
        int signal;       /* SIGNAL: one of the allowed signals (default SIGTERM) */
        const char *line; /* LINE: 1..4096 bytes, no NUL, CR or LF (borrowed) */
};

struct proto_app_template {
        const char *id;
        struct proto_image_ref image;
        char **command;              /* owned, NULL-terminated; NULL: the image's Entrypoint and Cmd */
        bool custom_command;         /* default false: the template manages its own start */
        bool file_access;            /* default true */
        char **env;                  /* owned "NAME=value", sorted by name, NULL-terminated; never NULL */
        size_t n_env;
        const char *volume_path;     /* default PROTO_APP_VOLUME_PATH_DEFAULT */
        struct proto_app_stop stop;
        bool stop_given;             /* template.stop was given (else the image's StopSignal, else SIGTERM) */
        const char *user;            /* NULL: the image's User (default root) */
        const char *started_pattern; /* NULL: started as soon as the process runs */
        uint16_t ports[PROTO_APP_PORTS_MAX]; /* sorted, no duplicates */
        size_t n_ports;
};

struct proto_app_plan {
        const char *id;          /* NULL: not given (plan.id is optional, echoed in App) */
        int64_t cpu_millis;      /* cpuCores x 1000, rounded: 10..256000 */
        int64_t memory_mb;       /* 16..1048576 */
        int64_t volume_quota_mb; /* 16..16777216 */
        int64_t pids;            /* 16..65536, default 512 */
};

/*
 * The strings of a decoded deploy are borrowed from its params document (root), until
 * proto_app_deploy_own() copies them into one block of their own and drops the
 * document: an app keeps its deploy for its whole life, and the document's JSON tree
 * cost about 3 KB an app where the strings take a few hundred bytes. A borrowed string
 * added here must be added to proto_app_deploy_own() too (tests/proto checks each).
 */
struct proto_app_deploy {
        json_t *root;              /* the params document (a reference); NULL once owned */
        char *strings;             /* proto_app_deploy_own(): the strings below, in one block */
        const char *name;
        const char *hostname;
        enum proto_app_type type;  /* default app */
        const char *version;
        char **command;            /* owned; NULL: the template's own command */
        const char *sftp_username;
        const char *group_id;      /* NULL: none */
        struct proto_app_template tmpl;
        struct proto_app_plan plan;
};
int proto_app_deploy_decode(json_t *params, struct proto_app_deploy **ret, struct na_error *err);
/* The deploy's strings copied into a block of its own and its document dropped (root is
 * NULL after): what stays in memory is the struct and its strings. -ENOMEM (p unchanged). */
int proto_app_deploy_own(struct proto_app_deploy *p);
void proto_app_deploy_free(struct proto_app_deploy *p);

/*
 * The start command in exec form: the app's command, else the template's, else NULL
 * (the image's Entrypoint and Cmd).
 */
char *const *proto_app_deploy_argv(const struct proto_app_deploy *p);

/*
 * The canonical params of a deploy: every field, defaults applied, env and ports
 * sorted, the image reference formatted. Decoding it gives the same deploy; store it
 * to compare later. NULL on allocation failure.
 */
json_t *proto_app_deploy_canonical(const struct proto_app_deploy *p);
/* Whether two deploys are the same (equal canonical forms). */
bool proto_app_deploy_same(const struct proto_app_deploy *a, const struct proto_app_deploy *b);

enum proto_app_power_action {
        PROTO_APP_POWER_START,
        PROTO_APP_POWER_STOP,
        PROTO_APP_POWER_RESTART,
        PROTO_APP_POWER_KILL,
};
extern const char *const proto_app_power_actions[]; /* "start", "stop", "restart", "kill", NULL */
struct proto_app_power {
        enum proto_app_power_action action;
        int64_t grace_sec; /* 0..3600, default 30; used by stop and restart */
};
int proto_app_power_decode(json_t *params, struct proto_app_power **ret, struct na_error *err);
void proto_app_power_free(struct proto_app_power *p);

/* app.command.set: the key must be present; null restores the template's command. */
struct proto_app_command_set {
        char **command; /* owned, NULL-terminated; NULL: the template's */
};
int proto_app_command_set_decode(json_t *params, struct proto_app_command_set **ret, struct na_error *err);
void proto_app_command_set_free(struct proto_app_command_set *p);

/* app.console.send: one line, 0..4096 bytes, no NUL, CR or LF (the agent adds the newline). */
struct proto_app_console_send {
        char line[PROTO_APP_LINE_MAX + 1];
        size_t len;
};
int proto_app_console_send_decode(json_t *params, struct proto_app_console_send **ret, struct na_error *err);
void proto_app_console_send_free(struct proto_app_console_send *p);

struct proto_app_output_query {
        int64_t since_seq; /* -1: not given (the last `limit` lines) */
        int64_t limit;     /* 1..1000, default 100 */
};
int proto_app_output_decode(json_t *params, struct proto_app_output_query **ret, struct na_error *err);
void proto_app_output_free(struct proto_app_output_query *p);

/* image.pull and image.delete: {image}. */
struct proto_app_image_params {
        struct proto_image_ref ref;
};
int proto_app_image_decode(json_t *params, struct proto_app_image_params **ret, struct na_error *err);
void proto_app_image_free(struct proto_app_image_params *p);

/* ---- results and events --------------------------------------------------------- */

/* An App record; every pointer is borrowed for the call. */
struct proto_app {
        const char *id;
        const char *name;
        const char *hostname;
        enum proto_app_type type;
        const char *version;
        char *const *command;      /* NULL: null (the template's) */
        const char *sftp_username;
        const char *group_id;      /* NULL: null */
        const char *template_id;
        struct proto_app_plan plan;
        enum proto_app_state state;
        bool sftp_enabled;
        int64_t created_at_ms;
        int64_t updated_at_ms;
        int64_t volume_seeded_at_ms; /* 0: null (not seeded: new, or nothing in the image there) */
};
/* Fill *out from a deploy (borrowing from it); state stopped, sftp off, times 0. */
void proto_app_from_deploy(const struct proto_app_deploy *d, const char *id, struct proto_app *out);
/*
 * {id, name, hostname, type, version, command, sftpUsername, groupId, group: {id}|null,
 *  template: {id}, plan: {id?, cpuCores, memoryMB, volumeQuotaMB, pids}, state,
 *  volumeQuotaMB, sftpEnabled, createdAt, updatedAt, volumeSeededAt}
 */
json_t *proto_app_encode(const struct proto_app *a);

/* {state} (app.power result and the app.state event's data). */
json_t *proto_app_state_encode(enum proto_app_state s);

struct proto_app_status {
        enum proto_app_state state;
        int64_t started_at_ms; /* 0: never started (null) */
        bool has_exit_code;    /* false: null (running, or never exited) */
        int exit_code;
        int64_t restarts;
        int64_t memory_mb;
        int64_t volume_used_mb;
        int64_t volume_size_mb; /* not on the wire: for the Prometheus endpoint's quota figures */
};
/* {state, startedAt, exitCode, restarts, memoryMB, volumeUsedMB} */
json_t *proto_app_status_encode(const struct proto_app_status *s);

enum proto_app_stream { PROTO_APP_STDOUT, PROTO_APP_STDERR, PROTO_APP_SYSTEM };
extern const char *const proto_app_streams[]; /* "stdout", "stderr", "system", NULL */
struct proto_app_line {
        int64_t seq;
        int64_t ts_ms;
        enum proto_app_stream stream;
        const char *text; /* bytes; invalid UTF-8 and NUL become U+FFFD */
        size_t len;
};
/* {seq, ts, stream, text}: one line (also an `app` console frame). */
json_t *proto_app_line_encode(const struct proto_app_line *l);
/* {lines: [...], nextSeq} */
json_t *proto_app_output_encode(const struct proto_app_line *lines, size_t n, int64_t next_seq);

struct proto_app_image_info {
        const char *image;  /* "<name>:<tag>" or "<name>@sha256:<hex>" */
        const char *digest; /* the manifest's, "sha256:<hex>" */
        int64_t size_bytes;
        const char *const *used_by; /* app ids, n_used_by of them */
        size_t n_used_by;
};
/* {image, digest, sizeBytes} (image.pull) */
json_t *proto_app_image_encode(const struct proto_app_image_info *i);
/* [{image, digest, sizeBytes, usedBy: [appId]}] (image.list) */
json_t *proto_app_image_list_encode(const struct proto_app_image_info *i, size_t n);

/*
 * app.exited data: {exitCode, signal?, crashLoop}. signal 0: a normal exit with
 * exit_code, no signal key. signal > 0: killed by it; exitCode is then 128 + signal
 * (exit_code is not used) and signal its name ("SIGKILL", "SIG40").
 */
json_t *proto_app_exited_encode(int exit_code, int signal, bool crash_loop);
