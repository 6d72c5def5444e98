# SPDX-License-Identifier: GPL-2.0-or-later
# Issue 20, the monitor's slice: an app that floods its output stays inside its own
# limits (the monitor's CPU, the lines per second), and the OOM order (containers die
# before the agent, its monitors and helpers). The real agent, controller link, crun
# and a busybox image (tests/harness/mkimage.py); root only.
na_python_cases(tenants-monitor ${CMAKE_CURRENT_SOURCE_DIR}/test_monitor_tenants.py TIMEOUT 300 LABELS apps tenants)
# The lines-per-second rule itself, on a fixed clock.
na_cmocka_test(test-monitor-rate SOURCES test-monitor-rate.c ${CMAKE_SOURCE_DIR}/monitor/monitor-rate.c
               LIBS nacommon LABELS unit app)
# The out-of-memory paths -fanalyzer found, through the real agent with fault injection.
na_python_cases(tenants-oom-paths ${CMAKE_CURRENT_SOURCE_DIR}/test_monitor_oom_paths.py TIMEOUT 300
                LABELS apps tenants console)
# A VM's metadata loaded while memory runs out (fault injection): ENOMEM, never a key dropped.
na_cmocka_test(test-monitor-vm-meta SOURCES test-monitor-vm-meta.c LIBS navm LABELS unit vm)
# The Prometheus endpoint: a 4.7 MiB page to a slow reader arrives whole.
na_cmocka_test(test-monitor-prometheus SOURCES test-monitor-prometheus.c LIBS naagent LABELS unit agent)
