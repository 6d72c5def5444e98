#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The alerting rules shipped in packaging/monitoring/ (issue 24): `promtool check
# rules` (syntax, PromQL, templates, duplicates) and `promtool test rules` on
# alerts-test.yml, which fires each alert on its series and not on its near miss.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rules=$here/../../packaging/monitoring/prometheus-alerts.yml
command -v promtool >/dev/null || { echo "promtool is missing: scripts/deps.sh installs Debian's prometheus" >&2; exit 1; }
out=$(promtool check rules --lint=all --lint-fatal "$rules" 2>&1) || { echo "$out" >&2; exit 1; }
echo "$out"
# Every alert of the file has a unit test.
for a in $(sed -n 's/^ *- alert: *//p' "$rules"); do
  grep -q "alertname: $a\$" "$here/alerts-test.yml" || { echo "alert $a has no test in alerts-test.yml" >&2; exit 1; }
done
cd "$here"
promtool test rules alerts-test.yml
