#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Installs everything nodeagent needs to build, run its demo and pass its tests on
# Debian 12. Idempotent; needs root (or sudo).
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config libvirt-dev libvirt-daemon libvirt-daemon-driver-qemu
  libvirt-clients qemu-system-x86 qemu-utils libcurl4-openssl-dev libjansson-dev
  libnftnl-dev libmnl-dev libseccomp-dev libcmocka-dev nftables crun busybox-static
  iproute2 openssl curl python3 ca-certificates cpio xorriso zstd libzstd-dev
  prometheus-node-exporter rpm systemd man-db groff-base bsdextrautils libssl-dev
  libarchive-dev e2fsprogs docker-registry skopeo apache2-utils python3-cryptography
  haproxy dnsmasq-base xfsprogs
  libssh-dev libcrypt-dev openssh-client sshpass openssh-server
  libwslay-dev
  ansible-core python3-apt
  clang libclang-rt-14-dev
  genisoimage libtirpc-dev
  mmdebstrap umoci redis-tools postgresql-client
  prometheus ansible-lint inotify-tools lintian rpmlint devscripts stress-ng bash-completion"
# Before the install: haproxy's postinst would start the package's service (see below).
# prometheus is here for promtool and for the dashboard's test, which starts its own
# server on a free port: the package's service must not run (and scrape) beside it.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $SUDO systemctl mask haproxy.service >/dev/null 2>&1 || true
  $SUDO systemctl mask prometheus.service >/dev/null 2>&1 || true
fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing:$missing"
  $SUDO apt-get update -qq
  # openssh-server is only the SFTP benchmark's peer (started privately on loopback):
  # its package must not start sshd as a system service, so services stay down while
  # installing unless the machine already has a policy of its own.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    policy=1
  fi
  rc=0
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null || rc=$?
  [ -z "$policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
  [ "$rc" -eq 0 ] || exit "$rc"
fi
# haproxy: the agent runs its own instance with its own configuration
# (docs/app-routes.md); the package's service must never run beside it (masked
# before the install, whose postinst would start it, and stopped after).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $SUDO systemctl stop haproxy.service >/dev/null 2>&1 || true
  $SUDO systemctl stop prometheus.service >/dev/null 2>&1 || true
fi
