/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Per-app subordinate id slots in <storage_dir>/app-ids.json, under an flock. */
#include "drivers/app/oci/app-ids.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/app/oci/app-names.h"

#define IDS_MAX_FILE (4u << 20)

static uint32_t max_slots(uint32_t base)
{
        /* The last id of the last range must stay below (uid_t)-1, which means "no id". */
        return (uint32_t)((UINT32_MAX - (uint64_t)base) / APP_IDS_RANGE);
}

static int lock_ids(const char *dir, int *ret_fd, struct na_error *err)
{
        _cleanup_free_ char *path = na_strdupf("%s/app-ids.lock", dir);
        if (!path)
                return na_error_sys(err, ENOMEM, "app ids: lock");
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "app ids: open %s", path);
        if (RETRY_EINTR(flock(fd, LOCK_EX)) < 0)
                return na_error_sys(err, errno, "app ids: lock %s", path);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The slots object of the file (a new empty one when the file is absent). */
static int load_slots(const char *dir, json_t **ret, struct na_error *err)
{
        _cleanup_free_ char *path = na_strdupf("%s/" APP_IDS_FILE, dir);
        if (!path)
                return na_error_sys(err, ENOMEM, "app ids: load");
        _cleanup_free_ char *text = NULL;
        struct na_error e = NA_ERROR_INIT;
        int r = na_read_file(path, IDS_MAX_FILE, &text, NULL, &e);
        if (r == -ENOENT) {
                na_error_clear(&e);
                *ret = json_object();
                return *ret ? 0 : na_error_sys(err, ENOMEM, "app ids: load");
        }
        if (r < 0) {
                na_error_move(err, &e);
                return na_error_prefix(err, "app ids");
        }
        json_error_t je;
        _cleanup_json_ json_t *doc = json_loads(text, 0, &je);
        json_t *slots = doc ? json_object_get(doc, "slots") : NULL;
        if (!json_is_object(slots))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "app ids: %s is damaged (%s)", path,
                                    doc ? "no slots object" : je.text);
        const char *k;
        json_t *v;
        json_object_foreach(slots, k, v) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
                        return na_error_set(err, EBADMSG, NA_E_INTERNAL, "app ids: %s: bad slot of %s", path, k);
        }
        *ret = json_incref(slots);
        return 0;
}

static int save_slots(const char *dir, json_t *slots, struct na_error *err)
{
        _cleanup_free_ char *path = na_strdupf("%s/" APP_IDS_FILE, dir);
        _cleanup_json_ json_t *doc = json_pack("{s:O}", "slots", slots);
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_SORT_KEYS | JSON_INDENT(1)) : NULL;
        if (!path || !text)
                return na_error_sys(err, ENOMEM, "app ids: save");
        int r = na_atomic_write(path, text, strlen(text), 0600, err);
        return r < 0 ? na_error_prefix(err, "app ids") : 0;
}

static void fill(uint32_t base, uint32_t slot, struct app_ids *ret)
{
        ret->slot = slot;
        ret->uid_base = base + slot * APP_IDS_RANGE;
        ret->count = APP_IDS_RANGE;
}

static int check_args(const char *dir, uint32_t base, const char *app_id, struct na_error *err)
{
        if (!dir || dir[0] != '/')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app ids: storage directory must be absolute");
        if (!app_name_valid(app_id))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app ids: bad app id");
        if (base == 0 || max_slots(base) == 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app ids: base %u leaves no range", base);
        return 0;
}

static int find(json_t *slots, uint32_t base, const char *app_id, struct app_ids *ret, struct na_error *err)
{
        json_t *v = json_object_get(slots, app_id);
        if (!v)
                return -ENOENT;
        json_int_t slot = json_integer_value(v);
        if (slot >= max_slots(base))
                return na_error_set(err, ERANGE, NA_E_INTERNAL, "app %s: id slot %lld is beyond base %u's range",
                                    app_id, (long long)slot, base);
        fill(base, (uint32_t)slot, ret);
        return 0;
}

int app_ids_lookup(const char *storage_dir, uint32_t base, const char *app_id, struct app_ids *ret,
                   struct na_error *err)
{
        int r = check_args(storage_dir, base, app_id, err);
        if (r < 0)
                return r;
        _cleanup_close_ int lock = -1;
        _cleanup_json_ json_t *slots = NULL;
        if ((r = lock_ids(storage_dir, &lock, err)) < 0 || (r = load_slots(storage_dir, &slots, err)) < 0)
                return r;
        return find(slots, base, app_id, ret, err);
}

int app_ids_allocate(const char *storage_dir, uint32_t base, const char *app_id, struct app_ids *ret,
                     struct na_error *err)
{
        int r = check_args(storage_dir, base, app_id, err);
        if (r < 0)
                return r;
        _cleanup_close_ int lock = -1;
        _cleanup_json_ json_t *slots = NULL;
        if ((r = lock_ids(storage_dir, &lock, err)) < 0 || (r = load_slots(storage_dir, &slots, err)) < 0)
                return r;
        r = find(slots, base, app_id, ret, err);
        if (r != -ENOENT)
                return r;

        /* Lowest free slot: mark the taken ones (at most one per app in the file). */
        uint32_t limit = max_slots(base);
        size_t n = json_object_size(slots);
        _cleanup_free_ unsigned char *taken = calloc(n + 1, 1);
        if (!taken)
                return na_error_sys(err, ENOMEM, "app ids: allocate");
        const char *k;
        json_t *v;
        json_object_foreach(slots, k, v) {
                json_int_t s = json_integer_value(v);
                if ((size_t)s <= n)
                        taken[s] = 1;
        }
        uint32_t slot = 0;
        while (slot <= n && taken[slot])
                slot++;
        if (slot >= limit)
                return na_error_set(err, ENOSPC, NA_E_INTERNAL, "app %s: all %u id ranges above %u are taken",
                                    app_id, limit, base);
        if (json_object_set_new(slots, app_id, json_integer(slot)) < 0)
                return na_error_sys(err, ENOMEM, "app ids: allocate");
        if ((r = save_slots(storage_dir, slots, err)) < 0)
                return r;
        fill(base, slot, ret);
        return 0;
}

int app_ids_free(const char *storage_dir, const char *app_id, struct na_error *err)
{
        int r = check_args(storage_dir, APP_IDS_DEFAULT_BASE, app_id, err);
        if (r < 0)
                return r;
        _cleanup_close_ int lock = -1;
        _cleanup_json_ json_t *slots = NULL;
        if ((r = lock_ids(storage_dir, &lock, err)) < 0 || (r = load_slots(storage_dir, &slots, err)) < 0)
                return r;
        if (json_object_del(slots, app_id) < 0)
                return 0;
        return save_slots(storage_dir, slots, err);
}
