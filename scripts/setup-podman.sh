#!/usr/bin/env bash
# Install and configure podman for the local sandbox, as root. Idempotent: files this script
# owns are rewritten, anything else an admin configured is left alone.
#
# What bookworm's podman 4.3 needs on a cgroup v1-hybrid VM with no registry access:
# - runc, not crun (crun 1.8 refuses this host's cgroups);
# - cgroupfs and a file events logger (no systemd here);
# - fixed ulimits (containers get no CAP_SYS_RESOURCE to raise them);
# - no registry lookups: images are built locally, never pulled;
# - netavark named explicitly (Debian also ships a CNI config without its plugins);
# - catatonit for pods' infra containers, iptables for netavark.
# Settings go into /etc/containers: via environment variables every `podman run` hangs on exit.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=apt-lock.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-lock.sh"  # apt_get: waits for the package locks

# openssh-client and openssl: the sandbox's ssh logins and the real-cluster tests' keys and
# test certificates. docker-registry, umoci, skopeo and busybox-static: the container-job
# tests' registries and the image they build and push to them; apache2-utils: htpasswd, for
# the registry that wants credentials (tests/cluster/registry.py).
packages=(podman runc catatonit iptables netavark aardvark-dns mmdebstrap uidmap openssh-client openssl
  docker-registry umoci skopeo busybox-static apache2-utils)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-podman: installing ${missing[*]} from Debian" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

marker="# written by slurm-stack scripts/setup-podman.sh"
# Write $1 with the content on stdin unless an admin owns the file (no marker line).
own_file() {
  local path=$1 content
  content=$(cat)
  if [ -e "$path" ] && ! grep -qF "$marker" "$path"; then
    if [ "$(cat "$path")" != "$content" ]; then
      echo "setup-podman: keeping $path (not ours); the sandbox expects:" >&2
      printf '%s\n' "$content" | sed 's/^/    /' >&2
    fi
    return 0
  fi
  mkdir -p "$(dirname "$path")"
  printf '%s\n%s\n' "$marker" "$content" > "$path"
}

own_file /etc/containers/containers.conf <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
pull_policy = "never"

[network]
network_backend = "netavark"
EOF

own_file /etc/containers/storage.conf <<'EOF'
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
EOF

own_file /etc/containers/registries.conf.d/50-slurm-stack.conf <<'EOF'
unqualified-search-registries = []
EOF

podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}}' >/dev/null
echo "setup-podman: podman $(podman version --format '{{.Client.Version}}') ready" >&2
