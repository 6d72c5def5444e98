#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The first README command: install what is needed, build, and run nodeagent's main
# job on its embedded defaults: the local test controller over real HTTPS, libvirt's
# in-process test:/// hypervisor, nftables in a private network namespace.
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh
if [ "$(id -u)" -eq 0 ]; then
  # Downloads happen here, before the private network namespace below (nothing resolves
  # in it): the real guest of the demo's last part (Debian's kernel and busybox, built
  # once per build tree; the demo says so and skips that part when it cannot be built).
  echo "demo: preparing the real guest (the first time downloads Debian's kernel: about a minute)" >&2
  /bin/sh tests/drivers/vm-real/guest.sh build/tests/drivers/vm-real/guest ||
    echo "demo: the real guest could not be built; its part will be skipped" >&2
  # The real database image (Redis from Debian's packages; about a minute the first time).
  echo "demo: preparing the redis image from Debian's packages (cached after the first time)" >&2
  /usr/bin/python3 tests/harness/realimages.py build redis >/dev/null ||
    echo "demo: the redis image could not be built; its part will be skipped" >&2
fi
if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
  # A private network namespace: the firewall never touches the host's ruleset,
  # and the controller and agent talk over the namespace's own loopback.
  exec unshare -n sh -c 'ip link set lo up && exec /usr/bin/python3 scripts/demo.py "$@"' demo "$@"
fi
echo "demo: not root (or no network namespaces): running without the firewall part" >&2
exec /usr/bin/python3 scripts/demo.py --no-netns "$@"
