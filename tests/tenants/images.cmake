# Issue 20, what one app's image or deploy can do to the node's disk and to other apps'
# routes: the image bomb against a small loop-mounted ext4 with a neighbour app writing,
# fully allocated volumes, bounded downloads (backup import, registry pulls), and
# hostnames, SFTP user names and routes that stay their owner's. Root: real crun, loop
# devices.
na_python_cases(tenants-images-bomb ${CMAKE_CURRENT_SOURCE_DIR}/test_images_bomb.py TIMEOUT 300 LABELS apps tenants)
na_python_cases(tenants-images-download ${CMAKE_CURRENT_SOURCE_DIR}/test_images_download.py TIMEOUT 300
                LABELS apps tenants)
# The router's side of it: a route is its app's (a real haproxy on loopback; 77 without one).
na_cmocka_test(test-images-route-owner SOURCES test-images-route-owner.c LIBS naapp TIMEOUT 120
               LABELS app routes tenants)
na_python_cases(tenants-images-hostname ${CMAKE_CURRENT_SOURCE_DIR}/test_images_hostname.py TIMEOUT 300
                LABELS apps routes tenants)
