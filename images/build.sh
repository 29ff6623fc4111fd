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
./debian-base.sh "$suite" >/dev/null

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
