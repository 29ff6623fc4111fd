#!/usr/bin/env bash
# Build every slurm-stack image for one Debian suite with podman (no registry needed).
#   images/build.sh [forky|trixie]
# Tags match the stack config default: localhost/slurm-stack/<component>:<slurmVersion>-<revision>.
# The Debian base comes from an mmdebstrap rootfs tarball cached under
# ${SLURM_STACK_CACHE:-/var/cache/slurm-stack}; nothing is pulled from a registry.
set -euo pipefail
cd "$(dirname "$0")"

suite=${1:-forky}
case "$suite" in
  forky) slurm_version=26.05 ;;
  trixie) slurm_version=24.11 ;;
  *) echo "build.sh: suite must be forky (Slurm 26.05) or trixie (24.11)" >&2; exit 2 ;;
esac
revision=$(sed -n 's/^IMAGE_REVISION = "\(.*\)"$/\1/p' ../slurm_stack/spec/models.py)
tag="$slurm_version-$revision"
registry=${SLURM_STACK_REGISTRY:-localhost/slurm-stack}
cache=${SLURM_STACK_CACHE:-/var/cache/slurm-stack}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

rootfs="$cache/rootfs-$suite.tar"
if [ ! -s "$rootfs" ]; then
  mkdir -p "$cache"
  echo "build.sh: creating the $suite base rootfs ($rootfs)" >&2
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

base="$registry/base:$tag"
podman build --pull=never --build-arg SUITE="$suite" -t "$base" base
for component in accounting munge rest; do
  podman build --pull=never --build-arg BASE="$base" -t "$registry/$component:$tag" "$component"
done
# These copy the chroot plugin or the pod-side package, so their context is the repository root.
for component in controller worker login ops; do
  podman build --pull=never --build-arg BASE="$base" -t "$registry/$component:$tag" \
    -f "$component/Containerfile" ..
done
podman build --pull=never --build-arg BASE="$base" -t "$registry/sssd:$tag" sssd
podman build --pull=never --build-arg SUITE="$suite" -t "$registry/jail:$tag" -f jail/Containerfile .
podman build --pull=never --build-arg SUITE="$suite" -t "$registry/mariadb:$tag" mariadb
echo "build.sh: built $registry/{base,controller,worker,login,accounting,munge,rest,ops,sssd,jail,mariadb}:$tag" >&2
