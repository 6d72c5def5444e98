/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-sftpd's pure logic: the failed-login limiter (window, block, expiry, a
 * full table), the credentials file (parse, store and load back, remove by app),
 * hash and key line checks (libxcrypt and libssh for real), app.sftp.set's decoder,
 * the SFTP path text and the symbolic link rule of the safe path layer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "volume/volume.h"
#include "keys.h"
#include "proto/app-sftp.h"
#include "sftp/sftp-auth.h"
#include "sftp/sftp-creds.h"
#include "sftp/sftp-path.h"
#include "sftp/sftp-ratelimit.h"

static void limiter(void **state)
{
        (void)state;
        static struct sftp_ratelimit rl;
        sftp_ratelimit_init(&rl, 3, 300, 600, 0);
        time_t t = 1000;
        assert_false(sftp_ratelimit_fail(&rl, "addr:1.2.3.4", t));
        assert_false(sftp_ratelimit_fail(&rl, "addr:1.2.3.4", t + 10));
        assert_false(sftp_ratelimit_blocked(&rl, "addr:1.2.3.4", t + 10));
        assert_true(sftp_ratelimit_fail(&rl, "addr:1.2.3.4", t + 20));
        assert_true(sftp_ratelimit_blocked(&rl, "addr:1.2.3.4", t + 21));
        assert_false(sftp_ratelimit_blocked(&rl, "addr:5.6.7.8", t + 21));
        assert_true(sftp_ratelimit_blocked(&rl, "addr:1.2.3.4", t + 20 + 599));
        assert_false(sftp_ratelimit_blocked(&rl, "addr:1.2.3.4", t + 20 + 600));
        /* Failures spread wider than the window never block. */
        for (int i = 0; i < 10; i++)
                assert_false(sftp_ratelimit_fail(&rl, "user:slow", t + i * 200));
        /* A full table reuses the entry seen longest ago; memory stays bounded. */
        char key[64];
        for (int i = 0; i < SFTP_RATELIMIT_SLOTS + 10; i++) {
                snprintf(key, sizeof(key), "addr:10.0.%d.%d", i / 256, i % 256);
                sftp_ratelimit_fail(&rl, key, t + 5000 + i);
        }
        assert_false(sftp_ratelimit_blocked(&rl, "addr:1.2.3.4", t + 5000));
}

static void hashes(void **state)
{
        (void)state;
        assert_null(sftp_hash_problem(SHA512_PW1));
        assert_true(sftp_password_matches("pw1", SHA512_PW1));
        assert_false(sftp_password_matches("pw2", SHA512_PW1));
        assert_false(sftp_password_matches("", SHA512_PW1));
        char setting[CRYPT_GENSALT_OUTPUT_SIZE];
        assert_non_null(crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof(setting)));
        struct crypt_data cd = { 0 };
        const char *y = crypt_rn("pw1", setting, &cd, sizeof(cd));
        assert_non_null(y);
        char yes[CRYPT_OUTPUT_SIZE];
        snprintf(yes, sizeof(yes), "%s", y);
        assert_null(sftp_hash_problem(yes));
        assert_true(sftp_password_matches("pw1", yes));
        assert_false(sftp_password_matches("pw1x", yes));
        const char *bad[] = { "", "secret", "$1$abc$def", "$2b$10$abcdefghijklmnopqrstuv", "$6$salt$short",
                              "$6$salt$" "xxxx xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                              "$y$j9T$salt", "*", "!" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_non_null(sftp_hash_problem(bad[i]));
                assert_false(sftp_password_matches("pw1", bad[i]));
        }
}

static void key_lines(void **state)
{
        (void)state;
        ssh_key k = NULL;
        assert_null(sftp_key_line_parse(ED25519_LINE, &k));
        assert_non_null(k);
        char *lines[] = { (char *)ECDSA_LINE, (char *)"garbage", (char *)ED25519_LINE };
        assert_true(sftp_key_listed(k, lines, 3));
        assert_false(sftp_key_listed(k, lines, 2));
        ssh_key_free(k);
        assert_null(sftp_key_line_parse(ECDSA_LINE, NULL));
        assert_null(sftp_key_line_parse(RSA2048_LINE, NULL));
        assert_non_null(strstr(sftp_key_line_parse(RSA1024_LINE, NULL), "2048"));
        const char *bad[] = { "", "ssh-ed25519", "ssh-ed25519 AAAA", "ssh-dss AAAAB3NzaC1kc3MAAACBAP", "ssh-ed25519 !!!!",
                              "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== x\nssh-ed25519 AAAA" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_non_null(sftp_key_line_parse(bad[i], NULL));
        /* An ed25519 blob labelled as ecdsa. */
        char mixed[512];
        snprintf(mixed, sizeof(mixed), "ecdsa-sha2-nistp256 %s", strchr(ED25519_LINE, ' ') + 1);
        assert_non_null(sftp_key_line_parse(mixed, NULL));
}

static void creds(void **state)
{
        (void)state;
        char dir[] = "/tmp/test-sftp-creds-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char users[256];
        snprintf(users, sizeof(users), "%s/sftp/users", dir);
        char *keys[] = { (char *)ED25519_LINE };
        struct sftp_user u = { .app_id = (char *)"app-1", .volume_dir = (char *)"/v/disk/volume", .uid = 1000065536,
                               .gid = 1000065536, .enabled = true, .read_only = true, .file_access = true,
                               .password_hash = (char *)SHA512_PW1, .public_keys = keys, .n_keys = 1 };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(sftp_user_store(users, "mc-1", &u, &err), 0);
        assert_int_equal(sftp_user_store(users, "Bad/../x", &u, &err), -EINVAL);
        na_error_clear(&err);
        char path[512];
        snprintf(path, sizeof(path), "%s/mc-1.json", users);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        struct sftp_user back = { 0 };
        assert_int_equal(sftp_user_load(users, "mc-1", &back, &err), 0);
        assert_string_equal(back.app_id, "app-1");
        assert_string_equal(back.volume_dir, "/v/disk/volume");
        assert_int_equal(back.uid, 1000065536);
        assert_true(back.enabled && back.read_only && back.file_access);
        assert_string_equal(back.password_hash, SHA512_PW1);
        assert_int_equal(back.n_keys, 1);
        assert_string_equal(back.public_keys[0], ED25519_LINE);
        sftp_user_clear(&back);
        assert_int_equal(sftp_user_load(users, "nobody", &back, &err), -ENOENT);
        na_error_clear(&err);
        assert_true(sftp_user_load(users, "../etc/passwd", &back, &err) < 0);
        na_error_clear(&err);
        const char *bad[] = { "{}", "[]", "not json",
                              "{\"appId\":\"a\",\"volumeDir\":\"rel\",\"uid\":1,\"gid\":1,\"enabled\":true,"
                              "\"readOnly\":false,\"fileAccess\":true}",
                              "{\"appId\":\"a\",\"volumeDir\":\"/v\",\"uid\":-1,\"gid\":1,\"enabled\":true,"
                              "\"readOnly\":false,\"fileAccess\":true}",
                              "{\"appId\":\"a\",\"volumeDir\":\"/v\",\"uid\":1,\"gid\":1,\"enabled\":\"yes\","
                              "\"readOnly\":false,\"fileAccess\":true}",
                              "{\"appId\":\"a\",\"volumeDir\":\"/v\",\"uid\":1,\"gid\":1,\"enabled\":true,"
                              "\"readOnly\":false,\"fileAccess\":true,\"publicKeys\":[1]}" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_true(sftp_user_parse(bad[i], strlen(bad[i]), &back, &err) < 0);
                na_error_clear(&err);
        }
        assert_true(sftp_username_valid("mc-server.1_a"));
        assert_false(sftp_username_valid("-x"));
        assert_false(sftp_username_valid("A"));
        assert_false(sftp_username_valid(""));
        assert_false(sftp_username_valid("a/b"));
        assert_int_equal(sftp_user_remove_app(users, "other", &err), 0);
        assert_int_equal(access(path, F_OK), 0);
        assert_int_equal(sftp_user_remove_app(users, "app-1", &err), 0);
        assert_int_equal(access(path, F_OK), -1);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "/bin/rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
}

static struct proto_app_sftp_set *decode_ok(const char *text)
{
        json_error_t je;
        _cleanup_json_ json_t *j = json_loads(text, 0, &je);
        assert_non_null(j);
        struct proto_app_sftp_set *p = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_app_sftp_set_decode(j, &p, &err), 0);
        return p;
}

static void decode_fails(const char *text, const char *field)
{
        json_error_t je;
        _cleanup_json_ json_t *j = json_loads(text, 0, &je);
        assert_non_null(j);
        struct proto_app_sftp_set *p = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_app_sftp_set_decode(j, &p, &err), -EINVAL);
        assert_string_equal(err.code, NA_E_VALIDATION);
        _cleanup_free_ char *d = json_dumps(err.details, 0);
        if (!strstr(d, field))
                fail_msg("%s: %s has no %s", text, d, field);
        na_error_clear(&err);
}

static void decoder(void **state)
{
        (void)state;
        struct proto_app_sftp_set *p = decode_ok("{\"enabled\": true}");
        assert_true(p->enabled && p->password == PROTO_SFTP_KEEP && p->keys == PROTO_SFTP_KEEP &&
                    p->read_only_change == PROTO_SFTP_KEEP);
        proto_app_sftp_set_free(p);
        p = decode_ok("{\"enabled\": false, \"passwordHash\": null, \"publicKeys\": [], \"readOnly\": true}");
        assert_true(!p->enabled && p->password == PROTO_SFTP_CLEAR && p->keys == PROTO_SFTP_CLEAR && p->read_only);
        proto_app_sftp_set_free(p);
        p = decode_ok("{\"enabled\": true, \"passwordHash\": \"" SHA512_PW1 "\", \"publicKeys\": [\"a b\", \"c d\"]}");
        assert_int_equal(p->password, PROTO_SFTP_SET);
        assert_int_equal(p->n_keys, 2);
        proto_app_sftp_set_free(p);
        decode_fails("{}", "enabled");
        decode_fails("{\"enabled\": 1}", "enabled");
        decode_fails("{\"enabled\": true, \"passwordHash\": \"plain\"}", "passwordHash");
        decode_fails("{\"enabled\": true, \"passwordHash\": 5}", "passwordHash");
        decode_fails("{\"enabled\": true, \"publicKeys\": \"x\"}", "publicKeys");
        decode_fails("{\"enabled\": true, \"publicKeys\": [\"ok x\", 3]}", "\"1\"");
        decode_fails("{\"enabled\": true, \"publicKeys\": [\"\"]}", "\"0\"");
        decode_fails("{\"enabled\": true, \"readOnly\": \"no\"}", "readOnly");
        char big[4096];
        size_t n = (size_t)snprintf(big, sizeof(big), "{\"enabled\": true, \"publicKeys\": [");
        for (int i = 0; i < 101; i++)
                n += (size_t)snprintf(big + n, sizeof(big) - n, "%s\"k\"", i ? "," : "");
        snprintf(big + n, sizeof(big) - n, "]}");
        decode_fails(big, "publicKeys");
        _cleanup_json_ json_t *r = proto_app_sftp_set_encode("mc", "node.example", 2022, true);
        _cleanup_free_ char *s = json_dumps(r, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(s, "{\"enabled\":true,\"host\":\"node.example\",\"port\":2022,\"sftpUsername\":\"mc\"}");
}

static void paths(void **state)
{
        (void)state;
        struct {
                const char *in, *out;
        } t[] = { { "", "/" },           { ".", "/" },         { "/", "/" },           { "..", "/" },
                  { "/..", "/" },        { "../../etc", "/etc" }, { "a/b/../c", "/a/c" }, { "//a//b/", "/a/b" },
                  { "./a/./b", "/a/b" }, { "a/..", "/" },       { "/a/../../../b", "/b" }, { "...", "/..." } };
        char out[SFTP_PATH_MAX + 1];
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                assert_int_equal(sftp_path_normalize(t[i].in, strlen(t[i].in), out, sizeof(out)), 0);
                assert_string_equal(out, t[i].out);
        }
        assert_int_equal(sftp_path_normalize("a\0b", 3, out, sizeof(out)), -EINVAL);
        char small[4];
        assert_int_equal(sftp_path_normalize("abcdef", 6, small, sizeof(small)), -ENAMETOOLONG);

        assert_true(app_fs_symlink_target_inside("/a/link", "b"));
        assert_true(app_fs_symlink_target_inside("/a/link", "../b"));
        assert_true(app_fs_symlink_target_inside("/a/b/link", "../../c/./d"));
        assert_false(app_fs_symlink_target_inside("/a/link", "../../b"));
        assert_false(app_fs_symlink_target_inside("/link", ".."));
        assert_false(app_fs_symlink_target_inside("/link", "/etc"));
        assert_false(app_fs_symlink_target_inside("/link", ""));
        assert_false(app_fs_symlink_target_inside("/a/link", "x/../../../etc"));
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(limiter), cmocka_unit_test(hashes),
                                            cmocka_unit_test(key_lines), cmocka_unit_test(creds),
                                            cmocka_unit_test(decoder), cmocka_unit_test(paths) };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
