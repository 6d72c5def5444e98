#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# nodeagentctl's help and its bash completion (issue 24, item 7):
#  - every command the general --help lists answers `COMMAND --help` and `help COMMAND`
#    with its own usage (exit 0, the same text), and each of its options the help names
#    is an option nodeagentctl takes; an unknown command's help is a usage error (2);
#  - packaging/nodeagentctl.bash, run through bash-completion as bash would: the
#    commands offered are exactly those of --help, each command's options (from its
#    --help) are offered after it, --config completes files, and `logs` offers the app
#    ids that `nodeagentctl apps --json` prints (a stand-in answers here);
#  - docs/man/nodeagentctl.8 names every command.
# Needs bash-completion (scripts/deps.sh); without it the completion part is skipped.
set -u
ctl=$1
src=${NA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
comp=$src/packaging/nodeagentctl.bash
man=$src/docs/man/nodeagentctl.8
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

"$ctl" --help >"$t/help" 2>&1 || fail "--help: exit $?"
cmds=$(sed -n '/^Commands:/,/^Options/{s/^  \([a-z]\+\).*/\1/p}' "$t/help")
[ "$(echo $cmds)" = "status jobs run apps logs drain help" ] || fail "commands listed by --help: $(echo $cmds)"
for c in $cmds; do
	"$ctl" "$c" --help >"$t/$c.help" 2>&1 || fail "$c --help: exit $?"
	"$ctl" help "$c" >"$t/$c.help2" 2>&1 || fail "help $c: exit $?"
	cmp -s "$t/$c.help" "$t/$c.help2" || fail "$c --help and help $c differ"
	head -n 1 "$t/$c.help" | grep -q "^Usage: nodeagentctl .* $c\b" || fail "$c --help: $(head -n 1 "$t/$c.help")"
	[ "$(wc -l <"$t/$c.help")" -ge 2 ] || fail "$c --help says nothing beyond its usage line"
	grep -q "^\.B $c\b\|^\.BI $c\b\|^\.BR $c\b" "$man" || fail "$c not in $man"
	# Each long option its help names is taken: a usage error names another reason.
	for o in $(grep -o -- '--[a-z]\+' "$t/$c.help" | sort -u); do
		"$ctl" -s "$t/none.sock" "$c" "$o" x >"$t/opt" 2>&1
		! grep -q "unrecognized option\|invalid option" "$t/opt" || fail "$c --help names $o, which is refused: $(cat "$t/opt")"
	done
done
"$ctl" nope --help >"$t/out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q 'unknown command "nope"' "$t/out" || fail "nope --help: exit $rc: $(head -n 1 "$t/out")"
"$ctl" help run extra >/dev/null 2>&1
[ $? -eq 2 ] || fail "help run extra: not a usage error"
"$ctl" --help | grep -q -- 'COMMAND --help' || fail "--help does not say COMMAND --help"
grep -q -- '\\-\\-help' "$man" && grep -q '^\.B help\|^\.BI help' "$man" || fail "$man does not document help/--help"
grep -q 'bash\\-completion/completions/nodeagentctl' "$man" || fail "$man does not name the bash completion"

if [ ! -f /usr/share/bash-completion/bash_completion ]; then
	echo "bash-completion not installed: completion not exercised"
	[ "$failures" -eq 0 ] && exit 77
	exit 1
fi
# A stand-in nodeagentctl for `apps --json` (what the completion asks of the agent).
cat >"$t/fakectl" <<'EOS'
#!/bin/sh
case "$*" in
*"apps --json") printf '{\n  "ok": true,\n  "apps": [\n    {\n      "id": "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",\n      "state": "running"\n    },\n    {\n      "id": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"\n    }\n  ]\n}\n' ;;
esac
EOS
chmod +x "$t/fakectl"
touch "$t/node.conf"
complete_line() { # LINE (the cursor at its end): the candidates, sorted, on one line
	bash --norc --noprofile -c '
		. /usr/share/bash-completion/bash_completion
		. "$1"
		COMP_LINE=$2
		read -r -a COMP_WORDS <<<"$COMP_LINE"
		[ "${COMP_LINE: -1}" = " " ] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_POINT=${#COMP_LINE}
		_nodeagentctl
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$comp" "$1"
}
got=$(complete_line "nodeagentctl ")
[ "$got" = "$(printf '%s\n' $cmds | sort | tr '\n' ' ')" ] || fail "commands completed: '$got'"
got=$(complete_line "nodeagentctl he")
[ "$got" = "help " ] || fail "'he' completed to '$got'"
for c in $cmds; do
	[ "$c" = help ] && continue
	got=$(complete_line "nodeagentctl $c -")
	for o in $(grep -o -- '--[a-z]\+' "$t/$c.help" | sort -u) --config --socket --help; do
		case " $got " in *" $o "*) ;; *) fail "nodeagentctl $c -<TAB> does not offer $o (offers: $got)" ;; esac
	done
done
got=$(complete_line "nodeagentctl -c $t/no")
[ "$got" = "$t/node.conf " ] || fail "--config completed to '$got'"
got=$(complete_line "$t/fakectl -s /run/x.sock logs ")
[ "$got" = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d 6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b " ] || fail "logs completed to '$got'"
got=$(complete_line "nodeagentctl help ")
[ "$got" = "$(printf '%s\n' $cmds | sort | tr '\n' ' ')" ] || fail "help completed: '$got'"

[ "$failures" -eq 0 ] || exit 1
echo "nodeagentctl: --help for $(echo $cmds | wc -w) commands; bash completion of commands, options, files and app ids"
