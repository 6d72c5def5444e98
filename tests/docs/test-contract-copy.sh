#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# docs/agent-api.md is the contract with the central API, a copy of the steering
# repository's shared/protocol/AGENT-API.md. Where that file exists beside the checkout
# (../shared/protocol/AGENT-API.md, as on the project's own machines and in CI), the two
# must be identical, so they never drift apart silently. A checkout without it (a
# user's clone) has only the copy, and the test says so and passes.
set -eu
if [ "${1:-}" = "--planted" ]; then
	# The check itself: a planted difference must fail it.
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	printf 'a contract that changed\n' >"$tmp"
	if NA_CONTRACT_UPSTREAM=$tmp sh "$0" >/dev/null; then
		echo "FAIL: a planted difference passed the check"
		exit 1
	fi
	echo "ok: a planted difference fails the check"
	exit 0
fi
src=${NA_SOURCE_DIR:?}
ours=$src/docs/agent-api.md
theirs=${NA_CONTRACT_UPSTREAM:-$src/../shared/protocol/AGENT-API.md}
[ -f "$ours" ] || { echo "FAIL: $ours is missing"; exit 1; }
if [ ! -f "$theirs" ]; then
	echo "ok: no upstream contract at $theirs; docs/agent-api.md stands alone"
	exit 0
fi
if ! cmp -s "$ours" "$theirs"; then
	echo "FAIL: docs/agent-api.md differs from $theirs:"
	diff -u "$theirs" "$ours" | head -40
	echo "copy the upstream contract into docs/agent-api.md (and adapt the agent to what changed)"
	exit 1
fi
echo "ok: docs/agent-api.md is $theirs"
