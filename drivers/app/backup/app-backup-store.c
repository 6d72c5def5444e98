/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Where app backups live (drivers/app/backup/app-backup-parts.h): <backups_dir>/<app id>/, one
 * <backupId>.tar.zst and its record <backupId>.json each. The record is written last
 * and removed first, so a listed backup is always whole; a record whose data is
 * missing or of another size is not a backup.
 */
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "volume/volume.h"

#define RECORD_MAX (64 * 1024)

int app_backup_dir(const char *backups_dir, const char *app_id, bool create, char **ret, struct na_error *err)
{
        char *d = na_strdupf("%s/%s", backups_dir, app_id);
        if (!d)
                return na_error_sys(err, ENOMEM, "app %s: backups", app_id);
        if (create) {
                int r = na_mkdir_p(d, 0700, err);
                if (r < 0) {
                        free(d);
                        return na_error_prefix(err, "app %s: backups", app_id);
                }
        }
        *ret = d;
        return 0;
}

int app_backup_forget(const char *backups_dir, const char *app_id, struct na_error *err)
{
        if (!app_id || !*app_id || strchr(app_id, '/') || streq(app_id, ".") || streq(app_id, ".."))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "backups: not an app id");
        _cleanup_close_ int dfd = open(backups_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "app %s: backups: open %s", app_id, backups_dir);
        int r = app_fs_rm_rf(dfd, app_id, err);
        return r < 0 ? na_error_prefix(err, "app %s: remove its backups", app_id) : 0;
}

int app_backup_record_load(const char *dir, const char *bid, struct proto_app_backup *ret, struct na_error *err)
{
        if (!proto_vps_object_id_valid(bid))
                return -ENOENT;
        _cleanup_free_ char *rec = na_strdupf("%s/%s.json", dir, bid);
        _cleanup_free_ char *data = na_strdupf("%s/%s" APP_BACKUP_SUFFIX, dir, bid);
        if (!rec || !data)
                return na_error_sys(err, ENOMEM, "backup %s", bid);
        _cleanup_json_ json_t *doc = na_json_load(rec, RECORD_MAX);
        if (!doc)
                return -ENOENT;
        struct stat st;
        const char *sha = json_string_value(json_object_get(doc, "sha256"));
        json_int_t size = json_integer_value(json_object_get(doc, "sizeBytes"));
        if (!sha || strlen(sha) != 64 || stat(data, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)size)
                return -ENOENT;
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->backup_id, sizeof(ret->backup_id), "%s", bid);
        snprintf(ret->sha256, sizeof(ret->sha256), "%s", sha);
        ret->size_bytes = size;
        ret->created_at_ms = json_integer_value(json_object_get(doc, "createdAt"));
        return 0;
}

static int cmp_backup(const void *a, const void *b)
{
        const struct proto_app_backup *x = a, *y = b;
        if (x->created_at_ms != y->created_at_ms)
                return x->created_at_ms < y->created_at_ms ? -1 : 1;
        return strcmp(x->backup_id, y->backup_id);
}

int app_backup_records(const char *dir, struct proto_app_backup **ret, size_t *ret_n, struct na_error *err)
{
        *ret = NULL;
        *ret_n = 0;
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "open %s", dir);
        size_t n = 0, cap = 0;
        struct proto_app_backup *list = NULL;
        int r = 0;
        for (struct dirent *de; (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                if (len <= 5 || len - 5 > PROTO_VPS_OBJECT_ID_MAX || !streq(de->d_name + len - 5, ".json"))
                        continue;
                char bid[PROTO_VPS_OBJECT_ID_MAX + 1];
                memcpy(bid, de->d_name, len - 5);
                bid[len - 5] = '\0';
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        struct proto_app_backup *nl = realloc(list, cap * sizeof(*list));
                        if (!nl) {
                                r = na_error_sys(err, ENOMEM, "backups");
                                break;
                        }
                        list = nl;
                }
                int k = app_backup_record_load(dir, bid, &list[n], err);
                if (k == 0)
                        n++;
                else if (k != -ENOENT) {
                        r = k;
                        break;
                }
        }
        closedir(d);
        if (r < 0) {
                free(list);
                return r;
        }
        if (n > 0)
                qsort(list, n, sizeof(*list), cmp_backup);
        *ret = list;
        *ret_n = n;
        return 0;
}

int app_backup_remove(const char *dir, const char *bid, struct na_error *err)
{
        _cleanup_free_ char *rec = na_strdupf("%s/%s.json", dir, bid);
        _cleanup_free_ char *data = na_strdupf("%s/%s" APP_BACKUP_SUFFIX, dir, bid);
        if (!rec || !data)
                return na_error_sys(err, ENOMEM, "backup %s", bid);
        int r;
        if ((r = na_unlink(rec, err)) < 0 || (r = na_fsync_parent(rec, err)) < 0 || (r = na_unlink(data, err)) < 0)
                return na_error_prefix(err, "delete backup %s", bid);
        return 0;
}

int app_backup_retain(const char *dir, const struct proto_vps_backup_limits *limits, struct na_error *err)
{
        struct proto_app_backup *list = NULL;
        size_t n = 0;
        int r = app_backup_records(dir, &list, &n, err);
        if (r < 0)
                return r;
        bool *gone = calloc(n + 1, sizeof(bool));
        if (!gone) {
                free(list);
                return na_error_sys(err, ENOMEM, "retention");
        }
        proto_backup_retention(list, n, limits, (int64_t)na_now_real_ms(), gone);
        for (size_t i = 0; i < n && r == 0; i++)
                if (gone[i])
                        r = app_backup_remove(dir, list[i].backup_id, err);
        free(gone);
        free(list);
        return r;
}

void app_backup_sweep(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        for (struct dirent *de; (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                if (len > 8 && streq(de->d_name + len - 8, ".partial"))
                        (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
}

int app_backup_hash_fd(int fd, const struct na_progress *progress, char sha256[65], uint64_t *ret_size,
                       struct na_error *err)
{
        if (lseek(fd, 0, SEEK_SET) < 0)
                return na_error_sys(err, errno, "seek");
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(ctx);
                return na_error_set(err, EIO, NA_E_INTERNAL, "sha256: init");
        }
        _cleanup_free_ unsigned char *buf = malloc(1 << 17);
        uint64_t total = 0;
        int r = buf ? 0 : na_error_sys(err, ENOMEM, "sha256");
        while (r == 0) {
                ssize_t n = read(fd, buf, 1 << 17);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = na_error_sys(err, errno, "read");
                        break;
                }
                if (n == 0)
                        break;
                EVP_DigestUpdate(ctx, buf, (size_t)n);
                total += (uint64_t)n;
                r = na_progress_checkpoint(progress, err); /* a load of the stop flag: every 128 KiB */
        }
        unsigned char md[32];
        unsigned int mdlen = 0;
        if (r == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
                r = na_error_set(err, EIO, NA_E_INTERNAL, "sha256: final");
        EVP_MD_CTX_free(ctx);
        if (r < 0)
                return r;
        na_sha256_hex(md, sha256);
        *ret_size = total;
        return 0;
}

int app_backup_commit(const char *dir, const char *app_id, const char *bid, int data_fd, const char *tmp_name,
                      uint64_t size, const char *sha256, struct proto_app_backup *ret, struct na_error *err)
{
        _cleanup_free_ char *data = na_strdupf("%s/%s" APP_BACKUP_SUFFIX, dir, bid);
        _cleanup_free_ char *rec = na_strdupf("%s/%s.json", dir, bid);
        if (!data || !rec)
                return na_error_sys(err, ENOMEM, "backup %s", bid);
        if (fsync(data_fd) < 0)
                return na_error_sys(err, errno, "backup %s: fsync", bid);
        if (fchmod(data_fd, 0600) < 0)
                return na_error_sys(err, errno, "backup %s: chmod", bid);
        /* A record left from an earlier backup of this id goes first: it would describe other data. */
        (void)unlink(rec);
        if (tmp_name) {
                if (rename(tmp_name, data) < 0)
                        return na_error_sys(err, errno, "backup %s: rename", bid);
        } else {
                (void)unlink(data);
                if (linkat(data_fd, "", AT_FDCWD, data, AT_EMPTY_PATH) < 0)
                        return na_error_sys(err, errno, "backup %s: link", bid);
        }
        int64_t now = (int64_t)na_now_real_ms();
        _cleanup_json_ json_t *doc = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s}", "backupId", bid, "appId", app_id,
                                               "createdAt", (json_int_t)now, "sizeBytes", (json_int_t)size, "sha256",
                                               sha256, "format", APP_BACKUP_FORMAT);
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        int r = text ? na_atomic_write(rec, text, strlen(text), 0600, err) : na_error_sys(err, ENOMEM, "backup %s", bid);
        if (r < 0) {
                unlink(data);
                return na_error_prefix(err, "backup %s: record", bid);
        }
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->backup_id, sizeof(ret->backup_id), "%s", bid);
        snprintf(ret->sha256, sizeof(ret->sha256), "%s", sha256);
        ret->size_bytes = (int64_t)size;
        ret->created_at_ms = now;
        return 0;
}
