/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Issue 20, attack 5: the job engine's budget (agent/jobs/job-lanes.c), a pure rule. Four
 * customers' long jobs fill the tenant lane and the node's own kinds still start; the
 * link still polls while the node lane has room; queued customers' jobs are bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/jobs/job-lanes.h"

static const struct job_lane_limits LIM = { .tenant_max = 4, .node_max = 2, .queued_max = 3 };

static void test_kinds(void **state)
{
        (void)state;
        const char *node[] = { "node.status", "vps.power", "vps.status", "app.power", "app.status", "console.open",
                               "console.close", "vps.firewall.set", "vps.firewall.get", "app.console.send" };
        const char *tenant[] = { "app.backup.create", "app.backup.restore", "app.deploy", "app.files.import",
                                 "vps.create", "vps.reinstall", "vps.backup.create", "test.sleep", "app.power.x", "" };
        for (size_t i = 0; i < sizeof(node) / sizeof(*node); i++)
                assert_int_equal(job_lane_of(node[i]), JOB_LANE_NODE);
        for (size_t i = 0; i < sizeof(tenant) / sizeof(*tenant); i++)
                assert_int_equal(job_lane_of(tenant[i]), JOB_LANE_TENANT);
        assert_int_equal(job_lane_of(NULL), JOB_LANE_TENANT);
}

static void test_start(void **state)
{
        (void)state;
        enum job_lane slot;
        /* Four long tenant jobs: no fifth tenant job, but node jobs start in their own slots. */
        struct job_lane_counts c = { .slots = { 4, 0 }, .held = { 4, 0 } };
        assert_false(job_lane_may_start(&LIM, &c, JOB_LANE_TENANT, &slot));
        assert_true(job_lane_may_start(&LIM, &c, JOB_LANE_NODE, &slot));
        assert_int_equal(slot, JOB_LANE_NODE);
        /* Node slots full: a node job borrows a free tenant slot, never the other way. */
        c = (struct job_lane_counts){ .slots = { 1, 2 }, .held = { 1, 2 } };
        assert_true(job_lane_may_start(&LIM, &c, JOB_LANE_NODE, &slot));
        assert_int_equal(slot, JOB_LANE_TENANT);
        assert_true(job_lane_may_start(&LIM, &c, JOB_LANE_TENANT, &slot));
        assert_int_equal(slot, JOB_LANE_TENANT);
        c = (struct job_lane_counts){ .slots = { 4, 2 }, .held = { 4, 2 } };
        assert_false(job_lane_may_start(&LIM, &c, JOB_LANE_NODE, &slot));
        /* A tenant job starts while its lane is under its max. */
        c = (struct job_lane_counts){ .slots = { 3, 0 }, .held = { 3, 0 } };
        assert_true(job_lane_may_start(&LIM, &c, JOB_LANE_TENANT, &slot));
        assert_int_equal(slot, JOB_LANE_TENANT);
}

static void test_poll_room(void **state)
{
        (void)state;
        struct job_lane_counts c = { 0 };
        assert_int_equal(job_lane_poll_room(&LIM, &c), 6);
        /* The tenant lane full of long jobs: the link still asks, for the node's slots. */
        c = (struct job_lane_counts){ .slots = { 4, 0 }, .held = { 4, 0 } };
        assert_int_equal(job_lane_poll_room(&LIM, &c), 2);
        c.held[JOB_LANE_NODE] = 1;
        assert_int_equal(job_lane_poll_room(&LIM, &c), 1);
        /* Customers' jobs queued beyond their slots: up to queued_max, then nothing more. */
        c = (struct job_lane_counts){ .slots = { 4, 0 }, .held = { 6, 0 } };
        assert_int_equal(job_lane_poll_room(&LIM, &c), 2);
        c.held[JOB_LANE_TENANT] = 7;
        assert_int_equal(job_lane_poll_room(&LIM, &c), 0);
        /* Both lanes full. */
        c = (struct job_lane_counts){ .slots = { 4, 2 }, .held = { 4, 2 } };
        assert_int_equal(job_lane_poll_room(&LIM, &c), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),
                cmocka_unit_test(test_start),
                cmocka_unit_test(test_poll_room),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
