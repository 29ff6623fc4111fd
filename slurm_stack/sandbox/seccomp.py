"""The seccomp profile the sandbox gives containers that ask for `RuntimeDefault`.

A Kubernetes node's runtime answers `RuntimeDefault` with its own default profile: containerd's
(`contrib/seccomp/seccomp_default.go`), or CRI-O's, which is containers/common's with unshare
and clone moved behind CAP_SYS_ADMIN. podman's (containers/common's `seccomp.json`) is far
looser: it lets a container with no capability at all call unshare(2), mount(2), setns(2)
and pivot_root(2). A daemon that needs those ran in the sandbox and crash-looped on a node
(slurmrestd's `unshare(CLONE_SYSVSEM)`).

The sandbox's profile is podman's, with containerd's rules laid over it:
- every call containerd allows only to a holder of a capability (``CAPABILITY_GATES``) is
  allowed only to a container whose bounding set has that capability (any of them, for a
  call gated by several);
- without CAP_SYS_ADMIN, clone(2) may create no namespace and clone3(2) answers ENOSYS, so
  that the C library falls back to clone(2);
- the calls containerd allows to no one (``NEVER``) are refused;
- a refused call answers EPERM, as under containerd (podman's profile answers ENOSYS);
- the calls containerd allows to everyone that podman's 0.50 profile does not know
  (``ALSO_ALLOWED``) are allowed.

The tables are containerd's at v1.6.39, v1.7.34 and v2.3.4, where they agree. What stays
different (listed in `plan.py`): socket(2)'s families (containerd 1.7 and later refuse AF_VSOCK
and AF_ALG), io_uring (refused from containerd 2.0), and ptrace(2) and process_vm_readv(2),
allowed here as by containerd 1.7 and later on kernels from 4.8 (1.6 gates the latter behind
CAP_SYS_PTRACE).
"""

import json
import os
import threading
from pathlib import Path
from typing import Any

PODMAN_DEFAULT_PROFILE = Path("/usr/share/containers/seccomp.json")

Profile = dict[str, Any]

# containerd: the calls allowed only to a container whose bounding set holds the capability.
CAPABILITY_GATES: dict[str, tuple[str, ...]] = {
    "CAP_SYS_ADMIN": (
        "bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
        "lookup_dcookie", "mount", "mount_setattr", "move_mount", "open_tree",
        "perf_event_open", "quotactl", "quotactl_fd", "setdomainname", "sethostname", "setns",
        "syslog", "umount", "umount2", "unshare",
    ),
    "CAP_SYS_BOOT": ("reboot",),
    "CAP_SYS_CHROOT": ("chroot",),
    "CAP_SYS_MODULE": ("delete_module", "finit_module", "init_module"),
    "CAP_SYS_PACCT": ("acct",),
    "CAP_SYS_PTRACE": ("kcmp", "pidfd_getfd", "process_madvise"),
    "CAP_SYS_RAWIO": ("ioperm", "iopl"),
    "CAP_SYS_TIME": ("clock_settime", "clock_settime64", "settimeofday", "stime"),
    "CAP_SYS_TTY_CONFIG": ("vhangup",),
    "CAP_SYS_NICE": ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"),
    "CAP_SYSLOG": ("syslog",),
    "CAP_BPF": ("bpf",),
    "CAP_PERFMON": ("perf_event_open",),
    "CAP_DAC_READ_SEARCH": ("open_by_handle_at",),
}  # fmt: skip

# containerd: allowed to no container, whatever its capabilities.
NEVER = frozenset({
    "_sysctl", "add_key", "afs_syscall", "create_module", "get_kernel_syms", "getpmsg",
    "kexec_file_load", "kexec_load", "keyctl", "migrate_pages", "move_pages", "nfsservctl",
    "pivot_root", "putpmsg", "query_module", "request_key", "security", "swapoff", "swapon",
    "sysfs", "tuxcall", "uselib", "userfaultfd", "ustat", "vserver",
})  # fmt: skip

# containerd: allowed to every container; missing from podman's 0.50 profile. runc skips a
# name its libseccomp does not know yet.
ALSO_ALLOWED = (
    "cachestat", "fchmodat2", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
    "getxattrat", "io_pgetevents", "io_pgetevents_time64", "listmount", "listxattrat",
    "lsm_get_self_attr", "lsm_list_modules", "lsm_set_self_attr", "map_shadow_stack", "mseal",
    "removexattrat", "setxattrat", "statmount", "uretprobe", "vmsplice",
)  # fmt: skip

# clone(2)'s flags that create a namespace: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
# NEWPID, NEWNET.
NAMESPACE_FLAGS = 0x7E020000
EPERM, ENOSYS = 1, 38


def gated_calls() -> frozenset[str]:
    """Every call some capability gates."""
    return frozenset(name for names in CAPABILITY_GATES.values() for name in names)


def runtime_default_profile(source: Profile) -> Profile:
    """``source`` (podman's default profile) with containerd's rules laid over it."""
    taken = gated_calls() | NEVER
    syscalls: list[Profile] = []
    for rule in source.get("syscalls", []):
        names = [name for name in rule["names"] if name not in taken]
        if names:
            syscalls.append({**rule, "names": names})
    syscalls.append({"names": list(ALSO_ALLOWED), "action": "SCMP_ACT_ALLOW"})
    for capability, gated in CAPABILITY_GATES.items():
        syscalls.append(
            {"names": list(gated), "action": "SCMP_ACT_ALLOW", "includes": {"caps": [capability]}}
        )
    without_sys_admin = {"caps": ["CAP_SYS_ADMIN"]}
    syscalls.append(
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [
                {"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
            ],
            "excludes": without_sys_admin,
        }
    )
    syscalls.append(
        {
            "names": ["clone3"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": ENOSYS,
            "excludes": without_sys_admin,
        }
    )
    return {**source, "defaultErrnoRet": EPERM, "defaultErrno": "EPERM", "syscalls": syscalls}


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
