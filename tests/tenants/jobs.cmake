# Issue 20 (attacks 4 and 5, and deeply nested params): the job slots a tenant could hold.
# The backup ignore matcher against the landed one as oracle, and hostile patterns (unit).
na_cmocka_test(test-jobs-glob SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-jobs-glob.c LIBS naapp naproto nacommon
               LABELS unit app)
