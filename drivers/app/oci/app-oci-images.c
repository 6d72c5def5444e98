/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Images of apps on the node (AGENT-API 4.2, target node): image.pull, image.list,
 * image.delete, and the deploy's way to an unpacked root. The store is
 * app-image.h's; pulls are app-registry.h's when [apps] registry is set.
 */
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "drivers/app/image/app-image.h"
#include "drivers/app/oci/app-oci-internal.h"

int app_oci_image_ready(struct app_conn *c, const struct proto_image_ref *ref, const struct na_progress *progress,
                        struct app_image *ret_img, char **ret_rootfs, struct na_error *err)
{
        struct app_image probe = { 0 };
        int r = app_image_resolve(c->images_dir, ref, false, &probe, err);
        app_image_clear(&probe);
        if (r < 0 && err->code && streq(err->code, NA_E_IMAGE_NOT_FOUND) && c->registry[0]) {
                na_error_clear(err);
                char digest[72];
                uint64_t bytes = 0;
                na_progress_stage(progress, "pulling-image", 0, "from the registry");
                r = app_registry_pull(&c->reg, ref, c->images_dir, progress, digest, &bytes, err);
        }
        if (r < 0)
                return r;
        na_progress_stage(progress, "unpacking", 0, NULL);
        struct app_unpack_limits limits = {
                .max_bytes = c->o.image_unpack_max_bytes,
                .max_files = c->o.image_unpack_max_files,
                .reserve_percent = c->o.image_unpack_reserve_percent ? c->o.image_unpack_reserve_percent
                                                                     : APP_UNPACK_RESERVE_PERCENT_DEFAULT,
        };
        return app_image_unpack_bounded(c->images_dir, ref, c->cache_dir, &limits, progress, ret_img, ret_rootfs,
                                        err);
}

int app_oci_image_pull(struct app_conn *c, const struct proto_image_ref *ref, const struct na_progress *progress,
                       json_t **ret, struct na_error *err)
{
        struct app_image img = { 0 };
        _cleanup_free_ char *rootfs = NULL;
        int r = app_oci_image_ready(c, ref, progress, &img, &rootfs, err);
        if (r < 0)
                return r;
        char name[PROTO_APP_IMAGE_REF_MAX];
        struct proto_app_image_info info = {
                .image = proto_image_ref_format(ref, name, sizeof(name)),
                .digest = img.manifest_digest,
                .size_bytes = (int64_t)img.size_bytes,
        };
        *ret = proto_app_image_encode(&info);
        app_image_clear(&img);
        return *ret ? 0 : na_error_sys(err, ENOMEM, "image.pull");
}

/* The ids of the apps whose image has this manifest digest (a new array). */
static json_t *used_by(struct app_conn *c, const char *digest)
{
        json_t *a = json_array();
        pthread_mutex_lock(&c->lock);
        for (struct app *p = c->apps; a && p; p = p->next)
                if (!p->removed && streq(p->image_digest, digest))
                        json_array_append_new(a, json_string(p->id));
        pthread_mutex_unlock(&c->lock);
        return a;
}

int app_oci_image_list(struct app_conn *c, json_t **ret, struct na_error *err)
{
        json_t *list = NULL;
        int r = app_image_list(c->images_dir, &list, err);
        if (r < 0)
                return r;
        size_t i;
        json_t *item;
        json_array_foreach(list, i, item) {
                const char *digest = json_string_value(json_object_get(item, "digest"));
                json_object_set_new(item, "usedBy", used_by(c, digest ? digest : ""));
        }
        *ret = list;
        return 0;
}

int app_oci_image_delete(struct app_conn *c, const struct proto_image_ref *ref, struct na_error *err)
{
        struct app_image img = { 0 };
        int r = app_image_resolve(c->images_dir, ref, false, &img, err);
        if (r < 0)
                return r;
        json_t *users = used_by(c, img.manifest_digest);
        app_image_clear(&img);
        if (json_array_size(users)) {
                char name[PROTO_APP_IMAGE_REF_MAX];
                na_error_set(err, EBUSY, NA_E_INVALID_STATE, "image %s: used by %zu app(s); delete them first",
                             proto_image_ref_format(ref, name, sizeof(name)), json_array_size(users));
                na_error_detail(err, "state", json_string("in use"));
                na_error_detail(err, "usedBy", users);
                return -EBUSY;
        }
        json_decref(users);
        return app_image_delete(c->images_dir, c->cache_dir, ref, err);
}
