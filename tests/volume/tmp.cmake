# Files that replace their target only when complete (drivers/app/app-fs-tmp.c, used by
# app.files.import) on a real directory with the app-fs hostile path fixture. Root (owners).
na_cmocka_test(test-app-fs-tmp SOURCES test-app-fs-tmp.c LIBS naapp naproto nacommon Threads::Threads
               LABELS app needs-root)
# Again through the hidden temporary name, as on file systems without O_TMPFILE (fault injected).
add_test(NAME test-app-fs-tmp-named COMMAND test-app-fs-tmp)
set_tests_properties(test-app-fs-tmp-named PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                     ENVIRONMENT "${NA_TEST_ENV};NA_FAULTS=app-fs.tmpfile%1" LABELS "app;needs-root")
