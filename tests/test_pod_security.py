"""The Pod Security Standards level of every pod the stacks create, against an expected table.

`pss_level` is a hand-written subset of the Pod Security Standards
(https://kubernetes.io/docs/concepts/security/pod-security-standards/): no maintained Python
library implements them. It checks the controls that matter for these pods; init containers and
native sidecars (init containers with `restartPolicy: Always`) count like any container. The
Windows-only and deprecated controls (hostProcess, volume types retired before 1.25) are left out.
"""

import copy
from typing import Any

import pytest

from tests.security_renders import STACKS, enforcing_stack, pod_templates, render

# https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
# https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)

# What each component's pods meet, and why not more. README quotes this table.
EXPECTED = {
    "controller": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "accounting": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "database": ("restricted", "MariaDB runs as mysql (999) with no capabilities"),
    "reconfigure": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "pool-update": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "users": ("baseline", "sync-users runs as root with CHOWN to hand homes to their users"),
    "jail": ("baseline", "populate-jail runs as root to write the jail's root filesystem"),
    "nccl-benchmark": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "exporter": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "rest": ("restricted", "slurmrestd runs as its own user with no capabilities"),
    "node-state": ("baseline", "the munge sidecar starts as root with CHOWN/SETUID/SETGID"),
    "worker": ("privileged", "slurmd enters the jail: SYS_ADMIN, AppArmor Unconfined"),
    "login": ("privileged", "sshd enters the jail: SYS_ADMIN, AppArmor Unconfined"),
}
LEVELS = ("restricted", "baseline", "privileged")


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        *pod.get("initContainers", []),
        *pod.get("containers", []),
        *pod.get("ephemeralContainers", []),
    ]


def _volume_type(volume: dict[str, Any]) -> str:
    (kind,) = [key for key in volume if key != "name"]
    return kind


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    """What keeps ``pod`` (a PodSpec) from the baseline level."""
    found = []
    pod_context = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(field)
    found += [f"hostPath volume {v['name']}" for v in pod.get("volumes", []) if "hostPath" in v]
    found += [
        f"sysctl {s['name']}"
        for s in pod_context.get("sysctls", [])
        if s["name"] not in SAFE_SYSCTLS
    ]
    contexts = [("pod", pod_context)]
    for container in _containers(pod):
        name = container["name"]
        context = container.get("securityContext") or {}
        contexts.append((name, context))
        if context.get("privileged"):
            found.append(f"{name}: privileged")
        added = set(context.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        if added:
            found.append(f"{name}: adds {sorted(added)}")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
        if context.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount {context['procMount']}")
    for name, context in contexts:
        if context.get("appArmorProfile", {}).get("type") == "Unconfined":
            found.append(f"{name}: AppArmor Unconfined")
        if context.get("seccompProfile", {}).get("type") == "Unconfined":
            found.append(f"{name}: seccomp Unconfined")
    return found


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What keeps ``pod`` from the restricted level, beyond `baseline_violations`."""
    found = [
        f"volume {v['name']} ({_volume_type(v)})"
        for v in pod.get("volumes", [])
        if _volume_type(v) not in RESTRICTED_VOLUMES
    ]
    pod_context = pod.get("securityContext") or {}
    if pod_context.get("runAsUser") == 0:
        found.append("pod: runAsUser 0")
    for container in _containers(pod):
        name = container["name"]
        context = container.get("securityContext") or {}
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot not true")
        if context.get("runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: does not drop ALL capabilities")
        added = set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}
        if added:
            found.append(f"{name}: adds {sorted(added)}")
        seccomp = context.get("seccompProfile", pod_context.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: no RuntimeDefault or Localhost seccomp profile")
    return found


def pss_level(pod: dict[str, Any]) -> str:
    """The strictest Pod Security Standards level ``pod`` (a PodSpec) meets."""
    if baseline_violations(pod):
        return "privileged"
    return "baseline" if restricted_violations(pod) else "restricted"


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("pss")
    found = {name: render(path, out / name) for name, path in STACKS.items()}
    found["dev-enforce"] = render(enforcing_stack(out), out / "dev-enforce")
    return found


@pytest.mark.parametrize("stack", [*STACKS, "dev-enforce"])
def test_every_pod_meets_its_expected_level(stack: str, renders: dict[str, Any]) -> None:
    levels = {(c, pss_level(pod)) for c, pod in pod_templates(renders[stack])}
    assert levels
    assert levels == {(c, EXPECTED.get(c, ("not in EXPECTED",))[0]) for c, _ in levels}


def test_the_table_has_no_component_the_stacks_lack(renders: dict[str, Any]) -> None:
    seen = {c for documents in renders.values() for c, _ in pod_templates(documents)}
    assert set(EXPECTED) == seen


def test_cgroup_enforcement_makes_slurmd_privileged(renders: dict[str, Any]) -> None:
    (worker,) = [p for c, p in pod_templates(renders["dev-enforce"]) if c == "worker"]
    (slurmd,) = [c for c in worker["containers"] if c["name"] == "slurmd"]
    assert slurmd["securityContext"].get("privileged") is True
    assert "slurmd: privileged" in baseline_violations(worker)


MINIMAL_RESTRICTED = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "app",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            },
        }
    ],
    "volumes": [{"name": "data", "emptyDir": {}}],
}


@pytest.mark.parametrize(
    ("change", "level"),
    [
        (lambda pod: None, "restricted"),
        (lambda pod: pod["containers"][0]["securityContext"].update(runAsUser=0), "baseline"),
        (lambda pod: pod["securityContext"].pop("seccompProfile"), "baseline"),
        (lambda pod: pod["volumes"].append({"name": "n", "nfs": {}}), "baseline"),
        (
            lambda pod: pod.setdefault("initContainers", []).append(
                {"name": "sidecar", "restartPolicy": "Always"}
            ),
            "baseline",
        ),
        (
            lambda pod: pod["containers"][0]["securityContext"]["capabilities"].update(
                add=["SYS_ADMIN"]
            ),
            "privileged",
        ),
        (lambda pod: pod.update(hostNetwork=True), "privileged"),
        (lambda pod: pod["volumes"].append({"name": "h", "hostPath": {}}), "privileged"),
        (
            lambda pod: pod["securityContext"].update(
                sysctls=[{"name": "kernel.msgmax", "value": "1"}]
            ),
            "privileged",
        ),
        (
            lambda pod: pod["containers"][0]["securityContext"].update(
                appArmorProfile={"type": "Unconfined"}
            ),
            "privileged",
        ),
    ],
)
def test_pss_level_on_known_pods(change: Any, level: str) -> None:
    pod = copy.deepcopy(MINIMAL_RESTRICTED)
    change(pod)
    assert pss_level(pod) == level


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_container_runs_under_the_runtime_default_seccomp_profile(
    stack: str, renders: dict[str, Any]
) -> None:
    for component, pod in pod_templates(renders[stack]):
        pod_profile = pod.get("securityContext", {}).get("seccompProfile")
        for container in _containers(pod):
            profile = container.get("securityContext", {}).get("seccompProfile", pod_profile)
            assert profile == {"type": "RuntimeDefault"}, (component, container["name"])


def test_workers_keep_each_jobs_tmp_on_a_volume_of_their_own(renders: dict[str, Any]) -> None:
    for component, pod in pod_templates(renders["itest"]):
        if component != "worker":
            continue
        (slurmd,) = (c for c in pod["containers"] if c["name"] == "slurmd")
        mounts = {m["mountPath"]: m["name"] for m in slurmd["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts["/var/lib/slurm-stack/job-tmp"]] == {
            "name": "job-tmp",
            "emptyDir": {},
        }
