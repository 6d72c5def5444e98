#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The .deb's life with dpkg in a scratch root (dpkg --root, maintainer scripts run
# chrootless with DPKG_ROOT set, so they must not touch the host's systemd; a fake
# systemctl first on PATH fails the test if they do):
#   install   -> files in place, /var/lib/nodeagent 0711, conffile registered, hint
#   modify the configuration, reinstall -> the modification is kept, no prompt
#   remove    -> binaries and unit gone; configuration and a non-empty state
#                directory kept
#   purge     -> configuration and enablement link gone; a non-empty state
#                directory (VM disks) kept
. "$(dirname "$0")/lib.sh"

for tool in cpack dpkg-deb dpkg-shlibdeps dpkg; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
make_scratch

deb=$(build_package DEB)
R=$SCRATCH/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers" "$SCRATCH/bin"
: >"$R/var/lib/dpkg/status"
: >"$R/var/lib/dpkg/available"
cat >"$SCRATCH/bin/systemctl" <<EOS
#!/bin/sh
echo "systemctl \$*" >>"$SCRATCH/host-systemctl"
EOS
chmod 755 "$SCRATCH/bin/systemctl"

dpkg_root() {
	PATH="$SCRATCH/bin:$PATH" dpkg --root="$R" --log="$SCRATCH/dpkg.log" --force-script-chrootless \
		--force-depends "$@" </dev/null >"$SCRATCH/dpkg.out" 2>&1
}

dpkg_root -i "$deb" || die "dpkg -i: $(cat "$SCRATCH/dpkg.out")"
for f in usr/sbin/nodeagentd usr/bin/nodeagentctl lib/systemd/system/nodeagent.service etc/nodeagent/nodeagent.conf; do
	[ -f "$R/$f" ] || fail "after install: /$f missing"
done
[ "$(stat -c %a "$R/var/lib/nodeagent")" = 711 ] || fail "after install: /var/lib/nodeagent mode $(stat -c %a "$R/var/lib/nodeagent")"
dpkg --root="$R" -s nodeagent >"$SCRATCH/status"
grep -q '^Status: install ok installed' "$SCRATCH/status" || fail "after install: $(grep '^Status' "$SCRATCH/status")"
grep -q '^ /etc/nodeagent/nodeagent.conf [0-9a-f]\{32\}$' "$SCRATCH/status" || fail "after install: nodeagent.conf not registered as a conffile"
grep -q "nodeagentd --check-config" "$SCRATCH/dpkg.out" || fail "install printed no hint about the configuration"

echo "# local change" >>"$R/etc/nodeagent/nodeagent.conf"
dpkg_root -i "$deb" || fail "reinstall with a modified configuration: $(cat "$SCRATCH/dpkg.out")"
tail -n 1 "$R/etc/nodeagent/nodeagent.conf" | grep -qx "# local change" || fail "reinstall replaced the modified configuration"
[ -e "$R/etc/nodeagent/nodeagent.conf.dpkg-new" ] && fail "reinstall left nodeagent.conf.dpkg-new"

# What a running agent leaves there (an empty directory would go with the package).
touch "$R/var/lib/nodeagent/lock" "$R/var/lib/nodeagent/disk.qcow2"
dpkg_root -r nodeagent || fail "dpkg -r: $(cat "$SCRATCH/dpkg.out")"
for f in usr/sbin/nodeagentd usr/bin/nodeagentctl lib/systemd/system/nodeagent.service; do
	[ -e "$R/$f" ] && fail "after remove: /$f still there"
done
[ -f "$R/etc/nodeagent/nodeagent.conf" ] || fail "remove deleted the configuration (only purge should)"
[ -f "$R/var/lib/nodeagent/disk.qcow2" ] || fail "remove deleted the state directory's contents"

mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
ln -s /lib/systemd/system/nodeagent.service "$R/etc/systemd/system/multi-user.target.wants/nodeagent.service"
dpkg_root -P nodeagent || fail "dpkg -P: $(cat "$SCRATCH/dpkg.out")"
[ -e "$R/etc/nodeagent/nodeagent.conf" ] && fail "purge left the configuration"
[ -L "$R/etc/systemd/system/multi-user.target.wants/nodeagent.service" ] && fail "purge left the enablement link"
[ -f "$R/var/lib/nodeagent/disk.qcow2" ] || fail "purge deleted a file in the state directory"
if dpkg --root="$R" -s nodeagent >/dev/null 2>&1; then
	fail "after purge dpkg still knows nodeagent"
fi

[ -s "$SCRATCH/host-systemctl" ] && fail "a maintainer script ran systemctl with DPKG_ROOT set: $(cat "$SCRATCH/host-systemctl")"
info "install, reinstall, remove, purge in a scratch root: as expected"
finish
