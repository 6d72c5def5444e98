# SPDX-License-Identifier: GPL-2.0-or-later
# Issue 20: disk I/O between apps, throttled on the device behind an app's volume.
na_python_cases(tenants-io ${CMAKE_CURRENT_SOURCE_DIR}/test_io_limits.py TIMEOUT 300 LABELS apps tenants)
