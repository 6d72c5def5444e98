/*
 * app.files.list, read_text, write, mkdir, move and delete (AGENT-API 4.2, reference
 * 2.9 and 4.6): each a few lines over the app's volume, which the app driver opens
 * (FILE_ACCESS_DISABLED for templates that refuse it) and drivers/app/app-fs.h keeps
 * every path beneath (openat2; a path that would leave is VALIDATION_ERROR on its
 * field). The params come from proto/app-files.h.
 */
#include <stdlib.h>

#include "agent/job.h"
#include "agent/log.h"
#include "agent/services.h"
#include "drivers/app.h"
#include "drivers/app/app-fs.h"
#include "proto/app-files.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct app_fs *, app_fs_close)

static int volume(struct job_ctx *ctx, struct app_fs **ret, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        const char *id = job_target_id(ctx);
        if (!s || !s->app) {
                const char *why = s && s->apps_off_reason[0] ? s->apps_off_reason : "no container runtime";
                na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: apps are off on this node: %s", id, why);
                na_error_detail(err, "reason", json_string(why));
                return -ENOTSUP;
        }
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

#define KIND(var, kname, chg, dec, fr, fn)                                                              \
        static const struct job_kind var = { .name = kname, .target = PROTO_TARGET_APP, .changes = chg, \
                                             .decode = dec, .free_params = fr, .run = fn }

KIND(files_list_kind, "app.files.list", false, path_decode, path_free, list_run);
KIND(files_read_kind, "app.files.read_text", false, read_decode, read_free, read_run);
KIND(files_write_kind, "app.files.write", true, write_decode, write_free, write_run);
KIND(files_mkdir_kind, "app.files.mkdir", true, path_decode, path_free, mkdir_run);
KIND(files_move_kind, "app.files.move", true, move_decode, move_free, move_run);
KIND(files_delete_kind, "app.files.delete", true, path_decode, path_free, delete_run);

job_kind_list app_files_job_kinds = { &files_list_kind, &files_read_kind, &files_write_kind, &files_mkdir_kind,
                                      &files_move_kind, &files_delete_kind, NULL };
