/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * registry-pull: app_registry_pull from the command line, for test_registry.py.
 *
 *   registry-pull --url URL [--ca FILE] [--user U --password P] [--insecure]
 *                 [--stop-at PERCENT] [--resolve] IMAGES_DIR IMAGE
 *
 * Prints {"digest", "bytes"} on success (exit 0) or the agent API's failure object
 * (exit 1) on stdout; every progress report goes to stderr as "stage percent message".
 * --stop-at makes the checkpoint stop the pull (JOB_CANCELLED) once percent reaches it.
 * --resolve then reads the image back with the store's reader (app_image_resolve,
 * every layer hashed) and adds {"resolved": manifest digest, "resolvedBytes"}.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <inttypes.h>

#include "common/json-cleanup.h"
#include "drivers/app/image/app-image.h"
#include "drivers/app/image/app-registry.h"

struct prog {
        int stop_at;
        int last;
};

static void on_stage(void *userdata, const char *stage, int percent, const char *message)
{
        struct prog *p = userdata;
        p->last = percent;
        fprintf(stderr, "%s %d %s\n", stage, percent, message);
}

static int on_checkpoint(void *userdata, struct na_error *err)
{
        struct prog *p = userdata;
        if (p->stop_at >= 0 && p->last >= p->stop_at)
                return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "stopped at %d%%", p->last);
        return 0;
}

int main(int argc, char **argv)
{
        struct app_registry_options o = {0};
        struct prog pr = {.stop_at = -1, .last = 0};
        bool resolve = false;
        static const struct option opts[] = {
                {"url", required_argument, NULL, 'u'},      {"ca", required_argument, NULL, 'c'},
                {"user", required_argument, NULL, 'U'},     {"password", required_argument, NULL, 'P'},
                {"insecure", no_argument, NULL, 'i'},       {"stop-at", required_argument, NULL, 's'},
                {"resolve", no_argument, NULL, 'r'},
                {NULL, 0, NULL, 0},
        };
        int ch;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'u': o.url = optarg; break;
                case 'c': o.ca_file = optarg; break;
                case 'U': o.username = optarg; break;
                case 'P': o.password = optarg; break;
                case 'i': o.allow_insecure_http = true; break;
                case 's': pr.stop_at = atoi(optarg); break;
                case 'r': resolve = true; break;
                default: return 2;
                }
        }
        if (argc - optind != 2) {
                fprintf(stderr, "usage: registry-pull --url URL [--ca FILE] [--user U --password P] [--insecure] "
                                "[--stop-at PERCENT] [--resolve] IMAGES_DIR IMAGE\n");
                return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref;
        char digest[72] = "";
        uint64_t bytes = 0;
        struct na_progress progress = {.stage = on_stage, .checkpoint = on_checkpoint, .userdata = &pr};
        int r = proto_image_ref_parse(argv[optind + 1], "image", &ref, &err);
        if (r >= 0)
                r = app_registry_pull(&o, &ref, argv[optind], &progress, digest, &bytes, &err);
        struct app_image img = {0};
        if (r >= 0 && resolve)
                r = app_image_resolve(argv[optind], &ref, true, &img, &err);
        _cleanup_json_ json_t *out = r < 0 ? na_error_to_json(&err)
                                           : json_pack("{s:s, s:I}", "digest", digest, "bytes", (json_int_t)bytes);
        if (r >= 0 && resolve) {
                json_object_set_new(out, "resolved", json_string(img.manifest_digest));
                json_object_set_new(out, "resolvedBytes", json_integer((json_int_t)img.size_bytes));
        }
        app_image_clear(&img);
        char *text = json_dumps(out, JSON_COMPACT);
        printf("%s\n", text ? text : "null");
        free(text);
        curl_global_cleanup();
        return r < 0 ? 1 : 0;
}
