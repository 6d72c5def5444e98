/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.files.list, read_text, write, mkdir, move, delete, export and import (AGENT-API
 * 4.2 and 4.4, reference 2.9 and 4.6): each a few lines over the app's volume, which the app driver opens
 * (FILE_ACCESS_DISABLED for templates that refuse it) and volume/volume.h keeps
 * every path beneath (openat2; a path that would leave is VALIDATION_ERROR on its
 * field). The params come from proto/app-files.h.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/log.h"
#include "agent/base/services.h"
#include "common/timeutil.h"
#include "drivers/app.h"
#include "volume/volume.h"
#include "transfer/transfer.h"
#include "proto/app-files-transfer.h"
#include "proto/app-files.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct app_fs *, app_fs_close)

static int volume(struct job_ctx *ctx, struct app_fs **ret, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        const char *id = job_target_id(ctx);
        if (services_apps_on(s, id, err) < 0)
                return -ENOTSUP;
        int r = job_checkpoint(ctx, err);
        return r < 0 ? r : s->app->files(s->app_conn, id, ret, err);
}

#define DECODER(name, type)                                                           \
        static int name##_decode(json_t *params, void **ret, struct na_error *err)   \
        {                                                                             \
                return proto_app_files_##name##_decode(params, (struct type **)ret, err); \
        }                                                                             \
        static void name##_free(void *p)                                              \
        {                                                                             \
                proto_app_files_##name##_free(p);                                     \
        }

DECODER(path, proto_app_files_path)
DECODER(read, proto_app_files_read)
DECODER(write, proto_app_files_write)
DECODER(move, proto_app_files_move)

static int empty(int r, json_t **ret, struct na_error *err)
{
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "app files");
        return r;
}

static int list_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_path *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        struct app_fs_listing l = { 0 };
        int r = volume(ctx, &fs, err);
        if (r >= 0)
                r = app_fs_list(fs, p->path, PROTO_APP_FILES_LIST_MAX, &l, err);
        if (r >= 0 && !(*ret = proto_app_files_list_encode(l.entries, l.n)))
                r = na_error_sys(err, ENOMEM, "app files: list");
        if (r >= 0 && l.cut) /* the answer is a bare array: the cut is said here (proto/README.md) */
                log_info("app %s: app.files.list %s: more than %d entries, the first %zu answered",
                         job_target_id(ctx), p->path, PROTO_APP_FILES_LIST_MAX, l.n);
        app_fs_listing_clear(&l);
        return r;
}

static int read_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_read *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        struct app_fs_text t = { 0 };
        int r = volume(ctx, &fs, err);
        if (r >= 0)
                r = app_fs_read_text(fs, p->path, (uint64_t)p->offset, (uint32_t)p->limit, &t, err);
        if (r >= 0 && !(*ret = proto_app_files_read_encode(p->path, t.content, t.bytes, t.truncated, t.binary)))
                r = na_error_sys(err, ENOMEM, "app files: read");
        app_fs_text_clear(&t);
        return r;
}

static int write_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_write *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        struct app_fs_write_opts o = { .in_place = p->has_offset || !p->truncate, .offset = (uint64_t)p->offset,
                                       .truncate = p->truncate };
        int r = volume(ctx, &fs, err);
        if (r >= 0)
                r = app_fs_write(fs, p->path, p->data, p->len, &o, err);
        if (r >= 0 && !(*ret = proto_app_files_write_encode(p->path, p->len)))
                r = na_error_sys(err, ENOMEM, "app files: write");
        return r;
}

static int mkdir_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_path *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        int r = volume(ctx, &fs, err);
        return empty(r < 0 ? r : app_fs_mkdir(fs, p->path, err), ret, err);
}

static int move_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_move *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        int r = volume(ctx, &fs, err);
        return empty(r < 0 ? r : app_fs_move(fs, p->from, p->to, err), ret, err);
}

static int delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_path *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        int r = volume(ctx, &fs, err);
        return empty(r < 0 ? r : app_fs_delete(fs, p->path, err), ret, err);
}

/* ---- app.files.export and app.files.import: one file through a transfer (AGENT-API 4.4) ---- */

static const char *const transfer_stages[] = { "transferring", NULL };

static int export_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_app_files_transfer_decode(params, "PUT", (int64_t)na_now_real_ms(),
                                               (struct proto_app_files_transfer **)ret, err);
}

static int import_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_app_files_transfer_decode(params, "GET", (int64_t)na_now_real_ms(),
                                               (struct proto_app_files_transfer **)ret, err);
}

static void transfer_params_free(void *p)
{
        proto_app_files_transfer_free(p);
}

static int transfer_finish(struct job_ctx *ctx, const char *what, const char *path, int r, struct transfer_result *res,
                           json_t **ret, struct na_error *err)
{
        if (r >= 0 && !(*ret = proto_app_files_transfer_encode(path, res->bytes, res->sha256, res->etags, res->n_etags)))
                r = na_error_sys(err, ENOMEM, "app files: %s", what);
        if (r < 0 && (err->errnum == ENOSPC || err->errnum == EDQUOT) && !streq_ptr(err->code, NA_E_QUOTA_EXCEEDED))
                r = na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED, "%s: the app's volume is full; nothing was kept",
                                 path);
        if (r < 0)
                na_error_prefix(err, "app %s: %s %s", job_target_id(ctx), what, path);
        transfer_result_clear(res);
        return r;
}

static int export_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_transfer *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;
        struct transfer_options o;
        struct transfer_result res = { 0 };
        const struct na_progress progress = job_na_progress(ctx);
        services_transfer_options(job_services(ctx), &o);
        int r = volume(ctx, &fs, err);
        if (r >= 0)
                r = app_fs_open_read(fs, p->path, &fd, &st, err);
        if (r >= 0)
                r = transfer_put(&o, p->transfer, fd, (uint64_t)st.st_size, &progress, &res, err);
        return transfer_finish(ctx, "export", p->path, r, &res, ret, err);
}

/* Into an unnamed file beside the target, renamed over it only after the sha256 check: a failure keeps nothing. */
static int import_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_files_transfer *p = params;
        _cleanup_(app_fs_closep) struct app_fs *fs = NULL;
        struct app_fs_tmp tmp = { .fd = -1, .dir_fd = -1 };
        struct transfer_options o;
        struct transfer_result res = { 0 };
        const struct na_progress progress = job_na_progress(ctx);
        services_transfer_options(job_services(ctx), &o);
        int r = volume(ctx, &fs, err);
        if (r >= 0)
                r = app_fs_tmp_open(fs, p->path, &tmp, err);
        if (r >= 0)
                r = transfer_get(&o, p->transfer, tmp.fd, &progress, &res, err);
        if (r >= 0)
                r = job_checkpoint(ctx, err);
        if (r >= 0)
                r = app_fs_tmp_commit(&tmp, err);
        else
                app_fs_tmp_abort(&tmp);
        return transfer_finish(ctx, "import", p->path, r, &res, ret, err);
}

static JOB_KIND(files_list_kind, "app.files.list", .target = PROTO_TARGET_APP, .changes = false, .decode = path_decode,
                .free_params = path_free, .run = list_run);
static JOB_KIND(files_read_kind, "app.files.read_text", .target = PROTO_TARGET_APP, .changes = false,
                .decode = read_decode, .free_params = read_free, .run = read_run);
static JOB_KIND(files_write_kind, "app.files.write", .target = PROTO_TARGET_APP, .changes = true,
                .decode = write_decode, .free_params = write_free, .run = write_run);
static JOB_KIND(files_mkdir_kind, "app.files.mkdir", .target = PROTO_TARGET_APP, .changes = true,
                .decode = path_decode, .free_params = path_free, .run = mkdir_run);
static JOB_KIND(files_move_kind, "app.files.move", .target = PROTO_TARGET_APP, .changes = true, .decode = move_decode,
                .free_params = move_free, .run = move_run);
static JOB_KIND(files_delete_kind, "app.files.delete", .target = PROTO_TARGET_APP, .changes = true,
                .decode = path_decode, .free_params = path_free, .run = delete_run);

static JOB_KIND(files_export_kind, "app.files.export", .target = PROTO_TARGET_APP, .changes = false,
                .stages = transfer_stages, .decode = export_decode, .free_params = transfer_params_free,
                .run = export_run);
static JOB_KIND(files_import_kind, "app.files.import", .target = PROTO_TARGET_APP, .changes = true,
                .stages = transfer_stages, .decode = import_decode, .free_params = transfer_params_free,
                .run = import_run);

job_kind_list app_files_job_kinds = { &files_list_kind, &files_read_kind, &files_write_kind, &files_mkdir_kind,
                                      &files_move_kind, &files_delete_kind, &files_export_kind, &files_import_kind,
                                      NULL };
