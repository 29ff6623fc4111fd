#!/bin/bash
# Build what tests/gpu/run.sh needs on a GPU machine that has no network, no Slurm and no
# podman, into build/gpu-bundle (ignored by git; carry it there, about 40 MB):
#
#   rootfs.tar.xz  the worker image's filesystem (slurmd, our entrypoint, the chroot plugin,
#                  the health checks) plus the controller image's slurmctld package, without
#                  documentation and translations; run.sh unpacks it as the node's root and a
#                  copy of it as the jail
#   configs/       tests/gpu/Pulumi.gpu.yaml rendered by the program (slurm.conf, gres.conf,
#                  plugstack.conf, cgroup.conf)
#   worker.env     the slurmd container's environment from the rendered StatefulSet
#   cuda-probe     a CUDA driver-API program (tests/gpu/cuda_probe.c, built here)
#
# Usage (as root, on this machine, after `bash scripts/setup-podman.sh`):
#   bash tests/gpu/build-bundle.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-bundle}
python=${PYTHON:-.venv/bin/python}
version=$(sed -n 's/^ *slurmVersion: "\(.*\)"/\1/p' tests/gpu/Pulumi.gpu.yaml)
tag="$version-$($python -c 'from slurm_stack.spec.models import IMAGE_REVISION; print(IMAGE_REVISION)')"

log() { echo "build-bundle: $*" >&2; }

rm -rf "$out"
mkdir -p "$out"
log "images for Slurm $version (built if their inputs changed)"
$python -c "from slurm_stack.sandbox.images import ensure_images; ensure_images('$version')"

log "rendering tests/gpu/Pulumi.gpu.yaml"
$python -m slurm_stack render --config tests/gpu/Pulumi.gpu.yaml --out "$out/render" >/dev/null
mkdir "$out/configs"
cp "$out"/render/configs/{slurm.conf,gres.conf,plugstack.conf,cgroup.conf} "$out/configs/"
$python - "$out/render/manifests.yaml" >"$out/worker.env" <<'PY'
import shlex
import sys

import yaml

for manifest in yaml.safe_load_all(open(sys.argv[1])):
    if manifest and manifest["kind"] == "StatefulSet" and manifest["metadata"]["name"] == "gpu-gpu":
        [slurmd] = manifest["spec"]["template"]["spec"]["containers"]
        for variable in slurmd["env"]:
            print(f"export {variable['name']}={shlex.quote(variable['value'])}")
PY
rm -rf "$out/render"

log "root filesystem from localhost/slurm-stack/worker:$tag and slurmctld"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
container=$(podman create "localhost/slurm-stack/worker:$tag")
podman export "$container" | tar -C "$scratch" -xf -
podman rm "$container" >/dev/null
podman run --rm --entrypoint sh "localhost/slurm-stack/controller:$tag" -c \
  '{ dpkg -L slurmctld; echo /usr/sbin/slurmctld; } |
   while read -r f; do [ -f "$f" ] && echo "$f"; done | tar -chf - -T -' |
  tar -C "$scratch" -xf -  # slurmctld's files, its alternatives link as the file it names
rm -rf "$scratch"/usr/share/{doc,man,info,locale} "$scratch"/var/lib/apt "$scratch"/var/cache/apt
rm -rf "$scratch"/usr/lib/python3.*/{test,idlelib,tkinter,turtledemo,ensurepip,pydoc_data}
chmod 0755 "$scratch"  # the root directory itself: mktemp made it private
tar -C "$scratch" -cf - . | xz -9 -T2 >"$out/rootfs.tar.xz"

log "cuda-probe"
gcc -O2 -Wall -Wextra -Werror -o "$out/cuda-probe" tests/gpu/cuda_probe.c -ldl
cp images/fake-gpu/nvidia-smi "$out/fake-nvidia-smi"
du -sh "$out" >&2
