/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A VM's metadata loaded while memory runs out (gcc -fanalyzer, issue 20): a failed copy
 * of an SSH key, of the key list, or of a string member fails the load with ENOMEM.
 * It used to succeed with the key silently gone (the next cloud-init seed would have
 * left the customer without it). Fault injection: NA_FAULTS (common/fault.h), set
 * before the first load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/vm/vm-util.h"

#define ID1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

static void test_load_out_of_memory(void **state)
{
        (void)state;
        char dir[] = "/tmp/na-vm-meta-oom-XXXXXX";
        assert_non_null(mkdtemp(dir));
        struct vm_meta m;
        memset(&m, 0, sizeof(m));
        snprintf(m.id, sizeof(m.id), "%s", ID1);
        snprintf(m.hostname, sizeof(m.hostname), "web1");
        m.name = strdup("web");
        m.plan = (struct proto_vps_plan){ 2, 2, 2048, 20480, 100, 1000, 3 };
        m.template_id = strdup("debian");
        m.image_slug = strdup("12");
        struct na_error err = NA_ERROR_INIT;
        char *keys[] = { (char *)"ssh-ed25519 AAAA k1", (char *)"ssh-ed25519 BBBB k2", NULL };
        assert_int_equal(vm_meta_set_keys(&m, keys, &err), 0);
        assert_int_equal(vm_meta_save(dir, &m, &err), 0);

        /* The first load cannot allocate the list of keys, the second cannot copy the
         * first key; the third has memory again and reads both. */
        for (int round = 0; round < 2; round++) {
                struct vm_meta back;
                int r = vm_meta_load(dir, ID1, &back, &err);
                if (r == 0) {
                        size_t n = vm_meta_ssh_key_count(&back);
                        vm_meta_clear(&back);
                        fail_msg("round %d: the load succeeded with %zu of 2 keys", round, n);
                }
                assert_int_equal(r, -ENOMEM);
                assert_non_null(strstr(err.message, ID1));
                na_error_clear(&err);
        }
        struct vm_meta back;
        assert_int_equal(vm_meta_load(dir, ID1, &back, &err), 0);
        assert_int_equal(vm_meta_ssh_key_count(&back), 2);
        assert_string_equal(back.ssh_keys[1], "ssh-ed25519 BBBB k2");
        vm_meta_clear(&back);

        assert_int_equal(vm_meta_remove(dir, ID1, &err), 0);
        rmdir(dir);
        vm_meta_clear(&m);
}

int main(void)
{
        setenv("NA_FAULTS", "vm-meta.keys=1,vm-meta.key=1", 1);
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_load_out_of_memory) };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
