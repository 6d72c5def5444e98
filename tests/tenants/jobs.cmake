# SPDX-License-Identifier: GPL-2.0-or-later
# Issue 20 (attacks 4 and 5, and deeply nested params): the job slots a tenant could hold.
# The backup ignore matcher against the landed one as oracle, and hostile patterns (unit).
na_cmocka_test(test-jobs-glob SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-jobs-glob.c LIBS naapp naproto nacommon
               LABELS unit app)
# Sparse files, cancel, the node-critical job budget and the hostile ignore patterns
# end to end (real agent, crun, loop-mounted volumes).
na_python_cases(tenants-jobs-backup ${CMAKE_CURRENT_LIST_DIR}/test_jobs_backup.py TIMEOUT 300 LABELS apps)
# The job engine's budget: the node lane customers' jobs never take (unit, the pure rule).
na_cmocka_test(test-jobs-lanes SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-jobs-lanes.c LIBS naagent LABELS unit agent)
# Deeply nested params refused by id through the link, the jobs beside them run.
na_python_cases(tenants-jobs-poison ${CMAKE_CURRENT_LIST_DIR}/test_jobs_poison.py TIMEOUT 120 LABELS link)
# The archive writer: holes kept and restored, many regions, a file over the volume's size refused by name.
na_cmocka_test(test-jobs-sparse SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-jobs-sparse.c LIBS naapp naproto nacommon
               LABELS app needs-root)
