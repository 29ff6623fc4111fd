"""Liveness probes for a sandbox's long-running pods, as the kubelet runs them: what to probe
(the targets file the apply keeps), how a TCP probe goes (readiness probes' too), and the life
of the prober process (liveness_server.py), which outlives the `sandbox up` that starts it.

The apply adds a pod's containers that have a livenessProbe to the targets file as it starts
them (or keeps them running), and takes a pod out before it stops it, as the kubelet stops
probing a pod being deleted. `sandbox up` starts the prober unless it runs (a lock it holds
says so: no podman call, no wait); `sandbox down` stops it and removes the targets file.
"""

import json
import os
import socket
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slurm_stack.sandbox.daemon import STOP_TIMEOUT, Daemon
from slurm_stack.sandbox.exec_probes import ProbeResult
from slurm_stack.sandbox.plan import Pod, Probe
from slurm_stack.sandbox.podman import container_name
from slurm_stack.sandbox.state import SandboxState

SERVER_MODULE = "slurm_stack.sandbox.liveness_server"
PROBER = Daemon(
    SERVER_MODULE,
    directory=lambda state: state.liveness_dir,
    stem="prober",
    output=lambda state: state.liveness_dir / "prober.stderr",
)
_targets_lock = threading.Lock()  # the apply's component groups write from their threads


@dataclass(frozen=True)
class Target:
    """One container the prober watches, with what the kubelet needs to probe and kill it."""

    pod: str
    container: str  # its name in the pod spec
    name: str  # podman's: `<pod>--<container>`
    container_id: str  # "" where the apply did not know it (then asked of podman)
    ip: str
    user: int | None
    group: int | None
    liveness: Probe
    startup: Probe | None
    grace: int  # the pod's terminationGracePeriodSeconds
    pre_stop: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Target":
        startup = data["startup"]
        return cls(
            **{
                **data,
                "liveness": _probe_from_json(data["liveness"]),
                "startup": None if startup is None else _probe_from_json(startup),
                "pre_stop": tuple(data["pre_stop"]),
            }
        )


def _probe_from_json(value: Mapping[str, Any]) -> Probe:
    return Probe(**{**value, "command": tuple(value["command"])})


def targets_of(pod: Pod, container_ids: Mapping[str, str]) -> list[Target]:
    """The containers of ``pod`` the kubelet would liveness-probe: those with a livenessProbe,
    sidecars included, in a pod that is not a Job's. ``container_ids`` by podman name."""
    if pod.job or pod.schedule is not None:
        return []
    return [
        Target(
            pod=pod.name,
            container=container.name,
            name=container_name(pod, container),
            container_id=container_ids.get(container_name(pod, container), ""),
            ip=pod.ip,
            user=container.user,
            group=container.group,
            liveness=container.liveness,
            startup=container.startup,
            grace=pod.grace_seconds,
            pre_stop=container.pre_stop,
        )
        for container in pod.containers
        if container.role != "init" and container.liveness is not None
    ]


def load_targets(path: Path) -> dict[str, Target] | None:
    """The targets by podman name; None when there is no targets file (the prober then
    exits), none when it cannot be read (one an earlier version wrote: the apply rewrites it)."""
    try:
        document = json.loads(path.read_text())
        return {name: Target.from_json(value) for name, value in document.items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def update_targets(
    state: SandboxState,
    *,
    add: Iterable[Target] = (),
    remove_pods: Collection[str] = (),
    keep_pods: Collection[str] | None = None,
) -> None:
    """Add (or replace) targets, drop those of ``remove_pods`` and, given ``keep_pods``, of
    every pod not in it; written whole (the prober never reads half a file). Removing only
    does nothing where there is no file (`sandbox down` removed it)."""
    added = list(add)
    path = state.liveness_targets_file
    with _targets_lock:
        current = load_targets(path)
        if current is None and not added:
            return
        targets = {
            name: target
            for name, target in (current or {}).items()
            if target.pod not in remove_pods and (keep_pods is None or target.pod in keep_pods)
        }
        targets.update((target.name, target) for target in added)
        if targets == current:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".new")
        document = {name: targets[name].to_json() for name in sorted(targets)}
        partial.write_text(json.dumps(document, indent=1) + "\n")
        partial.rename(path)


def tcp_probe(ip: str, port: int, timeout: float) -> ProbeResult:
    """A TCP probe as the kubelet's: it passes once a connection to ``ip``:``port`` opens
    within ``timeout`` seconds; the failure reads as Go's dialer puts it."""
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return ProbeResult(True)
    except TimeoutError:
        return ProbeResult(False, f"dial tcp {ip}:{port}: i/o timeout", True)
    except OSError as error:
        reason = os.strerror(error.errno).lower() if error.errno else str(error)
        return ProbeResult(False, f"dial tcp {ip}:{port}: connect: {reason}")


# -- the prober process ------------------------------------------------------------------------


def take_prober_lock(state: SandboxState) -> int | None:
    """A descriptor holding the sandbox's prober lock, held while it stays open here or in a
    child given it; None while another holds it (a prober runs)."""
    return PROBER.take_lock(state)


def prober_pid(state: SandboxState) -> int | None:
    """The running prober's PID; None when none runs (nobody holds its lock)."""
    return PROBER.pid(state)


def record_prober(state: SandboxState, pid: int) -> None:
    """Note the PID of the prober that holds the lock, for `stop_prober`."""
    PROBER.record(state, pid)


def _create_targets(state: SandboxState) -> None:
    if not state.liveness_targets_file.exists():
        state.liveness_targets_file.write_text("{}\n")


def start_prober(state: SandboxState) -> bool:
    """Start the prober in the background unless one runs for this sandbox; returns whether
    it started one. Costs a fork and exec (the prober loads in its own time); the lock passes
    to it at once, so that a second `up` sees it running even before it has loaded."""
    return PROBER.start(state, prepare=_create_targets)


def stop_prober(state: SandboxState, timeout: float = STOP_TIMEOUT) -> None:
    """Stop the prober (SIGTERM, then SIGKILL after ``timeout``) and remove the targets file,
    so that a prober still starting exits on its own."""
    state.liveness_targets_file.unlink(missing_ok=True)
    PROBER.stop(state, timeout)
