#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The packages as a distribution's tools judge them (issue 24):
#  - lintian on the .deb: no error and no warning, with the overrides the package
#    ships (packaging/deb/lintian-overrides, each with its reason) and none unused;
#  - rpmlint on the .rpm with packaging/rpm/rpmlint.toml (each setting and filter with
#    its reason): 0 errors, 0 warnings;
#  - hardening-check on every ELF file of both packages: PIE, stack protector,
#    fortified functions, RELRO and BIND_NOW (-z now).  Control-flow protection is not
#    required: Debian 12's glibc start files carry no IBT/SHSTK note, so no program
#    linked there has one (the system's own sshd and curl fail it too).  The static
#    PIE nodeagent-monitor is misread by hardening-check (an ET_DYN without PHDR is
#    "a shared library", and only undefined symbols are searched for
#    __stack_chk_fail, which a static program defines itself), so for it PIE, the
#    stack protector and fortify are checked on the unstripped build (readelf,
#    objdump) instead;
#  - the DEP-5 copyright file and the changelog: /usr/share/doc/nodeagent/copyright
#    names GPL-2.0-or-later, changelog.Debian.gz's newest entry is the package's
#    version, and so is the .rpm's %changelog.
. "$(dirname "$0")/lib.sh"

for tool in lintian rpmlint hardening-check readelf objdump; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed (scripts/deps.sh installs it)"
done
deb=$(build_package DEB)
rpm=$(build_package RPM)
tree=$(dirname "$NA_PACKAGES_DIR")
make_scratch

# 1. lintian
rc=0
lintian --allow-root --fail-on error,warning "$deb" >"$SCRATCH/lintian.tags" 2>&1 || rc=$?
n_e=$(grep -c '^E: ' "$SCRATCH/lintian.tags" || true)
n_w=$(grep -c '^W: ' "$SCRATCH/lintian.tags" || true)
# (--show-overrides changes lintian's exit status: counted in a run of its own.)
n_o=$(lintian --allow-root --show-overrides "$deb" 2>&1 | grep -c '^O: ' || true)
info "lintian $(lintian --version | sed 's/^lintian //'): $n_e errors, $n_w warnings, $n_o overridden (exit $rc)"
if [ "$rc" -ne 0 ] || [ "$n_e" -ne 0 ] || [ "$n_w" -ne 0 ]; then
	fail "lintian:"
	sed 's/^/    /' "$SCRATCH/lintian.tags" >&2
fi
# Every override is used (an override lintian no longer needs must go), and says why.
grep -q 'unused-override' "$SCRATCH/lintian.tags" && fail "an unused lintian override: $(grep unused-override "$SCRATCH/lintian.tags")"
awk '/^nodeagent: / { if (!c) printf "override without a reason above it: %s\n", $0 } { c = /^#/ || (c && /^nodeagent: /) }' \
	"$PKG_SRC/deb/lintian-overrides" >"$SCRATCH/bare"
while read -r l; do fail "$l"; done <"$SCRATCH/bare"

# 2. rpmlint
rc=0
rpmlint -c "$PKG_SRC/rpm/rpmlint.toml" "$rpm" >"$SCRATCH/rpmlint" 2>&1 || rc=$?
summary=$(grep 'packages and .* specfiles checked' "$SCRATCH/rpmlint" || true)
info "rpmlint $(rpmlint --version 2>/dev/null): ${summary:-no summary} (exit $rc)"
case $summary in
*" 0 errors, 0 warnings"*) [ "$rc" -eq 0 ] || fail "rpmlint exit $rc" ;;
*)
	fail "rpmlint:"
	sed 's/^/    /' "$SCRATCH/rpmlint" >&2
	;;
esac
grep -q 'unused-rpmlintrc-filter' "$SCRATCH/rpmlint" && fail "an unused rpmlint filter"

# 3. hardening-check on every ELF file of both packages.
mkdir -p "$SCRATCH/deb" "$SCRATCH/rpm"
dpkg-deb -x "$deb" "$SCRATCH/deb"
(cd "$SCRATCH/rpm" && rpm2cpio "$rpm" | cpio -idm --quiet)
n=0
for f in $(find "$SCRATCH/deb" "$SCRATCH/rpm" -type f | sort); do
	head -c 4 "$f" | grep -q 'ELF' || continue
	n=$((n + 1))
	rel=${f#"$SCRATCH"/}
	case $f in
	*/nodeagent-monitor) opts="--nocfprotection --nopie --nostackprotector" ;;
	*) opts="--nocfprotection" ;;
	esac
	# shellcheck disable=SC2086
	if ! hardening-check $opts "$f" >"$SCRATCH/hc" 2>&1; then
		fail "hardening-check $rel:"
		sed 's/^/    /' "$SCRATCH/hc" >&2
	fi
	readelf -d "$f" | grep -q 'FLAGS.*NOW' || fail "$rel: not linked with -z now"
	readelf -lW "$f" | grep -q 'GNU_RELRO' || fail "$rel: no RELRO segment"
done
[ "$n" -ge 10 ] || fail "only $n ELF files in the two packages (5 each expected)"
info "hardening-check: $n ELF files (both packages), PIE, stack protector, fortify, RELRO, BIND_NOW"

# The monitor: a static PIE with the stack protector and fortified calls (unstripped build).
mon=$tree/monitor/nodeagent-monitor
[ -f "$mon" ] || die "$mon not found (the packaged build's monitor)"
readelf -hW "$mon" | grep -q 'Type: *DYN' || fail "nodeagent-monitor: not position-independent (ET_DYN)"
readelf -lW "$mon" | grep -q 'INTERP' && fail "nodeagent-monitor: has an interpreter: not static"
readelf -dW "$mon" | grep -q 'NEEDED' && fail "nodeagent-monitor: needs shared libraries: not static"
readelf -dW "$mon" | grep -q 'FLAGS_1.*PIE' || fail "nodeagent-monitor: no DF_1_PIE flag"
objdump -d --no-show-raw-insn "$mon" >"$SCRATCH/mon.dis"
# Calls from the monitor's own functions (those its object files define: monitor/,
# ring/, CRC-32C) to the guards, not libc's.
find "$tree/monitor/CMakeFiles/nodeagent-monitor.dir" -name '*.o' -exec nm --defined-only {} + |
	awk '$2 ~ /^[Tt]$/ { print $3 }' | sort -u >"$SCRATCH/mon.own"
[ -s "$SCRATCH/mon.own" ] || die "no function found in the monitor's object files under $tree/monitor"
awk 'FNR == NR { own[$1] = 1; next }
	/^[0-9a-f]+ <.*>:$/ { name = $2; gsub(/[<>:]/, "", name); sub(/\..*/, "", name); mine = (name in own); next }
	mine && /call.*<__stack_chk_fail/ { sp++ } mine && /call.*<_*[a-z]+_chk>/ { fy++ }
	END { printf "%d %d\n", sp, fy }' "$SCRATCH/mon.own" "$SCRATCH/mon.dis" >"$SCRATCH/mon.counts"
read -r sp fy <"$SCRATCH/mon.counts"
[ "$sp" -gt 0 ] || fail "nodeagent-monitor: no call of __stack_chk_fail from its own code (stack protector)"
[ "$fy" -gt 0 ] || fail "nodeagent-monitor: no fortified (__*_chk) call from its own code"
info "nodeagent-monitor: static PIE, $sp stack protector checks and $fy fortified calls in its own code"

# 4. Copyright and changelogs.
version=$(dpkg-deb -f "$deb" Version)
cr=$SCRATCH/deb/usr/share/doc/nodeagent/copyright
[ -f "$cr" ] || fail "no /usr/share/doc/nodeagent/copyright in the .deb"
[ -f "$cr" ] && { grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' "$cr" &&
	grep -q '^License: GPL-2.0-or-later' "$cr"; } || fail "the copyright file is not DEP-5 with GPL-2.0-or-later"
top=$(zcat "$SCRATCH/deb/usr/share/doc/nodeagent/changelog.Debian.gz" 2>/dev/null | head -n 1)
[ "$top" = "nodeagent ($version) unstable; urgency=medium" ] || fail "changelog.Debian.gz starts '$top', package $version"
rtop=$(rpm -qp --changelog "$rpm" 2>/dev/null | head -n 1)
rver=$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$rpm" 2>/dev/null)
case $rtop in *" - $rver") ;; *) fail "the .rpm's %changelog starts '$rtop', package $rver" ;; esac
[ "$(rpm -qp --qf '%{LICENSE}' "$rpm")" = GPL-2.0-or-later ] || fail "the .rpm's License: $(rpm -qp --qf '%{LICENSE}' "$rpm")"
info "copyright (DEP-5, GPL-2.0-or-later) and changelogs at $version / $rver"

finish
