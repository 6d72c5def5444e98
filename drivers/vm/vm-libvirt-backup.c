/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Backups: a consistent copy of the disk (libvirt's backup API while a real
 * domain runs, qemu-img convert otherwise, which also flattens the template's
 * backing file into it), zstd-compressed with its sha256, in
 * <backups_dir>/<id>/<backupId>.qcow2.zst. The record <backupId>.json is written
 * last, atomically: a backup cut short by a restart leaves only *.partial files,
 * which never list and are swept by the next backup. Retention by maxBackups,
 * retentionDays and maxStorageGB follows each backup. Percentages follow the work:
 * exporting qemu-img's own (-p) or libvirt's job counters, compressing the bytes
 * read; a restore has no stages: 0-90 % while it unpacks (bytes read), 90 replacing
 * the disk, 95 starting.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/vm/vm-qcow2.h"
#include "proto/backup.h"

static char *backup_dir(struct vm_conn *c, const char *id)
{
        return na_strdupf("%s/%s", c->backups_dir, id);
}

static char *backup_file(struct vm_conn *c, const char *id, const char *bid, const char *suffix)
{
        return na_strdupf("%s/%s/%s%s", c->backups_dir, id, bid, suffix);
}

static int check_backup_id(const char *bid, struct na_error *err)
{
        if (!proto_vps_object_id_valid(bid))
                return na_error_field(err, "backupId", "must be 1..64 letters, digits, hyphens or underscores");
        return 0;
}

/* A complete backup's record; -ENOENT (err not set) when there is none. */
static int record_load(struct vm_conn *c, const char *id, const char *bid, struct proto_vps_backup *out,
                       struct na_error *err)
{
        _cleanup_free_ char *rec = backup_file(c, id, bid, ".json");
        _cleanup_free_ char *data = backup_file(c, id, bid, ".qcow2.zst");
        if (!rec || !data)
                return na_error_sys(err, ENOMEM, "vps %s: backup %s", id, bid);
        _cleanup_json_ json_t *doc = na_json_load(rec, 64 * 1024);
        if (!doc)
                return -ENOENT;
        struct stat st;
        const char *sha = json_string_value(json_object_get(doc, "sha256"));
        json_int_t size = json_integer_value(json_object_get(doc, "sizeBytes"));
        if (!sha || strlen(sha) != 64 || stat(data, &st) < 0 || st.st_size != (off_t)size)
                return -ENOENT; /* a record whose data is gone or differs is not a backup */
        memset(out, 0, sizeof(*out));
        snprintf(out->backup_id, sizeof(out->backup_id), "%s", bid);
        snprintf(out->sha256, sizeof(out->sha256), "%s", sha);
        out->size_bytes = size;
        out->created_at_ms = json_integer_value(json_object_get(doc, "createdAt"));
        return 0;
}

/* The record of a complete backup (its data already in place), written last, atomically. */
static int record_write(struct vm_conn *c, const char *id, const char *bid, uint64_t size, const char *sha,
                        struct proto_vps_backup *ret, struct na_error *err)
{
        _cleanup_free_ char *rec = backup_file(c, id, bid, ".json");
        int64_t now = (int64_t)na_now_real_ms();
        _cleanup_json_ json_t *doc = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s}", "backupId", bid, "vpsId", id,
                                               "createdAt", (json_int_t)now, "sizeBytes", (json_int_t)size, "sha256",
                                               sha, "format", "qcow2+zstd");
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        if (!rec || !text)
                return na_error_sys(err, ENOMEM, "vps %s: backup %s", id, bid);
        int r = na_atomic_write(rec, text, strlen(text), 0600, err);
        if (r < 0)
                return na_error_prefix(err, "vps %s: backup %s", id, bid);
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->backup_id, sizeof(ret->backup_id), "%s", bid);
        snprintf(ret->sha256, sizeof(ret->sha256), "%s", sha);
        ret->size_bytes = (int64_t)size;
        ret->created_at_ms = now;
        return 0;
}

/* A complete backup's record, or BACKUP_NOT_FOUND naming it. */
static int record_require(struct vm_conn *c, const char *id, const char *bid, struct proto_vps_backup *out,
                          struct na_error *err)
{
        int r = record_load(c, id, bid, out, err);
        if (r == -ENOENT)
                return na_error_set(err, ENOENT, NA_E_BACKUP_NOT_FOUND, "vps %s: no backup %s", id, bid);
        return r;
}

static int cmp_backup(const void *a, const void *b)
{
        const struct proto_vps_backup *x = a, *y = b;
        if (x->created_at_ms != y->created_at_ms)
                return x->created_at_ms < y->created_at_ms ? -1 : 1;
        return strcmp(x->backup_id, y->backup_id);
}

/* Every complete backup, oldest first (no domain needed: used by delete too). */
static int list_records(struct vm_conn *c, const char *id, struct proto_vps_backup **ret, size_t *ret_n,
                        struct na_error *err)
{
        *ret = NULL;
        *ret_n = 0;
        _cleanup_free_ char *dir = backup_dir(c, id);
        if (!dir)
                return na_error_sys(err, ENOMEM, "vps %s: backups", id);
        DIR *d = opendir(dir);
        if (!d) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "vps %s: open %s", id, dir);
        }
        size_t n = 0, cap = 0;
        struct proto_vps_backup *list = NULL;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len <= 5 || !streq(de->d_name + len - 5, ".json"))
                        continue;
                char bid[PROTO_VPS_OBJECT_ID_MAX + 1];
                if (len - 5 > PROTO_VPS_OBJECT_ID_MAX)
                        continue;
                memcpy(bid, de->d_name, len - 5);
                bid[len - 5] = '\0';
                if (!proto_vps_object_id_valid(bid))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        struct proto_vps_backup *nl = realloc(list, cap * sizeof(*list));
                        if (!nl) {
                                r = na_error_sys(err, ENOMEM, "vps %s: backups", id);
                                break;
                        }
                        list = nl;
                }
                int k = record_load(c, id, bid, &list[n], err);
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

/* Remove the *.partial leftovers of backups that were cut short. */
static void sweep_partials(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len > 8 && streq(de->d_name + len - 8, ".partial")) {
                        _cleanup_free_ char *p = na_strdupf("%s/%s", dir, de->d_name);
                        if (p)
                                unlink(p);
                }
        }
        closedir(d);
}

static int remove_backup(struct vm_conn *c, const char *id, const char *bid, struct na_error *err)
{
        _cleanup_free_ char *rec = backup_file(c, id, bid, ".json");
        _cleanup_free_ char *data = backup_file(c, id, bid, ".qcow2.zst");
        if (!rec || !data)
                return na_error_sys(err, ENOMEM, "vps %s: backup %s", id, bid);
        int r;
        /* The record first: from then on it is not listed, whatever happens to the data. */
        if ((r = na_unlink(rec, err)) < 0 || (r = na_fsync_parent(rec, err)) < 0 || (r = na_unlink(data, err)) < 0)
                return na_error_prefix(err, "vps %s: delete backup %s", id, bid);
        return 0;
}

static int retention(struct vm_conn *c, const char *id, const struct proto_vps_backup_limits *limits,
                     struct na_error *err)
{
        struct proto_vps_backup *list = NULL;
        size_t n = 0;
        int r = list_records(c, id, &list, &n, err);
        if (r < 0)
                return r;
        bool *gone = calloc(n + 1, sizeof(bool));
        if (!gone) {
                free(list);
                return na_error_sys(err, ENOMEM, "vps %s: retention", id);
        }
        proto_backup_retention(list, n, limits, (int64_t)na_now_real_ms(), gone);
        for (size_t i = 0; i < n && r == 0; i++)
                if (gone[i])
                        r = remove_backup(c, id, list[i].backup_id, err);
        free(gone);
        free(list);
        return r;
}

/* qemu-img convert -p's stdout: its percent goes to the meter (total 100). */
struct convert_progress {
        struct vm_qemu_progress q;
        struct na_progress_meter *meter;
};

static int convert_out(void *userdata, const char *data, size_t n)
{
        struct convert_progress *cp = userdata;
        int pct = vm_qemu_progress_feed(&cp->q, data, n);
        if (pct >= 0)
                na_progress_meter_set(cp->meter, (uint64_t)pct);
        return 0;
}

/* Copy a running real domain's disk through libvirt's backup job (push mode). */
static int export_live(struct vm_conn *c, const char *id, virDomainPtr dom, const char *target,
                       struct na_progress_meter *meter, struct na_error *err)
{
        const struct na_progress *progress = na_progress_meter_progress(meter);
        _cleanup_free_ char *t = vm_xml_escape(target);
        _cleanup_free_ char *xml =
                t ? na_strdupf("<domainbackup mode='push'><disks>"
                               "<disk name='vda' backup='yes' type='file'><target file='%s'/><driver type='qcow2'/></disk>"
                               "<disk name='sda' backup='no'/>"
                               "</disks></domainbackup>",
                               t)
                  : NULL;
        if (!xml)
                return na_error_sys(err, ENOMEM, "vps %s: backup", id);
        if (virDomainBackupBegin(dom, xml, NULL, 0) < 0)
                return vm_virt_error(err, id, "start the backup job");
        for (;;) {
                int type = 0, nparams = 0;
                virTypedParameterPtr params = NULL;
                if (virDomainGetJobStats(dom, &type, &params, &nparams, 0) < 0)
                        return vm_virt_error(err, id, "follow the backup job");
                unsigned long long done = 0, total = 0;
                virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_PROCESSED, &done);
                virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_TOTAL, &total);
                virTypedParamsFree(params, nparams);
                if (type == VIR_DOMAIN_JOB_NONE)
                        break;
                if (total > 0) {
                        NA_ANALYZER_FP("-Wanalyzer-null-dereference") /* meter is the caller's (on its stack), never NULL; the inline accessor's NULL check misleads GCC 12 */
                        meter->total = total; /* libvirt may learn it as the job goes */
                        NA_ANALYZER_FP_END
                        na_progress_meter_set(meter, done);
                }
                int r = na_progress_checkpoint(progress, err);
                if (r < 0) {
                        virDomainAbortJob(dom);
                        virResetLastError();
                        return r;
                }
                struct timespec ts = { 0, 250 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        int type = 0, nparams = 0;
        virTypedParameterPtr params = NULL;
        if (virDomainGetJobStats(dom, &type, &params, &nparams, VIR_DOMAIN_JOB_STATS_COMPLETED) < 0)
                return vm_virt_error(err, id, "read the backup job's outcome");
        const char *why = NULL;
        virTypedParamsGetString(params, nparams, VIR_DOMAIN_JOB_ERRMSG, &why);
        int r = 0;
        if (type != VIR_DOMAIN_JOB_COMPLETED) {
                r = na_error_set(err, EIO, NA_E_DRIVER, "vps %s: the backup job failed: %s", id,
                                 why ? why : "no reason given");
                na_error_detail(err, "reason", json_string(why ? why : "backup job failed"));
        }
        virTypedParamsFree(params, nparams);
        return r;
}

/* The record written at the head of a backup's archive (vm_archive_meta). */
static char *backup_meta(struct vm_conn *c, const char *id, struct na_error *err)
{
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        int r = vm_meta_load(c->meta_dir, id, &m, err);
        if (r < 0 && r != -ENOENT) {
                na_error_clear(err);
                m.generation = 0;
        }
        _cleanup_json_ json_t *doc =
                json_pack("{s:s, s:s, s:s, s:I, s:{s:s?, s:s?, s:s}, s:I}", "format", VM_BACKUP_FORMAT, "vpsId", id,
                          "hostname", m.hostname, "generation", (json_int_t)m.generation, "template", "id",
                          m.template_id, "imageSlug", m.image_slug, "os", proto_vps_os_names[m.os], "storageMB",
                          (json_int_t)m.plan.storage_mb);
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        if (!text)
                na_error_sys(err, ENOMEM, "vps %s: backup record", id);
        return text;
}

int vm_lv_backup_create(struct vm_conn *c, const char *id, const char *backup_id,
                        const struct proto_vps_backup_limits *limits, const struct na_progress *progress,
                        struct proto_vps_backup *ret, struct na_error *err)
{
        int r = check_backup_id(backup_id, err);
        if (r < 0)
                return r;
        _cleanup_virdom_ virDomainPtr dom = NULL;
        if ((r = vm_domain_get(c, id, &dom, err)) < 0)
                return r;
        if ((r = vm_refuse_installing(c, id, err)) < 0)
                return r;
        r = record_load(c, id, backup_id, ret, err);
        if (r == 0)
                return 0; /* made before: the same backup */
        if (r != -ENOENT)
                return r;

        _cleanup_free_ char *dir = backup_dir(c, id);
        _cleanup_free_ char *exported = backup_file(c, id, backup_id, ".export.partial");
        _cleanup_free_ char *packed = backup_file(c, id, backup_id, ".qcow2.zst.partial");
        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        _cleanup_free_ char *rec = backup_file(c, id, backup_id, ".json");
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        if (!dir || !exported || !packed || !data || !rec || !disk)
                return na_error_sys(err, ENOMEM, "vps %s: backup", id);
        if ((r = na_mkdir_p(dir, 0700, err)) < 0)
                return na_error_prefix(err, "vps %s: backup", id);
        sweep_partials(dir);

        struct na_progress_meter meter;
        na_progress_meter_init(&meter, progress, "exporting", "copying the disk", 0, 100);
        na_progress_meter_total(&meter, 0);
        bool active = false;
        if ((r = vm_domain_state(c, id, dom, NULL, &active, err)) < 0)
                return r;
        if (active && !c->is_test)
                r = export_live(c, id, dom, exported, &meter, err);
        else {
                /* -p: qemu-img prints its percent on stdout as it copies. */
                char *const argv[] = { c->qemu_img, (char *)"convert", (char *)"-p", (char *)"-O", (char *)"qcow2",
                                       disk, exported, NULL };
                struct convert_progress cp = { .q = VM_QEMU_PROGRESS_INIT, .meter = &meter };
                meter.total = 100;
                r = na_spawn_stream(argv, progress, convert_out, &cp, err);
                if (r < 0)
                        na_error_prefix(err, "vps %s: export the disk", id);
        }
        if (r < 0) {
                unlink(exported);
                return r;
        }

        na_progress_meter_init(&meter, progress, "compressing", "compressing with zstd", 0, 100);
        uint64_t size = 0;
        char sha[65];
        /* The server's record travels with its disk (a move to another node: vps.create
         * with restoreBackupId keeps its cloud-init instance, so its host keys stay). */
        _cleanup_free_ char *meta = backup_meta(c, id, err);
        if (!meta) {
                unlink(exported);
                return -ENOMEM;
        }
        r = vm_archive_compress(exported, packed, meta, &meter, sha, &size, err);
        unlink(exported);
        if (r < 0) {
                unlink(packed);
                return na_error_prefix(err, "vps %s: backup %s", id, backup_id);
        }
        if (rename(packed, data) < 0) {
                r = na_error_sys(err, errno, "vps %s: backup %s: rename", id, backup_id);
                unlink(packed);
                return r;
        }
        if ((r = record_write(c, id, backup_id, size, sha, ret, err)) < 0) {
                unlink(data);
                return r;
        }
        if (limits && (r = retention(c, id, limits, err)) < 0)
                return na_error_prefix(err, "vps %s: backup %s made; retention", id, backup_id);
        return 0;
}

int vm_lv_backup_list(struct vm_conn *c, const char *id, struct proto_vps_backup **ret, size_t *ret_n,
                      struct na_error *err)
{
        if (!vm_lv_exists(c, id))
                return na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: no such server on this node", id);
        return list_records(c, id, ret, ret_n, err);
}

int vm_lv_backup_delete(struct vm_conn *c, const char *id, const char *backup_id, struct na_error *err)
{
        int r = check_backup_id(backup_id, err);
        if (r < 0)
                return r;
        if (!vm_lv_exists(c, id))
                return na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: no such server on this node", id);
        _cleanup_free_ char *rec = backup_file(c, id, backup_id, ".json");
        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        if (!rec || !data)
                return na_error_sys(err, ENOMEM, "vps %s: backup", id);
        if (access(rec, F_OK) < 0 && access(data, F_OK) < 0)
                return 0; /* deleted before: converged */
        return remove_backup(c, id, backup_id, err);
}

int vm_lv_backup_restore(struct vm_conn *c, const char *id, const char *backup_id,
                         const struct na_progress *progress, struct na_error *err)
{
        int r = check_backup_id(backup_id, err);
        if (r < 0)
                return r;
        _cleanup_virdom_ virDomainPtr dom = NULL;
        if ((r = vm_domain_get(c, id, &dom, err)) < 0)
                return r;
        if ((r = vm_refuse_installing(c, id, err)) < 0)
                return r;
        struct proto_vps_backup b;
        if ((r = record_require(c, id, backup_id, &b, err)) < 0)
                return r;
        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        _cleanup_free_ char *fresh = na_strdupf("%s/%s.qcow2.restore", c->storage_dir, id);
        if (!data || !disk || !fresh)
                return na_error_sys(err, ENOMEM, "vps %s: restore", id);

        /* Unpack and verify first: the server keeps running until the copy is known good. */
        struct na_progress_meter meter;
        na_progress_meter_init(&meter, progress, NULL, "unpacking the backup", 0, 90);
        if ((r = vm_archive_decompress(data, fresh, b.sha256, &meter, err)) < 0) {
                unlink(fresh);
                return na_error_prefix(err, "vps %s: restore backup %s", id, backup_id);
        }
        if ((r = na_progress_checkpoint(progress, err)) < 0) {
                unlink(fresh);
                return r;
        }
        na_progress_stage(progress, NULL, 90, "replacing the disk");
        bool was_running = false;
        if ((r = vm_domain_state(c, id, dom, NULL, &was_running, err)) < 0 ||
            (r = vm_lv_force_off(c, id, dom, err)) < 0 || (r = vm_lv_snapshots_forget(c, id, dom, err)) < 0) {
                unlink(fresh);
                return r;
        }
        if (rename(fresh, disk) < 0) {
                r = na_error_sys(err, errno, "vps %s: put the restored disk in place", id);
                unlink(fresh);
                return r;
        }
        na_fsync_parent(disk, err);
        na_error_clear(err);
        vm_lv_pool_refresh(c);
        if (was_running) {
                na_progress_stage(progress, NULL, 95, "starting");
                if ((r = vm_lv_start(c, id, dom, err)) < 0)
                        return r;
        }
        return 0;
}

int vm_lv_backups_remove_all(struct vm_conn *c, const char *id, struct na_error *err)
{
        _cleanup_free_ char *dir = backup_dir(c, id);
        if (!dir)
                return na_error_sys(err, ENOMEM, "vps %s: backups", id);
        DIR *d = opendir(dir);
        if (!d) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "vps %s: open %s", id, dir);
        }
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d)) && r == 0) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *p = na_strdupf("%s/%s", dir, de->d_name);
                r = p ? na_unlink(p, err) : na_error_sys(err, ENOMEM, "vps %s: backups", id);
        }
        closedir(d);
        if (r < 0)
                return r;
        if (rmdir(dir) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "vps %s: remove %s", id, dir);
        return 0;
}

int vm_lv_backup_open(struct vm_conn *c, const char *id, const char *backup_id, int *ret_fd,
                      struct proto_vps_backup *ret, struct na_error *err)
{
        int r = check_backup_id(backup_id, err);
        if (r < 0)
                return r;
        if ((r = record_require(c, id, backup_id, ret, err)) < 0)
                return r;
        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        if (!data)
                return na_error_sys(err, ENOMEM, "vps %s: backup", id);
        int fd = open(data, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return na_error_sys(err, errno, "vps %s: open backup %s", id, backup_id);
        *ret_fd = fd;
        return 0;
}

int vm_lv_backup_tmpfile(struct vm_conn *c, const char *id, int *ret_fd, struct na_error *err)
{
        _cleanup_free_ char *dir = backup_dir(c, id);
        if (!dir)
                return na_error_sys(err, ENOMEM, "vps %s: backup", id);
        int r = na_mkdir_p(dir, 0700, err);
        if (r < 0)
                return na_error_prefix(err, "vps %s: backups", id);
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "vps %s: a file in %s", id, dir);
        *ret_fd = fd;
        return 0;
}

int vm_lv_backup_adopt(struct vm_conn *c, const char *id, const char *backup_id, int fd, const char *sha256,
                       const struct na_progress *progress, struct proto_vps_backup *ret, struct na_error *err)
{
        int r = check_backup_id(backup_id, err);
        if (r < 0)
                return r;
        struct proto_vps_backup old;
        if ((r = record_load(c, id, backup_id, &old, err)) == 0) {
                na_error_set(err, EEXIST, NA_E_INVALID_STATE, "vps %s: backup %s exists on this node", id, backup_id);
                na_error_detail(err, "state", json_string("exists"));
                return -EEXIST;
        }
        if (r != -ENOENT)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0 || lseek(fd, 0, SEEK_SET) < 0)
                return na_error_sys(err, errno, "vps %s: the imported backup", id);
        /* The whole stream decodes, its sha256 is the one given, a standalone qcow2 inside. */
        struct na_progress_meter meter;
        na_progress_meter_init(&meter, progress, NULL, "verifying the backup", 0, 100);
        unsigned char head[VM_QCOW2_HEAD];
        char sha[65];
        r = vm_archive_verify_fd(fd, "the imported backup", sha256, head, sizeof(head), sha, &meter, err);
        if (r == -EBADMSG) {
                bool sha_differs = strstr(err->message, "sha256") != NULL;
                _cleanup_free_ char *why = strdup(err->message);
                na_error_clear(err);
                if (sha_differs)
                        return na_error_field(err, "transfer.sha256", "differs from the object's (%s): nothing kept",
                                              why ? why : "");
                return na_error_field(err, "transfer", "is not a server backup (a zstd archive): %s; nothing kept",
                                      why ? why : "");
        }
        if (r < 0)
                return r;
        if ((r = vm_qcow2_check_standalone(head, sizeof(head), "transfer", err)) < 0)
                return r;

        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        if (!data)
                return na_error_sys(err, ENOMEM, "vps %s: backup", id);
        (void)unlink(data); /* a data file without its record is no backup */
        if (linkat(fd, "", AT_FDCWD, data, AT_EMPTY_PATH) < 0)
                return na_error_sys(err, errno, "vps %s: backup %s: link", id, backup_id);
        if ((r = record_write(c, id, backup_id, (uint64_t)st.st_size, sha, ret, err)) < 0) {
                unlink(data);
                return r;
        }
        return 0;
}

int vm_lv_backup_generation(struct vm_conn *c, const char *id, const char *backup_id, int64_t *ret,
                            struct na_error *err)
{
        struct proto_vps_backup b;
        int r = record_require(c, id, backup_id, &b, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        _cleanup_close_ int fd = data ? open(data, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
        if (fd < 0)
                return na_error_sys(err, data ? errno : ENOMEM, "vps %s: backup %s", id, backup_id);
        _cleanup_free_ char *text = NULL;
        if ((r = vm_archive_meta(fd, &text, err)) < 0)
                return na_error_prefix(err, "vps %s: backup %s", id, backup_id);
        _cleanup_json_ json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
        json_t *gen = doc ? json_object_get(doc, "generation") : NULL;
        *ret = json_is_integer(gen) && json_integer_value(gen) > 0 ? json_integer_value(gen) : 0;
        return 0;
}

int vm_lv_backup_unpack_disk(struct vm_conn *c, const char *id, const char *backup_id, int64_t storage_mb,
                             const struct na_progress *progress, struct na_error *err)
{
        struct proto_vps_backup b;
        int r = record_require(c, id, backup_id, &b, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *data = backup_file(c, id, backup_id, ".qcow2.zst");
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        _cleanup_free_ char *fresh = na_strdupf("%s/%s.qcow2.new", c->storage_dir, id);
        if (!data || !disk || !fresh)
                return na_error_sys(err, ENOMEM, "vps %s: disk", id);
        struct na_progress_meter meter;
        na_progress_meter_init(&meter, progress, "writing-image", "unpacking the backup", 0, 100);
        if ((r = vm_archive_decompress(data, fresh, b.sha256, &meter, err)) < 0) {
                unlink(fresh);
                return na_error_prefix(err, "vps %s: restore backup %s", id, backup_id);
        }
        /* Imported bytes: qemu must never follow a path named inside them. */
        unsigned char head[VM_QCOW2_HEAD] = { 0 };
        _cleanup_close_ int fd = open(fresh, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        uint64_t size = 0;
        if (fd < 0 || pread(fd, head, sizeof(head), 0) < 0)
                r = na_error_sys(err, errno, "vps %s: read the restored disk", id);
        else if ((r = vm_qcow2_check_standalone(head, sizeof(head), "restoreBackupId", err)) >= 0 &&
                 (r = vm_image_virtual_size(fresh, "qcow2", &size, err)) >= 0 && size > (uint64_t)storage_mb << 20)
                r = na_error_field(err, "plan.storageMB", "is smaller than the disk of backup %s (%llu MB)", backup_id,
                                   (unsigned long long)((size + (1 << 20) - 1) >> 20));
        if (r >= 0 && size < (uint64_t)storage_mb << 20) {
                char arg[32];
                snprintf(arg, sizeof(arg), "%lldM", (long long)storage_mb);
                char *const argv[] = { c->qemu_img, (char *)"resize", (char *)"-q", (char *)"-f", (char *)"qcow2",
                                       fresh, arg, NULL };
                if ((r = na_spawn(argv, NULL, NULL, 0, err)) < 0)
                        na_error_prefix(err, "vps %s: grow the restored disk to %lld MB", id, (long long)storage_mb);
        }
        if (r >= 0 && rename(fresh, disk) < 0)
                r = na_error_sys(err, errno, "vps %s: put disk %s in place", id, disk);
        if (r < 0)
                unlink(fresh);
        return r;
}
