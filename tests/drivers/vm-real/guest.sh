#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Build a tiny TCG guest from Debian packages into DIR, once (later runs reuse it):
#
#   DIR/vmlinuz          the kernel of Debian's linux-image-amd64 (apt-get download,
#                        dpkg-deb), booted directly by qemu
#   DIR/initramfs.img    busybox-static in a gzip'd newc cpio; its /init mounts
#                        proc, sys and dev, prints "NODEAGENT-GUEST-UP boot=<boot id>
#                        uptime=<s> acpi=<on|off>" on the first serial port and waits
#                        forever. With "nodeagent.acpi=poweroff" on the kernel command
#                        line it loads the kernel's ACPI button and evdev modules and
#                        powers off when the power button is pressed (printing
#                        "NODEAGENT-GUEST-POWER-BUTTON" first), like a real distribution;
#                        without it, it ignores ACPI like a hung guest.
#   DIR/tiny.qcow2       a small empty qcow2 template disk
#   DIR/templates.json   the VM driver's templates file (paths relative to DIR, the
#                        images_dir), with the disk's real sha256: template
#                        nodeagent-test-tiny ignores ACPI, nodeagent-test-tiny-acpi
#                        answers it (same kernel, initramfs and disk)
#   DIR/guest.env        what was built (kernel version, template id) for the test log
#
# Usage: guest.sh DIR. Exit codes: 0 ok (DIR complete), 1 error.
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

RECIPE=2 # bump when what this script builds changes: the cache is then rebuilt
TEMPLATE_ID=nodeagent-test-tiny
ACPI_TEMPLATE_ID=nodeagent-test-tiny-acpi
IMAGE_SLUG=busybox-1
CMDLINE="console=ttyS0 quiet"
ACPI_CMDLINE="$CMDLINE nodeagent.acpi=poweroff"
DISK_SIZE=64M

say() { echo "guest.sh: $*" >&2; }
die() { say "$*"; exit 1; }

[ $# -eq 1 ] || die "usage: guest.sh DIR"
dir=$1
case $dir in /*) ;; *) dir=$(pwd)/$dir ;; esac
mkdir -p "$dir"

# One builder at a time; a second caller waits and then finds the cache complete.
exec 9>"$dir/.lock"
flock 9

complete() {
        [ "$(cat "$dir/.recipe" 2>/dev/null || true)" = "$RECIPE" ] &&
        [ -s "$dir/vmlinuz" ] && [ -s "$dir/initramfs.img" ] &&
        [ -s "$dir/tiny.qcow2" ] && [ -s "$dir/templates.json" ]
}
if complete; then
        exit 0
fi
rm -f "$dir/.recipe"

for b in apt-get dpkg-deb cpio gzip qemu-img sha256sum flock; do
        command -v "$b" >/dev/null 2>&1 || die "$b is not installed (scripts/deps.sh)"
done

work="$dir/work"
rm -rf "$work"
mkdir -p "$work/debs" "$work/kernel" "$work/root"

# download PACKAGE[=VERSION] into $work/debs; prints the .deb path. Package lists
# that do not know it yet (a fresh machine) are updated once. Where the newest
# candidate cannot be fetched (a mirror without the security archive, whose version
# is then the candidate), each older version apt knows is tried, newest first. (It
# runs in $(...): the "updated" mark is a file.)
fetch_one() {
        (cd "$work/debs" && apt-get download -q "$1" >"$work/apt.log" 2>&1)
}
download() {
        if ! fetch_one "$1"; then
                if [ ! -e "$work/apt-updated" ]; then
                        : >"$work/apt-updated"
                        apt-get update -qq >"$work/apt-update.log" 2>&1 ||
                                echo "guest.sh: apt-get update failed: $(tail -n 1 "$work/apt-update.log")" >&2
                fi
                if ! fetch_one "$1"; then
                        case $1 in *=*) die "apt-get download $1 failed: $(tail -n 3 "$work/apt.log")" ;; esac
                        _ok=""
                        for _v in $(apt-cache madison "$1" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}'); do
                                if fetch_one "$1=$_v"; then
                                        _ok=1
                                        break
                                fi
                        done
                        [ -n "$_ok" ] || die "apt-get download $1 failed in every version apt knows: $(tail -n 3 "$work/apt.log")"
                fi
        fi
        name=${1%%=*}
        deb=$(ls "$work/debs/${name}"_*.deb 2>/dev/null | head -n 1)
        [ -n "$deb" ] || die "apt-get download $1 left no .deb"
        echo "$deb"
}

# --- kernel: the linux-image-amd64 metapackage names the versioned image it pulls in.
meta=$(download linux-image-amd64)
dep=$(dpkg-deb -f "$meta" Depends | sed -n '1s/^[[:space:]]*\([^ ,|(]*\)[[:space:]]*\((= *\([^)]*\))\)\{0,1\}.*/\1 \3/p')
pkg=${dep%% *}
ver=${dep#* }
case $pkg in linux-image-*-amd64) ;; *) die "unexpected dependency of linux-image-amd64: '$dep'" ;; esac
if [ -n "$ver" ] && [ "$ver" != "$pkg" ]; then
        image=$(download "$pkg=$ver")
else
        image=$(download "$pkg")
fi
# The kernel, and the two modules a guest needs to see the ACPI power button.
dpkg-deb --fsys-tarfile "$image" | tar -x -C "$work/kernel" --wildcards './boot/vmlinuz-*' \
        './lib/modules/*/kernel/drivers/acpi/button.ko' './lib/modules/*/kernel/drivers/input/evdev.ko'
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-* | head -n 1)
[ -s "$vmlinuz" ] || die "no kernel in $image"
kver=${vmlinuz##*/vmlinuz-}
for m in acpi/button input/evdev; do
        [ -s "$work/kernel/lib/modules/$kver/kernel/drivers/$m.ko" ] || die "no $m.ko in $image"
done

# --- busybox-static: the installed one when there is one, else from its package.
bb=""
if dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed"; then
        bb=$(dpkg -L busybox-static | grep -m1 '/bin/busybox$' || true)
fi
if [ -z "$bb" ] || [ ! -x "$bb" ]; then
        bdeb=$(download busybox-static)
        mkdir -p "$work/busybox"
        dpkg-deb -x "$bdeb" "$work/busybox"
        bb="$work/busybox/bin/busybox"
        [ -x "$bb" ] || die "no busybox in $bdeb"
fi

# --- initramfs
r="$work/root"
mkdir -p "$r/bin" "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/etc" "$r/lib/modules"
cp "$bb" "$r/bin/busybox"
cp "$work/kernel/lib/modules/$kver/kernel/drivers/acpi/button.ko" \
   "$work/kernel/lib/modules/$kver/kernel/drivers/input/evdev.ko" "$r/lib/modules/"
ln -s busybox "$r/bin/sh"
mknod -m 600 "$r/dev/console" c 5 1
mknod -m 666 "$r/dev/null" c 1 3
cat >"$r/init" <<'INIT'
#!/bin/sh
# nodeagent vm-real test guest: no disk, no network, no guest agent. It answers the
# ACPI power button only with nodeagent.acpi=poweroff on the kernel command line.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox --install -s /bin
export PATH=/bin
acpi=off
if grep -q 'nodeagent.acpi=poweroff' /proc/cmdline; then
        insmod /lib/modules/evdev.ko
        insmod /lib/modules/button.ko
        for d in /sys/class/input/input*; do
                [ "$(cat "$d/name" 2>/dev/null)" = "Power Button" ] || continue
                for e in "$d"/event*; do
                        [ -e "$e" ] || continue
                        # Opened before the marker: a press from then on is not missed.
                        exec 3<"/dev/input/${e##*/}"
                        (dd bs=24 count=1 <&3 >/dev/null 2>&1
                         echo "NODEAGENT-GUEST-POWER-BUTTON" >/dev/ttyS0
                         poweroff -f) &
                        acpi=on
                        break 2
                done
        done
fi
boot=$(cat /proc/sys/kernel/random/boot_id)
up=$(cut -d' ' -f1 /proc/uptime)
echo "NODEAGENT-GUEST-UP boot=$boot uptime=$up acpi=$acpi" >/dev/ttyS0
while :; do sleep 3600; done
INIT
chmod 0755 "$r/init"
(cd "$r" && find . -print | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -9n >"$work/initramfs.img"

# --- template disk
qemu-img create -q -f qcow2 "$work/tiny.qcow2" "$DISK_SIZE"
sum=$(sha256sum "$work/tiny.qcow2" | cut -d' ' -f1)

cat >"$work/templates.json" <<JSON
[
  {
    "id": "$TEMPLATE_ID",
    "imageSlug": "$IMAGE_SLUG",
    "os": "linux",
    "format": "qcow2",
    "path": "tiny.qcow2",
    "sha256": "$sum",
    "kernel": "vmlinuz",
    "initrd": "initramfs.img",
    "cmdline": "$CMDLINE"
  },
  {
    "id": "$ACPI_TEMPLATE_ID",
    "imageSlug": "$IMAGE_SLUG",
    "os": "linux",
    "format": "qcow2",
    "path": "tiny.qcow2",
    "sha256": "$sum",
    "kernel": "vmlinuz",
    "initrd": "initramfs.img",
    "cmdline": "$ACPI_CMDLINE"
  }
]
JSON
cat >"$work/guest.env" <<ENV
KERNEL_PACKAGE=$pkg
KERNEL_VERSION=$kver
KERNEL_PACKAGE_VERSION=$ver
TEMPLATE_ID=$TEMPLATE_ID
ACPI_TEMPLATE_ID=$ACPI_TEMPLATE_ID
IMAGE_SLUG=$IMAGE_SLUG
ENV

cp "$vmlinuz" "$work/vmlinuz"
for f in vmlinuz initramfs.img tiny.qcow2 templates.json guest.env; do
        mv -f "$work/$f" "$dir/$f"
done
rm -rf "$work"
echo "$RECIPE" >"$dir/.recipe"
say "built $TEMPLATE_ID and $ACPI_TEMPLATE_ID in $dir (kernel $kver)"
