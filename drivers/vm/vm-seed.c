/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cloud-init NoCloud seed: an ISO 9660 volume labelled "cidata" holding
 * meta-data, user-data and network-config (Rock Ridge and Joliet names), written
 * in-process by vm-seed-iso.c. The documents are JSON, which YAML reads as it is.
 * The password goes in as a SHA-512 crypt hash only.
 */
#include "common/fileio.h"
#include "drivers/vm/vm-util.h"
#include "drivers/vm/vm-seed-iso.h"

#include <crypt.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/json-cleanup.h"

int vm_password_hash(const char *password, char **ret, struct na_error *err)
{
        char salt[CRYPT_GENSALT_OUTPUT_SIZE];
        if (!crypt_gensalt_rn("$6$", 0, NULL, 0, salt, sizeof(salt)))
                return na_error_sys(err, errno ? errno : EINVAL, "password: make a salt");
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (!cd)
                return na_error_sys(err, ENOMEM, "password: hash");
        const char *h = crypt_rn(password, salt, cd, sizeof(*cd));
        int r = 0;
        if (!h || h[0] == '*')
                r = na_error_sys(err, errno ? errno : EINVAL, "password: hash");
        else if (!(*ret = strdup(h)))
                r = na_error_sys(err, ENOMEM, "password: hash");
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
        return r;
}

static char *dump(json_t *doc, const char *head)
{
        _cleanup_free_ char *body = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!body)
                return NULL;
        return na_strdupf("%s%s\n", head, body);
}

int vm_seed_documents(const struct vm_meta *m, const char *mac, char **ret_meta_data, char **ret_user_data,
                      char **ret_network_config, struct na_error *err)
{
        char instance[80];
        snprintf(instance, sizeof(instance), "%s-%lld", m->id, (long long)m->generation);
        _cleanup_json_ json_t *meta = json_pack("{s:s, s:s}", "instance-id", instance, "local-hostname", m->hostname);

        json_t *root = json_pack("{s:s, s:b}", "name", "root", "lock_passwd", m->password_hash == NULL);
        if (root && m->ssh_keys && m->ssh_keys[0]) {
                /* Only when there is a key: cloud-init's schema refuses an empty list. */
                json_t *keys = json_array();
                for (char **k = m->ssh_keys; *k; k++)
                        json_array_append_new(keys, json_string(*k));
                json_object_set_new(root, "ssh_authorized_keys", keys);
        }
        if (root && m->password_hash)
                json_object_set_new(root, "hashed_passwd", json_string(m->password_hash));
        _cleanup_json_ json_t *user = json_pack("{s:s, s:b, s:b, s:b, s:b, s:[o]}", "hostname", m->hostname,
                                                "preserve_hostname", 0, "manage_etc_hosts", 1, "disable_root", 0,
                                                "ssh_pwauth", m->password_hash != NULL, "users", root);
        if (user && m->inputs && json_object_size(m->inputs) > 0) {
                _cleanup_free_ char *inputs = json_dumps(m->inputs, JSON_COMPACT | JSON_SORT_KEYS);
                json_object_set_new(user, "write_files",
                                    json_pack("[{s:s, s:s, s:s}]", "path", "/etc/nodeagent/inputs.json", "permissions",
                                              "0600", "content", inputs ? inputs : "{}"));
        }
        _cleanup_json_ json_t *net = json_pack("{s:i, s:{s:{s:{s:s}, s:s, s:b}}}", "version", 2, "ethernets", "primary",
                                               "match", "macaddress", mac, "set-name", "eth0", "dhcp4", 1);
        if (!meta || !user || !net)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "vps %s: seed documents", m->id);
        _cleanup_free_ char *md = dump(meta, "");
        _cleanup_free_ char *ud = dump(user, "#cloud-config\n");
        _cleanup_free_ char *nc = dump(net, "");
        if (!md || !ud || !nc)
                return na_error_sys(err, ENOMEM, "vps %s: seed documents", m->id);
        *ret_meta_data = TAKE_PTR(md);
        *ret_user_data = TAKE_PTR(ud);
        *ret_network_config = TAKE_PTR(nc);
        return 0;
}

int vm_seed_write(const struct vm_meta *m, const char *mac, const char *path, struct na_error *err)
{
        _cleanup_free_ char *md = NULL, *ud = NULL, *nc = NULL;
        int r = vm_seed_documents(m, mac, &md, &ud, &nc, err);
        if (r < 0)
                return r;
        NA_ANALYZER_FP("-Wanalyzer-null-argument") /* GCC 12 does not see that the callee sets its out-parameter whenever it returns 0 (vm_seed_documents sets md, ud and nc) */
        const struct vm_iso_file files[] = {
                { "meta-data", md, strlen(md) },
                { "user-data", ud, strlen(ud) },
                { "network-config", nc, strlen(nc) },
        };
        NA_ANALYZER_FP_END
        _cleanup_free_ char *partial = na_strdupf("%s.partial", path);
        if (!partial)
                return na_error_sys(err, ENOMEM, "vps %s: seed", m->id);
        unlink(partial); /* a leftover of an interrupted write, whatever it is */
        _cleanup_close_ int fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "vps %s: seed: create %s", m->id, partial);
        r = vm_iso_write(fd, "cidata", files, ARRAY_SIZE(files), time(NULL), err);
        if (r == 0 && fsync(fd) < 0)
                r = na_error_sys(err, errno, "fsync");
        if (r == 0 && close(TAKE_FD(fd)) < 0)
                r = na_error_sys(err, errno, "close");
        if (r == 0 && rename(partial, path) < 0)
                r = na_error_sys(err, errno, "rename to %s", path);
        /* The directory too: this also makes a disk renamed into it just before durable. */
        if (r == 0 && (r = na_fsync_parent(path, err)) < 0) {
                na_error_prefix(err, "vps %s: seed %s", m->id, path);
                return r;
        }
        if (r < 0) {
                unlink(partial);
                return na_error_prefix(err, "vps %s: make the cloud-init seed %s", m->id, partial);
        }
        return 0;
}
