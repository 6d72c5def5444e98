# SPDX-License-Identifier: GPL-2.0-or-later
# Issue 20, attack 10: only an app's own ids (and root) reach its volume.
na_python_cases(tenants-volume-private ${CMAKE_CURRENT_SOURCE_DIR}/test_volume_private.py TIMEOUT 300
                LABELS apps tenants)
