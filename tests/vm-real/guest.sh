#!/bin/sh
# Build a tiny TCG guest from Debian packages into DIR, once (later runs reuse it):
#
#   DIR/vmlinuz          the kernel of Debian's linux-image-amd64 (apt-get download,
#                        dpkg-deb), booted directly by qemu
#   DIR/initramfs.img    busybox-static in a gzip'd newc cpio; its /init mounts
#                        proc, sys and dev, prints "NODEAGENT-GUEST-UP boot=<boot id>"
#                        on the first serial port and waits forever
#   DIR/tiny.qcow2       a small empty qcow2 template disk
#   DIR/templates.json   the VM driver's templates file (paths relative to DIR, the
#                        images_dir), with the disk's real sha256
#   DIR/guest.env        what was built (kernel version, template id) for the test log
#
# Usage: guest.sh DIR. Exit codes: 0 ok (DIR complete), 1 error.
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

RECIPE=1 # bump when what this script builds changes: the cache is then rebuilt
TEMPLATE_ID=nodeagent-test-tiny
IMAGE_SLUG=busybox-1
CMDLINE="console=ttyS0 quiet"
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

# download PACKAGE[=VERSION] into $work/debs; prints the .deb path.
download() {
        (cd "$work/debs" && apt-get download -q "$1" >"$work/apt.log" 2>&1) ||
                die "apt-get download $1 failed: $(tail -n 3 "$work/apt.log")"
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
dpkg-deb --fsys-tarfile "$image" | tar -x -C "$work/kernel" --wildcards './boot/vmlinuz-*'
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-* | head -n 1)
[ -s "$vmlinuz" ] || die "no kernel in $image"
kver=${vmlinuz##*/vmlinuz-}

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
mkdir -p "$r/bin" "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/etc"
cp "$bb" "$r/bin/busybox"
ln -s busybox "$r/bin/sh"
mknod -m 600 "$r/dev/console" c 5 1
mknod -m 666 "$r/dev/null" c 1 3
cat >"$r/init" <<'INIT'
#!/bin/sh
# nodeagent vm-real test guest: no disk, no network, no guest agent, ignores ACPI.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox --install -s /bin
export PATH=/bin
boot=$(cat /proc/sys/kernel/random/boot_id)
up=$(cut -d' ' -f1 /proc/uptime)
echo "NODEAGENT-GUEST-UP boot=$boot uptime=$up" >/dev/ttyS0
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
  }
]
JSON
cat >"$work/guest.env" <<ENV
KERNEL_PACKAGE=$pkg
KERNEL_VERSION=$kver
KERNEL_PACKAGE_VERSION=$ver
TEMPLATE_ID=$TEMPLATE_ID
IMAGE_SLUG=$IMAGE_SLUG
ENV

cp "$vmlinuz" "$work/vmlinuz"
for f in vmlinuz initramfs.img tiny.qcow2 templates.json guest.env; do
        mv -f "$work/$f" "$dir/$f"
done
rm -rf "$work"
echo "$RECIPE" >"$dir/.recipe"
say "built $TEMPLATE_ID in $dir (kernel $kver)"
