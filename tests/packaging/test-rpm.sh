#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The .rpm built by packaging/build-packages.sh, read back with rpm -qp:
#  - header: name, version, not relocatable (the unit names /usr/sbin/nodeagentd);
#  - files (-qlp and per-file modes/flags): every file at its place with its mode,
#    the unit in /usr/lib/systemd/system, the state directory 0711, nothing else
#    and no directory the base system owns;
#  - --configfiles: exactly /etc/nodeagent/nodeagent.conf, as %config(noreplace);
#  - requires: the libraries the binaries link to (found by rpm) and the programs
#    the VM driver runs;
#  - the scriptlets call systemctl daemon-reload only when systemd runs (fake
#    systemctl, private mount namespace);
#  - installed into a scratch root with rpm --root: a modified configuration survives
#    a reinstall and is kept as .rpmsave on erase; a non-empty state directory stays.
. "$(dirname "$0")/lib.sh"

for tool in cpack rpmbuild rpm; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
: "${NA_NODEAGENTD:?NA_NODEAGENTD not set}"
make_scratch

rpmf=$(build_package RPM)
info "built $(basename "$rpmf") ($(wc -c <"$rpmf") bytes)"
version=$("$NA_NODEAGENTD" --version | awk '{ print $2 }')
q() { rpm -qp "$@" "$rpmf" 2>/dev/null; }

# 1. Header.
[ "$(q --qf '%{NAME}')" = nodeagent ] || fail "Name: $(q --qf '%{NAME}')"
[ "$(q --qf '%{VERSION}')" = "$version" ] || fail "Version: $(q --qf '%{VERSION}'), want $version"
[ -n "$(q --qf '%{RELEASE}')" ] || fail "no Release"
q --qf '%{PREFIXES}' | grep -q '(none)' || fail "the package is relocatable (Prefixes: $(q --qf '%{PREFIXES}'))"
q --qf '%{DESCRIPTION}' | grep -q 'nodeagent runs on every hypervisor' || fail "Description is CPack's default"

# 2. Files.
q --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]' |
	awk '{ if (NF == 3) print $1, $2, "-", $3; else print }' >"$SCRATCH/files"
expect_file() { # MODE PATH [FLAGS]
	line=$(awk -v p="$2" '$4 == p' "$SCRATCH/files")
	if [ -z "$line" ]; then
		fail "$2 missing from the .rpm"
		return
	fi
	set -- "$1" "$2" "${3:-}" $line
	[ "$4" = "$1" ] || fail "$2: mode $4, want $1"
	[ "$5" = root:root ] || fail "$2: owner $5, want root:root"
	if [ -n "$3" ]; then [ "$6" = "$3" ] || fail "$2: flags '$6', want '$3'"; fi
}
expect_file -rwxr-xr-x /usr/sbin/nodeagentd
expect_file -rwxr-xr-x /usr/bin/nodeagentctl
expect_file -rw-r--r-- /usr/lib/nodeagent/nodeagent-vm-libvirt.so
expect_file -rwxr-xr-x /usr/libexec/nodeagent/nodeagent-monitor
expect_file -rwxr-xr-x /usr/libexec/nodeagent/nodeagent-sftpd
expect_file -rw-r--r-- /etc/nodeagent/nodeagent.conf cn
expect_file drwxr-xr-x /etc/nodeagent
expect_file -rw-r--r-- /usr/lib/systemd/system/nodeagent.service
expect_file drwx--x--x /var/lib/nodeagent
expect_file -rw-r--r-- /usr/share/man/man8/nodeagentd.8.gz
expect_file -rw-r--r-- /usr/share/man/man8/nodeagentctl.8.gz
expect_file -rw-r--r-- /usr/share/man/man5/nodeagent.conf.5.gz
expect_file -rw-r--r-- /usr/share/doc/nodeagent/examples/monitoring/grafana-dashboard.json
expect_file -rw-r--r-- /usr/share/doc/nodeagent/examples/monitoring/prometheus-alerts.yml
expect_file -rw-r--r-- /usr/share/doc/nodeagent/copyright
expect_file -rw-r--r-- /usr/share/bash-completion/completions/nodeagentctl
q -l >"$SCRATCH/list"
while read -r p; do
	case $p in
	/etc/nodeagent | /etc/nodeagent/nodeagent.conf | /usr/sbin/nodeagentd | /usr/bin/nodeagentctl | \
		/usr/libexec/nodeagent | /usr/libexec/nodeagent/nodeagent-monitor | /usr/libexec/nodeagent/nodeagent-sftpd | \
		/usr/lib/systemd/system/nodeagent.service | /var/lib/nodeagent | /usr/share/man/man[58]/*.gz | \
		/usr/share/doc/nodeagent | /usr/share/doc/nodeagent/* | /usr/lib/.build-id | /usr/lib/.build-id/* | \
		/usr/lib/nodeagent | /usr/lib/nodeagent/nodeagent-vm-libvirt.so | \
		/usr/share/bash-completion/completions/nodeagentctl) ;;
	*) fail "unexpected path in the .rpm (a directory of the base system, or a stray file): $p" ;;
	esac
done <"$SCRATCH/list"
grep -q 'changelog.Debian\|/lintian/' "$SCRATCH/list" && fail "the .rpm carries what only the .deb needs: $(grep 'changelog.Debian\|/lintian/' "$SCRATCH/list")"
info "$(wc -l <"$SCRATCH/list") paths"

# 3. Configuration files.
[ "$(q --configfiles)" = /etc/nodeagent/nodeagent.conf ] ||
	fail "--configfiles: '$(q --configfiles | tr '\n' ' ')', want /etc/nodeagent/nodeagent.conf"

# 4. Requires.
q --requires | sed 's/ .*//' | sort -u >"$SCRATCH/requires"
for r in qemu-img 'libarchive.so.13()(64bit)'; do # libarchive: dlopen()ed, no NEEDED entry
	grep -qx "$r" "$SCRATCH/requires" || fail "Requires lacks $r"
done
# The libraries the packaged binaries link (not the test build's: a sanitizer build
# links libasan, which the package rightly does not require).
mkdir "$SCRATCH/rpm-root"
(cd "$SCRATCH/rpm-root" && rpm2cpio "$rpmf" | cpio -idm --quiet) || die "cannot unpack $rpmf"
for bin in "$SCRATCH/rpm-root/usr/sbin/nodeagentd" "$SCRATCH/rpm-root/usr/bin/nodeagentctl" \
	"$SCRATCH/rpm-root/usr/lib/nodeagent/nodeagent-vm-libvirt.so"; do
	for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
		grep -qx "$lib()(64bit)" "$SCRATCH/requires" || grep -qx "$lib" "$SCRATCH/requires" ||
			fail "Requires lacks $lib (needed by $(basename "$bin"))"
	done
done
info "Requires: $(grep -v '^rpmlib\|^rtld\|GLIBC_' "$SCRATCH/requires" | tr '\n' ' ')"

# 5. Scriptlets.
if can_fake_systemd; then
	setup_fake_systemctl
	for tag in POSTIN PREUN POSTUN; do
		q --qf "%{$tag}" >"$SCRATCH/$tag.sh"
		[ -s "$SCRATCH/$tag.sh" ] || fail "no %{$tag} scriptlet"
		sh -n "$SCRATCH/$tag.sh" || fail "%{$tag} is not valid sh"
	done
	S=$SCRATCH
	run_maint "$S/POSTIN.sh" running -- 1 || fail "%post 1 failed"
	expect_calls "%post install (systemd running)" "daemon-reload"
	grep -q "nodeagentd --check-config" "$SCRATCH/maint.out" || fail "%post on install does not say what to do next"
	run_maint "$S/POSTIN.sh" running -- 2 || fail "%post 2 failed"
	expect_calls "%post upgrade" "daemon-reload"
	run_maint "$S/POSTIN.sh" not-running -- 1 || fail "%post 1 failed without systemd"
	expect_calls "%post install (no systemd)" ""
	run_maint "$S/PREUN.sh" running -- 0 || fail "%preun 0 failed"
	expect_calls "%preun erase (systemd running)" "--no-reload disable nodeagent.service; stop nodeagent.service"
	run_maint "$S/PREUN.sh" not-running -- 0 || fail "%preun 0 failed without systemd"
	expect_calls "%preun erase (no systemd)" "--no-reload disable nodeagent.service"
	run_maint "$S/PREUN.sh" running -- 1 || fail "%preun 1 failed"
	expect_calls "%preun upgrade" ""
	run_maint "$S/POSTUN.sh" running -- 0 || fail "%postun 0 failed"
	expect_calls "%postun erase (systemd running)" "daemon-reload"
	run_maint "$S/POSTUN.sh" running -- 1 || fail "%postun 1 failed"
	expect_calls "%postun upgrade (systemd running)" "daemon-reload; try-restart nodeagent.service"
	run_maint "$S/POSTUN.sh" not-running -- 1 || fail "%postun 1 failed without systemd"
	expect_calls "%postun upgrade (no systemd)" ""
	info "scriptlets: 9 cases checked"
else
	info "no private mount namespace: scriptlet behaviour not checked"
	nons=1
fi

# 6. Install, reinstall with a modified configuration, erase, in a scratch root.
R=$SCRATCH/root
mkdir -p "$R"
rpm_root() { rpm --root "$R" "$@" 2>>"$SCRATCH/rpm.err"; }
rpm_root --initdb || die "rpm --initdb: $(cat "$SCRATCH/rpm.err")"
rpm_root -i --nodeps --noscripts "$rpmf" || fail "rpm -i: $(cat "$SCRATCH/rpm.err")"
[ -x "$R/usr/sbin/nodeagentd" ] || fail "rpm -i did not install /usr/sbin/nodeagentd"
[ "$(stat -c %a "$R/var/lib/nodeagent")" = 711 ] || fail "installed /var/lib/nodeagent has mode $(stat -c %a "$R/var/lib/nodeagent")"
echo "# local change" >>"$R/etc/nodeagent/nodeagent.conf"
rpm_root -U --replacepkgs --nodeps --noscripts "$rpmf" || fail "rpm -U --replacepkgs: $(cat "$SCRATCH/rpm.err")"
tail -n 1 "$R/etc/nodeagent/nodeagent.conf" | grep -qx "# local change" || fail "a reinstall replaced the modified configuration"
touch "$R/var/lib/nodeagent/disk.qcow2"
rpm_root -e --nodeps --noscripts nodeagent || fail "rpm -e: $(cat "$SCRATCH/rpm.err")"
[ -e "$R/usr/sbin/nodeagentd" ] && fail "rpm -e left /usr/sbin/nodeagentd"
[ -f "$R/etc/nodeagent/nodeagent.conf.rpmsave" ] || fail "rpm -e did not keep the modified configuration as .rpmsave"
[ -f "$R/var/lib/nodeagent/disk.qcow2" ] || fail "rpm -e removed a file in the state directory"
info "rpm --root install / reinstall / erase: configuration and state kept"

if [ "${nons:-0}" = 1 ]; then
	[ "$failures" -eq 0 ] || finish
	skip "scriptlet behaviour not checked (no private mount namespace); everything else passed"
fi
finish
