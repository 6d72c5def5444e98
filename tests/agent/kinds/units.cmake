# Unit tests of agent/: configuration, backoff, the loop, the job layer, the job journal,
# the report outbox and the control socket.
na_cmocka_test(test-agent-config SOURCES test-config.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-backoff SOURCES test-backoff.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-loop SOURCES test-loop.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-jobs SOURCES test-jobs.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-jobs-orphan SOURCES test-jobs-orphan.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-jobstore SOURCES test-jobstore.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-reports SOURCES test-reports.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-control SOURCES test-control.c fake-app.c LIBS naagent LABELS unit agent)

# The params decoders of every job kind, fuzzed with the proto/ driver (corpus, then
# seeded mutations) so it runs in CI with gcc.
add_executable(fuzz-params-driver ${CMAKE_SOURCE_DIR}/tests/proto/fuzz-driver.c fuzz-params.c)
target_link_libraries(fuzz-params-driver PRIVATE naagent)
na_script_test(fuzz-agent-params COMMAND fuzz-params-driver ${CMAKE_CURRENT_SOURCE_DIR}/params-corpus 3000
               TIMEOUT 300 LABELS unit fuzz)

# The real nodeagentctl (apps, logs, logs -f) against a control socket the test serves
# with a fake app driver table.
na_cmocka_test(test-agent-ctl-apps SOURCES test-ctl-apps.c fake-app.c LIBS naagent LABELS unit agent)
if(TARGET nodeagentctl)
  add_dependencies(test-agent-ctl-apps nodeagentctl)
endif()
na_cmocka_test(test-agent-sandbox-abi SOURCES test-sandbox-abi.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-sandbox-strict SOURCES test-sandbox-strict.c LIBS naagent LABELS unit agent)
na_cmocka_test(test-agent-sandbox-strict-args SOURCES test-sandbox-strict-args.c LIBS naagent LABELS unit agent)

# The configuration file's parser and the control socket's line decoder, fuzzed with
# the proto/ driver (corpus, then seeded mutations); scripts/fuzz.sh runs the same
# entries as libFuzzer targets.
add_executable(fuzz-config-driver ${CMAKE_SOURCE_DIR}/tests/proto/fuzz-driver.c fuzz-config.c)
target_link_libraries(fuzz-config-driver PRIVATE naagent)
na_script_test(fuzz-agent-config COMMAND fuzz-config-driver ${CMAKE_CURRENT_SOURCE_DIR}/config-corpus 5000
               TIMEOUT 300 LABELS unit fuzz)
add_executable(fuzz-control-driver ${CMAKE_SOURCE_DIR}/tests/proto/fuzz-driver.c fuzz-control.c)
target_link_libraries(fuzz-control-driver PRIVATE naagent)
na_script_test(fuzz-agent-control COMMAND fuzz-control-driver ${CMAKE_CURRENT_SOURCE_DIR}/control-corpus 5000
               TIMEOUT 300 LABELS unit fuzz)
# The pace of progress posts (at most one a second per job, agent/link/progress-pace.h).
na_cmocka_test(test-agent-progress-pace SOURCES test-progress-pace.c LIBS naagent LABELS unit agent)
