/*
 * app_rm_rf_at (drivers/app/image/app-image.h): rm -rf of a private tree (an unpacked image,
 * a stopped app's directory). It is the file layer's app_fs_rm_rf, which never
 * follows a link and never climbs with "..", so one implementation serves trees an
 * app may change and trees it cannot.
 */
#include "volume/volume.h"
#include "drivers/app/image/app-image.h"

int app_rm_rf_at(int dir_fd, const char *name, struct na_error *err)
{
        return app_fs_rm_rf(dir_fd, name, err);
}
