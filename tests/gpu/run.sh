#!/bin/bash
# The real-GPU test target. It needs a machine with NVIDIA GPUs and their driver, and root. It
# needs no Kubernetes, podman, Slurm or network. It boots a minimal real Slurm from the bundle
# that tests/gpu/build-bundle.sh built: munged, slurmctld and one dynamic slurmd, each started
# by the project's own entrypoint, on the rendered configuration of tests/gpu/Pulumi.gpu.yaml
# with the pool's GPU count set to the host's. The node's root is the worker image's
# filesystem; the jail is a copy of it, entered through the chroot plugin. Then it checks:
#
#   gres         the node registers gpu:h100:N with the host's device files
#   one-gpu      `srun --gres=gpu:1 nvidia-smi -L` in the jail lists exactly one GPU
#   cuda         a CUDA program (cuda-probe) runs in the jail on its one GPU
#   no-gpu       a step without --gres sees no GPU, in nvidia-smi and in CUDA
#   health-pass  the quick health checks pass on the healthy node
#   health-fail  told to expect one GPU more, they fail with `healthcheck: gpu_count N/N+1`
#   nccl         the NCCL benchmark's planner handles this node: a 1-GPU node is skipped
#                (one GPU has no peer), a node with more would be benchmarked
#
# Each check prints `check NAME: ok` or `check NAME: FAILED ...`; the summary line is
# `gpu-target: N passed, N failed`. Exit 0 only when all passed.
#
# Usage (root):  bash tests/gpu/run.sh           on a GPU machine
#                bash tests/gpu/run.sh --fake    anywhere: two fake GPUs (minors 3 and 5), the
#                                                fake nvidia-smi, no CUDA check
# GPU_BUNDLE (default build/gpu-bundle) and GPU_WORK (default /tmp/slurm-stack-gpu) move
# the bundle and the scratch root; GPU_TARGET_HOLD=SECONDS keeps the cluster up that long
# after the checks, to look around (nsenter --mount --target <slurmd pid>).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$(realpath "${GPU_BUNDLE:-build/gpu-bundle}")
work=${GPU_WORK:-/tmp/slurm-stack-gpu}
fake=0
[ "${1:-}" = --fake ] && fake=1
root=$work/root
node=gpu-gpu-0
controller=gpu-controller-0
user=gpuuser
uid=2000
passed=0
failed=0

log() { echo "gpu-target: $*" >&2; }
die() { log "error: $*"; exit 2; }
ok() { echo "check $1: ok${2:+ ($2)}"; passed=$((passed + 1)); }
bad() { echo "check $1: FAILED: $2"; failed=$((failed + 1)); }

# A command in the node's root: the pod's filesystem, Slurm's client configuration.
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=/etc/slurm/slurm.conf "$@"; }
# A command of the test user (jobs of root are refused), from its home directory.
as_user() {
  in_root setpriv --reuid="$uid" --regid="$uid" --init-groups \
    env HOME="/home/$user" USER="$user" bash -c "cd && $1"
}

host_gpu_count() {
  if [ "$fake" = 1 ]; then echo 2; else nvidia-smi -L | grep -c '^GPU '; fi
}

prepare() {
  [ -s "$bundle/rootfs.tar.xz" ] || die "no bundle at $bundle: run tests/gpu/build-bundle.sh first"
  [ "$fake" = 1 ] || command -v nvidia-smi >/dev/null || die "no nvidia-smi: not a GPU machine (try --fake)"
  rm -rf "$work"
  mkdir -p "$root" "$work/jail"
  log "unpacking the node's root and the jail"
  tar -C "$root" -xJf "$bundle/rootfs.tar.xz" || die "cannot unpack $bundle/rootfs.tar.xz"
  tar -C "$work/jail" -xJf "$bundle/rootfs.tar.xz" || die "cannot unpack the jail"
  chmod 0755 "$work" "$root" "$work/jail"
  # The jail as populate-jail leaves it: its users, their homes, the marker the checks read.
  echo "$user:x:$uid:$uid::/home/$user:/bin/bash" >>"$work/jail/etc/passwd"
  echo "$user:x:$uid:" >>"$work/jail/etc/group"
  install -d -o "$uid" -g "$uid" -m 0700 "$work/jail/home/$user"
  touch "$work/jail/.slurm-stack-populated"
  install -d "$root/etc/slurm"
  cp "$bundle"/configs/* "$root/etc/slurm/"
  cp "$bundle/cuda-probe" "$work/jail/usr/local/bin/cuda-probe"
  # Cluster DNS: every name the configuration uses is this machine.
  printf '127.0.0.1 localhost %s %s %s\n' "$controller" "gpu-controller.slurm-gpu.svc" "$node" \
    >"$root/etc/hosts"
  cp "$root/etc/hosts" "$work/jail/etc/hosts"
  head -c 1024 /dev/urandom >"$work/munge.key"
  chmod 0400 "$work/munge.key"
  # The pool's GPU count becomes the host's, as a pool sized for this machine would render,
  # and the node reports the CPUs and memory it has (the pool's limits are a pod's).
  gpus=$(host_gpu_count)
  sed -e "s/Gres=gpu:h100:1 /Gres=gpu:h100:$gpus /" -e "s/NODE_GPUS=1\$/NODE_GPUS=$gpus/" \
    -e "s/ RealMemory=[0-9]*//" -e "s/ CPUs=[0-9]*//" \
    -e "s/\"expected_gpus\": 1,/\"expected_gpus\": $gpus,/" \
    "$bundle/worker.env" >"$work/worker.env"
  grep -q "NODE_GPUS=$gpus\$" "$work/worker.env" || die "worker.env: NODE_GPUS not adapted"
}

# The pod's /dev: the host's (a real GPU pod has its GPUs' nodes), or fake GPUs at 3 and 5.
mount_dev() {
  if [ "$fake" = 0 ]; then
    mount --rbind /dev "$root/dev"
    return
  fi
  mount -t tmpfs -o mode=0755,nosuid dev "$root/dev"
  for name in null zero full random urandom tty kmsg; do
    touch "$root/dev/$name"
    mount --bind "/dev/$name" "$root/dev/$name"
  done
  mkdir "$root/dev/pts" "$root/dev/shm"
  mount --bind /dev/pts "$root/dev/pts"
  ln -s pts/ptmx "$root/dev/ptmx"
  ln -s /proc/self/fd "$root/dev/fd"
  mknod -m 0666 "$root/dev/nvidiactl" c 195 255
  mknod -m 0666 "$root/dev/nvidia3" c 195 3
  mknod -m 0666 "$root/dev/nvidia5" c 195 5
}

# The driver's files where the NVIDIA container toolkit puts them in a pod: its libraries in
# the image's library directory, nvidia-smi in /usr/bin. stage-gpu-driver takes them from there.
mount_driver() {
  local libdir file target smi
  if [ "$fake" = 1 ]; then
    echo "TEST STAND-IN, not a library" >"$root/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    install -m 0755 "$bundle/fake-nvidia-smi" "$root/usr/bin/nvidia-smi"
    return
  fi
  libdir=$(dirname "$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')")
  [ -e "$libdir/libcuda.so.1" ] || die "cannot find the driver's libcuda.so.1"
  for file in "$libdir"/libcuda.so* "$libdir"/libcudadebugger.so* "$libdir"/libnvidia-*.so*; do
    [ -e "$file" ] || continue
    target=$root/usr/lib/x86_64-linux-gnu/${file##*/}
    if [ -L "$file" ] && [[ "$(readlink "$file")" != */* ]]; then
      cp -P "$file" "$target"
    else
      touch "$target"
      mount --bind "$file" "$target"
    fi
  done
  smi=$(command -v nvidia-smi)
  touch "$root/usr/bin/nvidia-smi"
  mount --bind "$smi" "$root/usr/bin/nvidia-smi"
}

# What the kubelet gives the pods: /proc, /sys, an in-memory /run and /tmp, the jail's volume,
# the munge key's Secret.
mount_pod() {
  mount --bind "$root" "$root"  # a container's root is a mount point; the jail plugin needs one
  mount_dev
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount -t tmpfs -o mode=0755 run "$root/run"
  mount -t tmpfs -o mode=1777 tmp "$root/tmp"
  mkdir -p "$root/mnt/jail"
  mount --bind "$work/jail" "$root/mnt/jail"
  mount --rbind "$work/jail/home" "$root/home"  # the login pod's homes are the jail's
  mkdir -p "$root/run/munge" "$root/run/secrets/munge" "$root/run/slurm"
  cp "$work/munge.key" "$root/run/secrets/munge/munge.key"
  install -d -o 64030 -g 64030 "$root/var/spool/slurmctld"
  mkdir -p "$root/var/spool/slurmd"
  mount_driver
}

# Each daemon through the entrypoint, as its container runs it, under its pod's host name.
start_daemons() {
  local env_file=$work/worker.env
  chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    /usr/lib/slurm-stack/entrypoint munged >"$work/munged.log" 2>&1 &
  daemons=$!
  unshare --uts sh -c "hostname $controller && exec chroot '$root' env -i \
    PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=/etc/slurm/slurm.conf \
    /usr/lib/slurm-stack/entrypoint slurmctld" >"$work/slurmctld.log" 2>&1 &
  daemons="$daemons $!"
  # The worker pod has its own process namespace, as on Kubernetes: its epilog ends the
  # job user's processes that no slurmstepd started, and the test's srun is not one of them.
  unshare --uts --mount --pid --fork --kill-child bash -c "hostname $node &&
    mount -t proc proc '$root/proc' && . '$env_file' && exec chroot '$root' env \
    PATH=/usr/sbin:/usr/bin:/sbin:/bin /usr/lib/slurm-stack/entrypoint slurmd" \
    >"$work/slurmd.log" 2>&1 &
  daemons="$daemons $!"
  slurmd_wrapper=$!
}

# SIGTERM to each daemon (unshare passes none on to slurmd, the first process of its own
# process namespace), then wait for them.
stop_daemons() {
  kill $daemons $(pgrep -P "$slurmd_wrapper") 2>/dev/null
  wait 2>/dev/null
}

wait_for_node() {
  local i state pid
  for i in $(seq 1 90); do
    state=$(in_root timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null)
    case "$state" in idle) return 0 ;; esac
    for pid in $daemons; do
      kill -0 "$pid" 2>/dev/null || break 2  # a daemon ended: its log says why
    done
    sleep 1
  done
  log "node $node did not become idle (state: ${state:-none}); logs follow"
  tail -n 30 "$work"/*.log >&2
  return 1
}

check_gres() {
  local gpus want files host
  gpus=$(host_gpu_count)
  want="gpu:h100:$gpus"
  if ! in_root scontrol show node "$node" | grep -q "Gres=$want\b"; then
    bad gres "node $node does not register $want: $(in_root scontrol show node "$node" | grep Gres=)"
    return
  fi
  files=$(sed -n 's/.*File=//p' "$root/etc/slurm-stack/node-gres.conf" | paste -sd ' ')
  host=$(for d in "$root"/dev/nvidia[0-9]*; do echo "/dev/${d##*/}"; done | sort -V | paste -sd ' ')
  [ "$files" = "$host" ] && ok gres "$want, $files" || bad gres "files '$files', devices '$host'"
}

check_one_gpu() {
  local out
  out=$(as_user "srun --gres=gpu:1 nvidia-smi -L" 2>&1)
  [ "$(grep -c '^GPU ' <<<"$out")" = 1 ] && ok one-gpu "$(head -1 <<<"$out")" ||
    bad one-gpu "$out"
}

check_cuda() {
  local out
  if [ "$fake" = 1 ]; then
    echo "check cuda: skipped (--fake: no driver)"
    return
  fi
  out=$(as_user "srun --gres=gpu:1 /usr/local/bin/cuda-probe" 2>&1)
  if grep -q '^devices 1$' <<<"$out" && grep -q '^gpu 0 .* ok$' <<<"$out"; then
    ok cuda "$(grep '^gpu 0' <<<"$out")"
  else
    bad cuda "$out"
  fi
}

check_no_gpu() {
  local smi cuda=""
  smi=$(as_user "srun nvidia-smi -L" 2>&1)
  [ "$fake" = 1 ] || cuda=$(as_user "srun /usr/local/bin/cuda-probe" 2>&1)
  if grep -q 'No devices were found' <<<"$smi" && { [ "$fake" = 1 ] || grep -q '^devices 0$' <<<"$cuda"; }; then
    ok no-gpu
  else
    bad no-gpu "nvidia-smi: $smi; cuda-probe: $cuda"
  fi
}

# The health checks as slurmd runs them (its configuration file), without acting on the node.
check_health() {
  local out gpus more
  gpus=$(host_gpu_count)
  out=$(in_root /usr/lib/slurm-stack/healthcheck run --node "$node" --dry-run 2>&1)
  grep -q 'result=pass' <<<"$out" && ok health-pass || bad health-pass "$out"
  more=$((gpus + 1))
  sed "s/\"expected_gpus\": $gpus/\"expected_gpus\": $more/" \
    "$root/run/slurm/healthcheck.json" >"$root/run/slurm/healthcheck-more.json"
  out=$(in_root /usr/lib/slurm-stack/healthcheck run --config /run/slurm/healthcheck-more.json \
    --node "$node" --dry-run 2>&1)
  grep -q "reason=\"healthcheck: gpu_count $gpus/$more\"" <<<"$out" && ok health-fail ||
    bad health-fail "$out"
}

check_nccl() {
  local out gpus
  gpus=$(host_gpu_count)
  out=$(in_root env NCCL_GPU_POOLS='{"gpu": "h100"}' NCCL_THRESHOLDS_GBPS='{"h100": 350}' \
    NCCL_MIN_BYTES=512M NCCL_MAX_BYTES=8G /usr/lib/slurm-stack/healthcheck nccl-submit --dry-run 2>&1)
  if [ "$gpus" = 1 ]; then
    grep -q "one GPU: no peer to all-reduce with" <<<"$out" && ok nccl "1 GPU: skipped" ||
      bad nccl "$out"
  else
    grep -q "action=submit" <<<"$out" && ok nccl "$gpus GPUs: would benchmark" || bad nccl "$out"
  fi
}

inside() {
  set -e  # any failed mount ends the run here
  mount_pod
  set +e
  start_daemons
  trap stop_daemons EXIT
  if wait_for_node; then
    check_gres
    check_one_gpu
    check_cuda
    check_no_gpu
    check_health
    check_nccl
  else
    bad boot "node $node never became idle"
  fi
  [ -z "${GPU_TARGET_HOLD:-}" ] || { log "holding for $GPU_TARGET_HOLD s (GPU_TARGET_HOLD)"; sleep "$GPU_TARGET_HOLD"; }
  echo "gpu-target: $passed passed, $failed failed ($([ "$fake" = 1 ] && echo fake GPUs || nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
  [ "$failed" = 0 ]
}

if [ "${GPU_TARGET_INSIDE:-}" = 1 ]; then
  inside
  exit
fi
[ "$(id -u)" = 0 ] || die "run as root (namespaces, chroot, mounts)"
prepare
# A private mount namespace: every mount goes with it when the run ends.
GPU_TARGET_INSIDE=1 exec unshare --mount --propagation private bash "$0" "$@"
