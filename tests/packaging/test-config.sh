#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The shipped default configuration (packaging/nodeagent.conf):
#  - lists every key of agent/base/config.c once, in its section: required keys active with
#    a placeholder, the others commented out ("#key = value") with their default;
#  - as shipped, `nodeagentd --check-config` fails (exit 2) with exactly one
#    FILE:LINE: key: reason line per placeholder, at the placeholder's line;
#  - with the placeholders replaced it passes, and it still passes with every
#    commented-out line enabled (the documented values are all valid).
. "$(dirname "$0")/lib.sh"

: "${NA_NODEAGENTD:?NA_NODEAGENTD not set}"
[ -x "$NA_NODEAGENTD" ] || die "$NA_NODEAGENTD is not built"
CONF=$PKG_SRC/nodeagent.conf
make_scratch

# "section key state value line" for every key line of the file (state: set|commented).
conf_lines() {
	awk '
	/^[[:space:]]*\[[a-z_]+\][[:space:]]*$/ { s = $0; gsub(/[][[:space:]]/, "", s); next }
	/^#[a-z0-9_]+ = / { k = substr($1, 2); v = $0; sub(/^#[a-z0-9_]+ = /, "", v); print s, k, "commented", v, NR; next }
	/^[a-z0-9_]+[[:space:]]*=/ { k = $1; sub(/=.*/, "", k); v = $0; sub(/^[^=]*=[[:space:]]*/, "", v); print s, k, "set", v, NR; next }
	' "$1"
}

config_keys >"$SCRATCH/keys"
conf_lines "$CONF" >"$SCRATCH/lines"
info "$(wc -l <"$SCRATCH/keys") keys in agent/base/config.c, $(wc -l <"$SCRATCH/lines") key lines in nodeagent.conf"

# 1. Every key present once, in the right form, with the right default.
while read -r section key required def; do
	n=$(awk -v s="$section" -v k="$key" '$1 == s && $2 == k' "$SCRATCH/lines" | wc -l)
	if [ "$n" -ne 1 ]; then
		fail "[$section] $key appears $n times in nodeagent.conf (want exactly once)"
		continue
	fi
	set -- $(awk -v s="$section" -v k="$key" '$1 == s && $2 == k { print $3, $4 }' "$SCRATCH/lines")
	state=$1
	value=${2:-}
	if [ "$required" = true ]; then
		[ "$state" = set ] || fail "[$section] $key is required: it must be set (with a placeholder), not commented out"
		case $value in
		REPLACE-*) ;;
		*) fail "[$section] $key: placeholder should start with REPLACE-, is '$value'" ;;
		esac
	else
		[ "$state" = commented ] || fail "[$section] $key is optional: it must be commented out (#$key = ...)"
		if [ "$def" != NULL ]; then
			want=$(printf '%s' "$def" | sed 's/^"//; s/"$//')
			[ "$value" = "$want" ] || fail "[$section] $key: shows '$value', the default in agent/base/config.c is '$want'"
		fi
	fi
	# A comment right above the key says what it is.
	line=$(awk -v s="$section" -v k="$key" '$1 == s && $2 == k { print $5 }' "$SCRATCH/lines")
	above=$(sed -n "$((line - 1))p" "$CONF")
	case $above in
	"# "* | "#"[a-z]*" = "*) ;;
	*) fail "[$section] $key (line $line) has no comment above it" ;;
	esac
done <"$SCRATCH/keys"
# ... and nothing else.
while read -r section key state value line; do
	grep -q "^$section $key " "$SCRATCH/keys" || fail "nodeagent.conf:$line: [$section] $key is not a key of agent/base/config.c"
done <"$SCRATCH/lines"

# 2. As shipped: one problem per placeholder, at its line, exit 2.
cp "$CONF" "$SCRATCH/shipped.conf"
set +e
"$NA_NODEAGENTD" -c "$SCRATCH/shipped.conf" --check-config >"$SCRATCH/out" 2>"$SCRATCH/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--check-config on the shipped file: exit $rc, want 2"
[ -s "$SCRATCH/out" ] && fail "--check-config on the shipped file printed on stdout: $(cat "$SCRATCH/out")"
awk '$3 == "set" { print $2, $5 }' "$SCRATCH/lines" >"$SCRATCH/placeholders"
nplace=$(wc -l <"$SCRATCH/placeholders")
nerr=$(wc -l <"$SCRATCH/err")
[ "$nerr" -eq "$nplace" ] || fail "--check-config printed $nerr line(s), want $nplace (one per placeholder)"
while read -r key line; do
	grep -q "^$SCRATCH/shipped.conf:$line: $key: ." "$SCRATCH/err" ||
		fail "--check-config did not report '$SCRATCH/shipped.conf:$line: $key: <reason>'"
done <"$SCRATCH/placeholders"
info "as shipped, --check-config says (exit $rc):"
sed 's/^/    /' "$SCRATCH/err"

# 3. Placeholders replaced: valid.
printf 'the-node-token\n' >"$SCRATCH/token"
chmod 600 "$SCRATCH/token"
sed -e 's|^node_id = .*|node_id = 0b7e6a52-3f1d-4c2a-9e8b-5d4c3b2a1f00|' \
	-e 's|^url = .*|url = https://api.example.net/agent/v1|' \
	-e "s|^token_file = .*|token_file = $SCRATCH/token|" "$CONF" >"$SCRATCH/filled.conf"
if "$NA_NODEAGENTD" -c "$SCRATCH/filled.conf" --check-config >"$SCRATCH/out" 2>"$SCRATCH/err"; then
	grep -qx "$SCRATCH/filled.conf: ok" "$SCRATCH/out" || fail "--check-config passed but printed: $(cat "$SCRATCH/out")"
else
	fail "--check-config with the placeholders replaced failed: $(cat "$SCRATCH/err")"
fi
grep -q '^REPLACE-\|= REPLACE-' "$SCRATCH/filled.conf" && fail "a placeholder is left that the test does not know how to fill"

# 4. Every commented-out key enabled as documented: still valid.
sed 's/^#\([a-z0-9_]* = \)/\1/' "$SCRATCH/filled.conf" >"$SCRATCH/all.conf"
enabled=$(grep -c '^[a-z0-9_]* = ' "$SCRATCH/all.conf")
"$NA_NODEAGENTD" -c "$SCRATCH/all.conf" --check-config >"$SCRATCH/out" 2>"$SCRATCH/err" ||
	fail "--check-config with every documented value enabled failed: $(cat "$SCRATCH/err")"
info "with every one of the $enabled keys enabled as documented: $(cat "$SCRATCH/out")"

# 5. The token check applies to the documented token file: group-readable is refused.
chmod 640 "$SCRATCH/token"
if "$NA_NODEAGENTD" -c "$SCRATCH/filled.conf" --check-config >/dev/null 2>"$SCRATCH/err"; then
	fail "--check-config accepted a token file of mode 0640"
fi
grep -q ": token_file: " "$SCRATCH/err" || fail "a 0640 token file was not reported against token_file: $(cat "$SCRATCH/err")"

finish
