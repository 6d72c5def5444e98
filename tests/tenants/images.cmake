# Issue 20, what one app's image or deploy can do to the node's disk and to other apps'
# routes: the image bomb against a small loop-mounted ext4 with a neighbour app writing,
# fully allocated volumes, bounded downloads (backup import, registry pulls), and
# hostnames, SFTP user names and routes that stay their owner's. Root: real crun, loop
# devices.
na_python_cases(tenants-images-bomb ${CMAKE_CURRENT_SOURCE_DIR}/test_images_bomb.py TIMEOUT 300 LABELS apps tenants)
na_python_cases(tenants-images-download ${CMAKE_CURRENT_SOURCE_DIR}/test_images_download.py TIMEOUT 300
                LABELS apps tenants)
