#!/usr/bin/env bash
# The plain Debian image of one suite, docker.io/library/debian:<suite>, made from an
# mmdebstrap rootfs of Debian's mirror (cached under ${SLURM_STACK_CACHE:-/var/cache/slurm-stack})
# rather than pulled from a registry. The project's images build on it, and the hybrid tests
# run it as a host outside the cluster.
#   images/debian-base.sh forky|trixie
set -euo pipefail

suite=${1:?usage: debian-base.sh forky|trixie}
cache=${SLURM_STACK_CACHE:-/var/cache/slurm-stack}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

rootfs="$cache/rootfs-$suite.tar"
if [ ! -s "$rootfs" ]; then
  mkdir -p "$cache"
  echo "debian-base.sh: creating the $suite base rootfs ($rootfs)" >&2
  # The mirror may serve Release files older than their Valid-Until: accept them.
  # --format: the name ends in .partial, from which mmdebstrap would guess a directory.
  mmdebstrap --variant=minbase --mode=root --format=tar --include=ca-certificates \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    "$suite" "$rootfs.partial" "deb $mirror $suite main"
  mv "$rootfs.partial" "$rootfs"
fi
if ! podman image exists "docker.io/library/debian:$suite"; then
  podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$rootfs" "docker.io/library/debian:$suite" >/dev/null
fi
echo "docker.io/library/debian:$suite"
