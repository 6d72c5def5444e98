#!/bin/sh
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
  libwslay-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
