#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The .deb built by packaging/build-packages.sh, read back with dpkg-deb:
#  - control fields (-f): name, version, architecture, maintainer, and Depends naming
#    the Debian package of every shared library the binaries link to, plus the
#    programs the VM driver runs;
#  - contents (-c): every file at its place with its mode and owner, the state
#    directory 0711, nothing outside the expected directories;
#  - control archive (-I/-e): conffiles, maintainer scripts (0755, valid sh);
#  - the shipped unit and configuration are the files of the tree (ExecStart names
#    the packaged daemon), and the packaged daemon runs;
#  - the maintainer scripts call systemctl daemon-reload only when systemd runs
#    (run against a fake systemctl in a private mount namespace).
. "$(dirname "$0")/lib.sh"

for tool in cpack dpkg-deb dpkg-shlibdeps dpkg; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
: "${NA_NODEAGENTD:?NA_NODEAGENTD not set}"
: "${NA_NODEAGENTCTL:?NA_NODEAGENTCTL not set}"
make_scratch

deb=$(build_package DEB)
info "built $(basename "$deb") ($(wc -c <"$deb") bytes)"
version=$("$NA_NODEAGENTD" --version | awk '{ print $2 }')

# 1. Control fields.
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = nodeagent ] || fail "Package: $(field Package)"
case $(field Version) in
"$version"-*) ;;
*) fail "Version: $(field Version), want $version-<release>" ;;
esac
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
field Maintainer | grep -q '<.*@.*>' || fail "Maintainer without an address: $(field Maintainer)"
[ -n "$(field Description)" ] || fail "no Description"
depends=$(field Depends)
info "Depends: $depends"
has_dep() {
	printf '%s\n' "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//; s/:.*//' | grep -qx "$1"
}
for pkg in libc6 qemu-utils libarchive13; do # libarchive13: dlopen()ed, no NEEDED entry
	has_dep "$pkg" || fail "Depends lacks $pkg"
done
# The libraries the packaged binaries link (not the test build's: a sanitizer build
# links libasan, which the package rightly does not depend on).
dpkg-deb -x "$deb" "$SCRATCH/deb-root"
for bin in "$SCRATCH/deb-root/usr/sbin/nodeagentd" "$SCRATCH/deb-root/usr/bin/nodeagentctl" \
	"$SCRATCH/deb-root/usr/lib/nodeagent/nodeagent-vm-libvirt.so"; do
	for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
		path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
		[ -n "$path" ] || continue
		owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null || true)
		owner=${owner%%:*}
		[ -n "$owner" ] || continue
		has_dep "$owner" || fail "Depends lacks $owner (provides $lib, needed by $(basename "$bin"))"
	done
done

# 2. Contents.
dpkg-deb -c "$deb" | awk '{ print $1, $2, $6 }' | sed 's, \./, /,; s,/$,,' >"$SCRATCH/contents"
expect_entry() { # MODE PATH
	line=$(awk -v p="$2" '$3 == p' "$SCRATCH/contents")
	if [ -z "$line" ]; then
		fail "$2 missing from the .deb"
		return
	fi
	set -- "$1" "$2" $line
	[ "$3" = "$1" ] || fail "$2: mode $3, want $1"
	[ "$4" = root/root ] || fail "$2: owner $4, want root/root"
}
expect_entry -rwxr-xr-x /usr/sbin/nodeagentd
expect_entry -rwxr-xr-x /usr/bin/nodeagentctl
expect_entry -rw-r--r-- /usr/lib/nodeagent/nodeagent-vm-libvirt.so
expect_entry -rwxr-xr-x /usr/libexec/nodeagent/nodeagent-monitor
expect_entry -rwxr-xr-x /usr/libexec/nodeagent/nodeagent-sftpd
expect_entry -rw-r--r-- /etc/nodeagent/nodeagent.conf
expect_entry -rw-r--r-- /lib/systemd/system/nodeagent.service
expect_entry drwx--x--x /var/lib/nodeagent
expect_entry -rw-r--r-- /usr/share/man/man8/nodeagentd.8.gz
expect_entry -rw-r--r-- /usr/share/man/man8/nodeagentctl.8.gz
expect_entry -rw-r--r-- /usr/share/man/man5/nodeagent.conf.5.gz
expect_entry -rw-r--r-- /usr/share/doc/nodeagent/README.md
expect_entry -rw-r--r-- /usr/share/doc/nodeagent/examples/monitoring/grafana-dashboard.json
expect_entry -rw-r--r-- /usr/share/doc/nodeagent/examples/monitoring/prometheus-alerts.yml
expect_entry -rw-r--r-- /usr/share/doc/nodeagent/copyright
expect_entry -rw-r--r-- /usr/share/doc/nodeagent/changelog.Debian.gz
expect_entry -rw-r--r-- /usr/share/lintian/overrides/nodeagent
expect_entry -rw-r--r-- /usr/share/bash-completion/completions/nodeagentctl
awk '{ print $3 }' "$SCRATCH/contents" | while read -r p; do
	case $p in
	/ | /etc | /etc/nodeagent | /etc/nodeagent/* | /lib | /lib/systemd | /lib/systemd/system | \
		/lib/systemd/system/nodeagent.service | /usr | /usr/bin | /usr/bin/nodeagentctl | \
		/usr/sbin | /usr/sbin/nodeagentd | /usr/share | /usr/share/man | /usr/share/man/man[58] | \
		/usr/libexec | /usr/libexec/nodeagent | /usr/libexec/nodeagent/nodeagent-monitor | \
		/usr/libexec/nodeagent/nodeagent-sftpd | /usr/share/man/man[58]/*.gz | /usr/share/doc | /usr/share/doc/nodeagent | \
		/usr/share/doc/nodeagent/* | /var | /var/lib | /var/lib/nodeagent | /usr/lib | /usr/lib/nodeagent | \
		/usr/lib/nodeagent/nodeagent-vm-libvirt.so | /usr/share/lintian | /usr/share/lintian/overrides | \
		/usr/share/lintian/overrides/nodeagent | /usr/share/bash-completion | /usr/share/bash-completion/completions | \
		/usr/share/bash-completion/completions/nodeagentctl) ;;
	*) echo "$p" ;;
	esac
done >"$SCRATCH/unexpected"
while read -r p; do fail "unexpected path in the .deb: $p"; done <"$SCRATCH/unexpected"
grep -q ' /usr/lib/systemd/system' "$SCRATCH/contents" && fail "the .deb ships /usr/lib/systemd/system (Debian 12 uses /lib/systemd/system)"
info "$(grep -c '^-' "$SCRATCH/contents") files, $(grep -c '^d' "$SCRATCH/contents") directories"

# 3. Control archive.
dpkg-deb -I "$deb" >"$SCRATCH/info"
for member in conffiles postinst prerm postrm; do
	grep -q "^ *[0-9]* bytes, *[0-9]* lines .* $member" "$SCRATCH/info" || fail "dpkg-deb -I: no $member"
done
mkdir "$SCRATCH/control"
dpkg-deb -e "$deb" "$SCRATCH/control"
[ "$(cat "$SCRATCH/control/conffiles")" = /etc/nodeagent/nodeagent.conf ] ||
	fail "conffiles: '$(cat "$SCRATCH/control/conffiles")', want /etc/nodeagent/nodeagent.conf"
for s in postinst prerm postrm; do
	mode=$(stat -c %a "$SCRATCH/control/$s")
	[ "$mode" = 755 ] || fail "$s: mode $mode, want 755"
	sh -n "$SCRATCH/control/$s" || fail "$s: not valid sh"
	head -n 1 "$SCRATCH/control/$s" | grep -qx '#!/bin/sh' || fail "$s: no #!/bin/sh line"
	cmp -s "$SCRATCH/control/$s" "$PKG_SRC/deb/$s" || fail "$s in the .deb differs from packaging/deb/$s"
done

# 4. Shipped files are the tree's, and the daemon runs.
mkdir "$SCRATCH/root"
dpkg-deb -x "$deb" "$SCRATCH/root"
cmp -s "$SCRATCH/root/etc/nodeagent/nodeagent.conf" "$PKG_SRC/nodeagent.conf" ||
	fail "the packaged nodeagent.conf differs from packaging/nodeagent.conf"
cmp -s "$SCRATCH/root/lib/systemd/system/nodeagent.service" "$PKG_SRC/nodeagent.service" ||
	fail "the packaged unit differs from packaging/nodeagent.service"
grep -q '^ExecStart=/usr/sbin/nodeagentd ' "$SCRATCH/root/lib/systemd/system/nodeagent.service" ||
	fail "the packaged unit does not start /usr/sbin/nodeagentd"
got=$("$SCRATCH/root/usr/sbin/nodeagentd" --version 2>&1) || fail "packaged nodeagentd --version failed: $got"
[ "$got" = "nodeagentd $version" ] || fail "packaged nodeagentd --version: '$got'"
"$SCRATCH/root/usr/bin/nodeagentctl" --help >/dev/null 2>&1 || fail "packaged nodeagentctl --help failed"
# The packaged daemon finds its helpers and its VM module from where it is installed:
# no path of the build machine (the build tree, the configure-time prefix) is in it.
for bin in usr/sbin/nodeagentd usr/lib/nodeagent/nodeagent-vm-libvirt.so; do
	for p in "$NA_BUILD_DIR" /usr/local/libexec /usr/local/lib/; do
		if grep -aq -- "$p" "$SCRATCH/root/$bin"; then
			fail "/$bin holds the build machine's path $p: $(grep -ao -- "$p[^[:cntrl:]]*" "$SCRATCH/root/$bin" | head -3 | tr '\n' ' ')"
		fi
	done
done
for page in man8/nodeagentd.8 man8/nodeagentctl.8 man5/nodeagent.conf.5; do
	gzip -t "$SCRATCH/root/usr/share/man/$page.gz" || fail "$page.gz is not valid gzip"
done

# 5. Maintainer scripts against a fake systemd.
if ! can_fake_systemd; then
	[ "$failures" -eq 0 ] || finish
	skip "no private mount namespace here: maintainer script behaviour not checked (contents passed)"
fi
setup_fake_systemctl
C=$SCRATCH/control
run_maint "$C/postinst" running -- configure "" || fail "postinst configure failed: $(cat "$SCRATCH/maint.out")"
expect_calls "postinst configure (install, systemd running)" "daemon-reload"
grep -q "nodeagentd --check-config" "$SCRATCH/maint.out" || fail "postinst on a first install does not say what to do next"
run_maint "$C/postinst" running -- configure 0.0.9-1 || fail "postinst configure (upgrade) failed"
expect_calls "postinst configure (upgrade, systemd running)" "daemon-reload; try-restart nodeagent.service"
run_maint "$C/postinst" not-running -- configure "" || fail "postinst configure failed without systemd"
expect_calls "postinst configure (no systemd)" ""
run_maint "$C/postinst" running DPKG_ROOT="$SCRATCH/root" -- configure "" || fail "postinst with DPKG_ROOT failed"
expect_calls "postinst configure (DPKG_ROOT set)" ""
run_maint "$C/postinst" running -- abort-upgrade 0.1.0-1 || fail "postinst abort-upgrade failed"
expect_calls "postinst abort-upgrade" "daemon-reload"
run_maint "$C/prerm" running -- remove || fail "prerm remove failed"
expect_calls "prerm remove (systemd running)" "stop nodeagent.service"
run_maint "$C/prerm" running -- upgrade 0.2.0-1 || fail "prerm upgrade failed"
expect_calls "prerm upgrade" ""
run_maint "$C/prerm" not-running -- remove || fail "prerm remove failed without systemd"
expect_calls "prerm remove (no systemd)" ""
run_maint "$C/postrm" running -- remove || fail "postrm remove failed"
expect_calls "postrm remove (systemd running)" "daemon-reload"
run_maint "$C/postrm" not-running -- remove || fail "postrm remove failed without systemd"
expect_calls "postrm remove (no systemd)" ""
wants=$SCRATCH/root/etc/systemd/system/multi-user.target.wants
mkdir -p "$wants"
ln -s /lib/systemd/system/nodeagent.service "$wants/nodeagent.service"
run_maint "$C/postrm" running DPKG_ROOT="$SCRATCH/root" -- purge || fail "postrm purge failed"
expect_calls "postrm purge (DPKG_ROOT set)" ""
[ -L "$wants/nodeagent.service" ] && fail "postrm purge left the enablement link"
info "maintainer scripts: 12 cases checked"

finish
