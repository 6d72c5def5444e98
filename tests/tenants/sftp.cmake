# SPDX-License-Identifier: GPL-2.0-or-later
# SFTP tenants (issue 20, attacks 1, 2, 6, 9): the limiter and admission logic in cmocka,
# and each attack against the real agent and nodeagent-sftpd with OpenSSH's clients.
na_cmocka_test(test-sftp-tenant-limits SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-sftp-tenant-limits.c
               LIBS nasftp nacommon LABELS unit app)
na_python_cases(tenants-sftp ${CMAKE_CURRENT_LIST_DIR}/test_sftp_tenants.py TIMEOUT 300 LABELS apps)
# The monitor of a connection (privilege separation) spoken to as a hostile network half.
na_cmocka_test(test-sftp-tenant-monitor SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-sftp-tenant-monitor.c
               ${CMAKE_SOURCE_DIR}/sftp/sftpd-monitor.c LIBS nasftp navolume naproto nacommon LABELS unit app)
