/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The stored configurations: <state_dir>/firewall/<vps_id>.json (lower-case id),
 * the configuration as the agent API encodes it plus "nextRuleId" (the ids'
 * high-water mark) and "vpsId", replaced atomically (na_atomic_write: fsync of the
 * file and of the directory) after the kernel took the batch.
 *
 * Beside it, <vps_id>.nl keeps the server's operations as they were sent (encoded
 * nfnetlink messages) so that the start sends them again without decoding the JSON
 * and building the batch anew:
 *
 *   "NAFWNL01" | u32 json length | u32 crc32c(json) | u32 messages | u32 length |
 *   u32 crc32c(messages) | char table[40] | messages
 *
 * It is only a cache of the .json: written after it (renamed into place, no fsync),
 * used only when the .json is byte for byte the one it was made with (length and
 * crc32c), for the same table, and whole (its own crc32c); else the start decodes
 * the .json as before.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>

#include "common/crc32c.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/uuid.h"
#include "firewall/fw-handle.h"

#define STATE_MAX (4u << 20)

#define WIRE_MAX (16u << 20)
#define WIRE_MAGIC "NAFWNL01"

struct wire_head {
        char magic[8];
        uint32_t json_len, json_crc, n, len, crc;
        char table[FW_TABLE_NAME_MAX];
};

static int state_path_ext(const struct fw *fw, const char *vps_id, const char *ext, char *buf, size_t len)
{
        int n = snprintf(buf, len, "%s/%s%s", fw->dir, vps_id, ext);
        for (char *p = buf + strlen(fw->dir) + 1; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static int state_path(const struct fw *fw, const char *vps_id, char *buf, size_t len)
{
        return state_path_ext(fw, vps_id, ".json", buf, len);
}

int fw_state_load(const struct fw *fw, const char *vps_id, struct fw_config *cfg, uint32_t *next_id,
                  struct na_error *err)
{
        proto_fw_init(cfg);
        *next_id = 1;
        if (!fw->dir)
                return 0;
        char path[4096];
        _cleanup_free_ char *text = NULL;
        if (state_path(fw, vps_id, path, sizeof(path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "firewall: state path too long");
        struct na_error rerr = NA_ERROR_INIT;
        if (na_read_file(path, STATE_MAX, &text, NULL, &rerr) < 0) {
                int e = rerr.errnum;
                if (e == ENOENT) {
                        na_error_clear(&rerr);
                        return 0;
                }
                na_error_move(err, &rerr);
                return -e;
        }
        json_error_t jerr;
        _cleanup_json_ json_t *root = json_loads(text, 0, &jerr);
        struct na_error derr = NA_ERROR_INIT;
        if (!root || proto_fw_decode(root, cfg, &derr) < 0) {
                na_error_clear(&derr);
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "firewall: %s: not a valid stored configuration", path);
        }
        json_int_t next = json_integer_value(json_object_get(root, "nextRuleId"));
        *next_id = next > 0 && next <= (json_int_t)FW_RULE_ID_MAX + 1 ? (uint32_t)next : 1;
        for (size_t i = 0; i < cfg->n_rules; i++)
                if (cfg->rules[i].id >= *next_id)
                        *next_id = cfg->rules[i].id + 1;
        return 1;
}

int fw_state_load_or_none(const struct fw *fw, const char *vps_id, struct fw_config *cfg, uint32_t *next_id,
                          char *problem, size_t len)
{
        struct na_error e = NA_ERROR_INIT;
        int r = fw_state_load(fw, vps_id, cfg, next_id, &e);
        if (problem)
                snprintf(problem, len, "%s", r < 0 ? e.message : "");
        na_error_clear(&e);
        if (r >= 0)
                return r;
        proto_fw_init(cfg);
        *next_id = 1;
        return 0;
}

/* The cache beside the .json (see the top): best effort, a failure only costs the start some time. */
static void wire_save(const struct fw *fw, const char *vps_id, const char *json, const char *table,
                      const struct nft_raw *raw)
{
        char path[4096], tmp[4100];
        if (state_path_ext(fw, vps_id, ".nl", path, sizeof(path)) < 0)
                return;
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        struct wire_head h = { .magic = WIRE_MAGIC };
        h.json_len = (uint32_t)strlen(json);
        h.json_crc = na_crc32c(0, json, h.json_len);
        h.n = raw->n;
        h.len = (uint32_t)raw->len;
        h.crc = na_crc32c(0, raw->data, raw->len);
        snprintf(h.table, sizeof(h.table), "%s", table);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        struct na_error e = NA_ERROR_INIT;
        if (fd < 0 || na_write_all(fd, &h, sizeof(h), tmp, &e) < 0 || na_write_all(fd, raw->data, raw->len, tmp, &e) < 0 ||
            rename(tmp, path) < 0)
                unlink(tmp);
        na_error_clear(&e);
}

int fw_state_save(const struct fw *fw, const char *vps_id, const struct fw_config *cfg, uint32_t next_id,
                  const char *table, const struct nft_raw *raw, struct na_error *err)
{
        if (!fw->dir)
                return 0;
        char path[4096];
        if (state_path(fw, vps_id, path, sizeof(path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "firewall: state path too long");
        _cleanup_json_ json_t *root = proto_fw_encode(cfg);
        if (!root || json_object_set_new(root, "nextRuleId", json_integer(next_id)) < 0 ||
            json_object_set_new(root, "vpsId", json_string(vps_id)) < 0)
                return na_error_sys(err, ENOMEM, "firewall: encode configuration");
        _cleanup_free_ char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text)
                return na_error_sys(err, ENOMEM, "firewall: encode configuration");
        int r = na_atomic_write(path, text, strlen(text), 0600, err);
        if (r >= 0 && raw)
                wire_save(fw, vps_id, text, table, raw);
        return r;
}

int fw_state_load_raw(const struct fw *fw, const char *vps_id, const char *table, struct nft_raw **ret)
{
        char path[4096];
        _cleanup_free_ char *json = NULL, *wire = NULL;
        size_t json_len = 0, wire_len = 0;
        struct na_error e = NA_ERROR_INIT;
        if (!fw->dir || state_path(fw, vps_id, path, sizeof(path)) < 0 ||
            na_read_file(path, STATE_MAX, &json, &json_len, &e) < 0 ||
            state_path_ext(fw, vps_id, ".nl", path, sizeof(path)) < 0 ||
            na_read_file(path, WIRE_MAX, &wire, &wire_len, &e) < 0) {
                na_error_clear(&e);
                return -ENOENT;
        }
        struct wire_head h;
        if (wire_len < sizeof(h))
                return -ESTALE;
        memcpy(&h, wire, sizeof(h));
        h.table[sizeof(h.table) - 1] = '\0';
        if (memcmp(h.magic, WIRE_MAGIC, sizeof(h.magic)) != 0 || !streq(h.table, table) || h.json_len != json_len ||
            h.json_crc != na_crc32c(0, json, json_len) || h.len != wire_len - sizeof(h) ||
            h.crc != na_crc32c(0, wire + sizeof(h), h.len))
                return -ESTALE;
        struct nft_raw *raw = malloc(sizeof(*raw) + h.len);
        if (!raw)
                return -ENOMEM;
        raw->len = h.len;
        raw->n = h.n;
        memcpy(raw->data, wire + sizeof(h), h.len);
        *ret = raw;
        return 0;
}

int fw_state_delete(const struct fw *fw, const char *vps_id, struct na_error *err)
{
        if (!fw->dir)
                return 0;
        char path[4096];
        if (state_path_ext(fw, vps_id, ".nl", path, sizeof(path)) == 0)
                (void)unlink(path); /* the cache first: it is never used without its .json */
        if (state_path(fw, vps_id, path, sizeof(path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "firewall: state path too long");
        if (unlink(path) < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "firewall: remove %s", path);
        }
        return na_fsync_parent(path, err);
}

int fw_state_list(const struct fw *fw, char ***ret, size_t *ret_n, struct na_error *err)
{
        *ret = NULL;
        *ret_n = 0;
        if (!fw->dir)
                return 0;
        DIR *d = opendir(fw->dir);
        if (!d)
                return na_error_sys(err, errno, "firewall: open %s", fw->dir);
        char **ids = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        for (struct dirent *de = readdir(d); de; de = readdir(d)) {
                size_t len = strlen(de->d_name);
                if (len != NA_UUID_STRLEN + 5 || !streq(de->d_name + NA_UUID_STRLEN, ".json"))
                        continue;
                char id[NA_UUID_STRLEN + 1];
                memcpy(id, de->d_name, NA_UUID_STRLEN);
                id[NA_UUID_STRLEN] = '\0';
                if (!na_uuid_valid(id))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        char **v = realloc(ids, cap * sizeof(*v));
                        if (!v) {
                                r = na_error_sys(err, ENOMEM, "firewall: list %s", fw->dir);
                                break;
                        }
                        ids = v;
                }
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                if (!(ids[n] = strdup(id))) {
                        r = na_error_sys(err, ENOMEM, "firewall: list %s", fw->dir);
                        break;
                }
                NA_ANALYZER_FP_END
                n++;
        }
        closedir(d);
        if (r < 0) {
                nft_strv_free(ids, n);
                return r;
        }
        *ret = ids;
        *ret_n = n;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it (ids goes to *ret) */
        return 0;
        NA_ANALYZER_FP_END
}
