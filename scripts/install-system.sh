#!/usr/bin/env bash
# Install the Debian packages stortune drives (fio, mkfs tools). Idempotent: does nothing when
# everything is present, so `make test` stays fast on a machine that already has them.
set -euo pipefail
packages=(fio xfsprogs btrfs-progs e2fsprogs util-linux openmpi-bin libopenmpi-dev)
packages+=(postgresql rocksdb-tools)  # the pgbench and db_bench workloads
packages+=(ceph-mon ceph-osd ceph-mgr ceph-common)  # the ceph target
packages+=(ceph-mds ceph-fuse attr prometheus-node-exporter)  # the cephfs target (attr: getfattr)
packages+=(libfuse2)  # the simulated disk of `stortune.profile.simdisk` (fusepy loads it)
packages+=(chromium)  # the report's browser test
packages+=(udev)  # udevadm verify: the udev rule `stortune recommend` writes
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "stortune: missing Debian packages: ${missing[*]} (run as root, or install them yourself)" >&2
  exit 0
fi
echo "stortune: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
