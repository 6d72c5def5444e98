#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The first README command: install what is needed, build, and run nodeagent's main
# job on its embedded defaults: the local test controller over real HTTPS, libvirt's
# in-process test:/// hypervisor, nftables in a private network namespace.
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
  # A private network namespace: the firewall never touches the host's ruleset,
  # and the controller and agent talk over the namespace's own loopback.
  exec unshare -n sh -c 'ip link set lo up && exec /usr/bin/python3 scripts/demo.py "$@"' demo "$@"
fi
echo "demo: not root (or no network namespaces): running without the firewall part" >&2
exec /usr/bin/python3 scripts/demo.py --no-netns "$@"
