# SPDX-License-Identifier: GPL-2.0-or-later
# Issue 20, what one app's image or deploy can do to the node's disk and to other apps'
# routes: the image bomb against a small loop-mounted ext4 with a neighbour app writing,
# fully allocated volumes, bounded downloads (backup import, registry pulls), and
# hostnames, SFTP user names and routes that stay their owner's. Root: real crun, loop
# devices.
na_python_cases(tenants-images-bomb ${CMAKE_CURRENT_SOURCE_DIR}/test_images_bomb.py TIMEOUT 300 LABELS apps tenants)
na_python_cases(tenants-images-download ${CMAKE_CURRENT_SOURCE_DIR}/test_images_download.py TIMEOUT 300
                LABELS apps tenants)
# The router's side of it: a route is its app's (a real haproxy on loopback; 77 without one).
na_cmocka_test(test-images-route-owner SOURCES test-images-route-owner.c LIBS narouting TIMEOUT 120
               LABELS app routes tenants)
na_python_cases(tenants-images-hostname ${CMAKE_CURRENT_SOURCE_DIR}/test_images_hostname.py TIMEOUT 300
                LABELS apps routes tenants)
# The unpacker's budget on its own (no root): a zero bomb and an entry bomb stopped while written.
# The test writes its tars with libarchive itself (naapp loads it only on first use).
pkg_check_modules(TENANTS_IMAGES_LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
na_cmocka_test(test-images-unpack-budget SOURCES test-images-unpack-budget.c
               LIBS naapp naproto nacommon PkgConfig::TENANTS_IMAGES_LIBARCHIVE LABELS unit app tenants)
