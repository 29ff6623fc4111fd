"""The seccomp profile the sandbox gives containers that ask for `RuntimeDefault`.

podman's default profile (containers-common) differs from containerd's, which a Kubernetes
node runs: it lets any container call pivot_root(2). containerd's allows pivot_root to no
one (contrib/seccomp/seccomp_default.go lists mount, umount2, unshare and mount_setattr
under CAP_SYS_ADMIN and chroot under CAP_SYS_CHROOT, never pivot_root). The sandbox takes
podman's profile without pivot_root, so what needs it fails here as it would on a node.
"""

import json
import os
import threading
from pathlib import Path

PODMAN_DEFAULT_PROFILE = Path("/usr/share/containers/seccomp.json")
NOT_IN_CONTAINERD_DEFAULT = frozenset({"pivot_root"})


def runtime_default_profile(source: dict) -> dict:  # type: ignore[type-arg]
    """``source`` (podman's default profile) without the calls containerd's refuses."""
    syscalls = []
    for rule in source.get("syscalls", []):
        names = [name for name in rule["names"] if name not in NOT_IN_CONTAINERD_DEFAULT]
        if names:
            syscalls.append({**rule, "names": names})
    return {**source, "syscalls": syscalls}


def write_runtime_default_profile(target: Path, source: Path = PODMAN_DEFAULT_PROFILE) -> Path:
    """Write the sandbox's RuntimeDefault profile to ``target`` and return it."""
    text = json.dumps(runtime_default_profile(json.loads(source.read_text())), indent=1)
    if target.exists() and target.read_text() == text:
        return target
    # Containers start in parallel and read the file: replace it whole, never half-written.
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}")
    partial.write_text(text)
    partial.replace(target)
    return target
