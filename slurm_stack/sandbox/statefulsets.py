"""StatefulSets whose size belongs to a scaler ("elastic"), and the sandbox's stand-in for the
StatefulSet controller that follows their size.

An elastic StatefulSet carries the annotation ``slurm-stack.io/scaled-by:
slurm-power-saving``: its ``spec.replicas`` is its size when it is created; from then on
Slurm's power saving sets it through the scale subresource, and `pulumi up` leaves it alone
(the program's ``ignoreChanges: ["spec.replicas"]``). `sandbox up` does the same
(`planned_sizes`): a StatefulSet created by this `up` takes the manifest's replicas, an
elastic one that exists keeps its live size, one that is not (or no longer) elastic takes the
manifest's.

The live size of every StatefulSet is a file the stand-in API server reads and writes
(``kube-api/live/statefulsets/<ns>/<name>``, `size_file`); a pod deleted through the API is a
file there too (``kube-api/live/deletions/<ns>/<pod>``). The controller stand-in
(statefulset_controller.py: `start_controller`, `stop_controller`) is a background process
`sandbox up` starts when a StatefulSet is elastic and `sandbox down` stops; it acts on a
StatefulSet whose live size differs from the size it, or the last `up`, brought the pods to
(``statefulset-controller/observed.json``), and on each pod deletion. Its log is
``statefulset-controller/controller.log``; `settled` says when it has nothing left to do.

A pod killed to stay gone (`Sandbox.kill_pod(name, come_back=False)`, a lost node) is "lost"
(``statefulset-controller/lost.json``): its object still exists, as a pod of an unreachable
node does, so the controller does not start it again; the next apply does, or its deletion.
"""

import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_stack.sandbox.daemon import STOP_TIMEOUT, Daemon
from slurm_stack.sandbox.state import SandboxState

Manifest = dict[str, Any]
SCALED_BY_ANNOTATION = "slurm-stack.io/scaled-by"
POWER_SAVING = "slurm-power-saving"
API_SERVER_USER = 65534  # the stand-in API server's uid and gid (kube_api.py runs it so)
CONTROLLER_MODULE = "slurm_stack.sandbox.statefulset_controller"
CONTROLLER = Daemon(
    CONTROLLER_MODULE,
    directory=lambda state: state.controller_dir,
    stem="controller",
    output=lambda state: state.controller_log,
)


# -- which size a StatefulSet runs at ------------------------------------------------------------


def is_elastic(manifest: Manifest) -> bool:
    """Whether a StatefulSet's size belongs to Slurm's power saving."""
    annotations = manifest.get("metadata", {}).get("annotations") or {}
    return manifest.get("kind") == "StatefulSet" and (
        annotations.get(SCALED_BY_ANNOTATION) == POWER_SAVING
    )


def statefulsets(manifests: Iterable[Manifest]) -> list[Manifest]:
    """The StatefulSets among ``manifests``."""
    return [m for m in manifests if m.get("kind") == "StatefulSet"]


def planned_sizes(manifests: Iterable[Manifest], live: Mapping[str, int]) -> dict[str, int]:
    """The size each StatefulSet runs at after an `up`, by name: its live size (``live``,
    those that exist) if it is elastic and exists, else its manifest's replicas (created
    now, or not elastic)."""
    sizes = {}
    for manifest in statefulsets(manifests):
        name = manifest["metadata"]["name"]
        if is_elastic(manifest) and name in live:
            sizes[name] = live[name]
        else:
            sizes[name] = int(manifest["spec"].get("replicas", 1))
    return sizes


def kept_addresses(ips: Mapping[str, str], manifests: Iterable[Manifest]) -> dict[str, str]:
    """The addresses to keep for pods of elastic StatefulSets whatever their size now: a pod
    that comes back keeps its address (and MAC), as neighbour caches still hold them."""
    elastic = {m["metadata"]["name"] for m in statefulsets(manifests) if is_elastic(m)}
    return {
        pod: ip
        for pod, ip in ips.items()
        if pod.rpartition("-")[0] in elastic and pod.rpartition("-")[2].isdigit()
    }


# -- what a size change does ---------------------------------------------------------------------


def ordinal_of(pod: str, statefulset: str) -> int | None:
    """The ordinal of ``pod`` if it is one of ``statefulset``'s pods, else None."""
    owner, _, ordinal = pod.rpartition("-")
    return int(ordinal) if owner == statefulset and ordinal.isdigit() else None


@dataclass(frozen=True)
class SizeChange:
    """What brings a StatefulSet's pods to its size: the pods to start (lowest ordinal first),
    those to stop (highest first) and lost pods whose objects go (nothing runs to stop)."""

    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    forget: tuple[str, ...] = ()


def size_change(
    statefulset: str, size: int, existing: Collection[str], lost: Collection[str] = ()
) -> SizeChange:
    """What the StatefulSet controller does for ``statefulset`` at ``size`` with the pods
    ``existing`` (any of the sandbox's) and ``lost`` (whose objects exist, not their pods):
    start each missing ordinal below the size, stop each pod at or above it."""
    ours = {p: o for p in existing if (o := ordinal_of(p, statefulset)) is not None}
    gone = {p: o for p in lost if (o := ordinal_of(p, statefulset)) is not None}
    wanted = (f"{statefulset}-{ordinal}" for ordinal in range(size))
    return SizeChange(
        start=tuple(p for p in wanted if p not in ours and p not in gone),
        stop=tuple(sorted((p for p, o in ours.items() if o >= size), key=ours.__getitem__)[::-1]),
        forget=tuple(sorted((p for p, o in gone.items() if o >= size), key=gone.__getitem__)),
    )


# -- the live sizes and deletions (what the stand-in API writes) ---------------------------------


def size_file(state: SandboxState, namespace: str, name: str) -> Path:
    """A StatefulSet's live ``spec.replicas``, as the stand-in API serves and patches it."""
    return state.kube_api_live_dir / "statefulsets" / namespace / name


def _for_server(directory: Path) -> None:
    """Make ``directory`` (below the live directory) the API server's to write in."""
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(directory, API_SERVER_USER, API_SERVER_USER)
    directory.chmod(0o755)


def prepare_live_dir(state: SandboxState, namespaces: Iterable[str]) -> None:
    """The directory the API server writes, and its sizes' and deletions' directories for
    each namespace, owned by the server's user."""
    _for_server(state.kube_api_live_dir)
    for kind in ("statefulsets", "deletions"):
        _for_server(state.kube_api_live_dir / kind)
        for namespace in namespaces:
            _for_server(state.kube_api_live_dir / kind / namespace)


def live_sizes(state: SandboxState) -> dict[str, int]:
    """The live size of each StatefulSet that exists, by name (one that does not exist has no
    size file)."""
    sizes = {}
    for path in sorted(state.kube_api_live_dir.glob("statefulsets/*/*")):
        if path.name.startswith("."):
            continue  # a file being written
        try:
            sizes[path.name] = int(json.loads(path.read_text())["replicas"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced: the next read has it
    return sizes


def _write(path: Path, document: object, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.host")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(document, handle)
        handle.write("\n")
    partial.replace(path)


def record_sizes(
    state: SandboxState, manifests: Iterable[Manifest], sizes: Mapping[str, int]
) -> None:
    """Make the live sizes those of an `up` (`planned_sizes`): a size file for each
    StatefulSet whose size differs, none for one no longer in the stack (it is deleted)."""
    wanted = {
        (m["metadata"].get("namespace", "default"), m["metadata"]["name"])
        for m in statefulsets(manifests)
    }
    prepare_live_dir(state, sorted({namespace for namespace, _ in wanted}))
    current = live_sizes(state)
    for namespace, name in sorted(wanted):
        if current.get(name) != sizes[name]:
            _write(size_file(state, namespace, name), {"replicas": sizes[name]})
    for path in state.kube_api_live_dir.glob("statefulsets/*/*"):
        if (path.parent.name, path.name) not in wanted and not path.name.startswith("."):
            path.unlink(missing_ok=True)


def forget_statefulsets(state: SandboxState) -> None:
    """`sandbox down` deletes the workloads: no StatefulSet exists any more (the next `up`
    creates them at their manifests' sizes), no deletion is pending, no pod is lost."""
    for path in state.kube_api_live_dir.glob("*/*/*"):
        path.unlink(missing_ok=True)
    for name in ("observed.json", "lost.json"):
        (state.controller_dir / name).unlink(missing_ok=True)


def deletions(state: SandboxState) -> list[tuple[str, str]]:
    """The pods deleted through the API and not yet started again: (namespace, pod)."""
    return sorted(
        (path.parent.name, path.name)
        for path in state.kube_api_live_dir.glob("deletions/*/*")
        if not path.name.startswith(".")
    )


def drop_deletion(state: SandboxState, namespace: str, pod: str) -> None:
    (state.kube_api_live_dir / "deletions" / namespace / pod).unlink(missing_ok=True)


# -- what the controller has done (host side) ----------------------------------------------------


def _read(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def observed_sizes(state: SandboxState) -> dict[str, int]:
    """The size each StatefulSet's pods were last brought to (by an `up` or the controller)."""
    return {str(k): int(v) for k, v in _read(state.controller_dir / "observed.json", {}).items()}


def save_observed(state: SandboxState, sizes: Mapping[str, int]) -> None:
    _write(state.controller_dir / "observed.json", dict(sorted(sizes.items())))


def lost_pods(state: SandboxState) -> set[str]:
    """Pods killed to stay gone until the next apply (`Sandbox.kill_pod`, come_back=False)."""
    return {str(pod) for pod in _read(state.controller_dir / "lost.json", [])}


def save_lost(state: SandboxState, pods: Collection[str]) -> None:
    path = state.controller_dir / "lost.json"
    if pods:
        _write(path, sorted(pods))
    else:
        path.unlink(missing_ok=True)


def pending(state: SandboxState) -> list[str]:
    """The StatefulSets whose live size the controller has yet to act on, and the pods it
    has yet to delete and start again (each `namespace/pod`)."""
    observed = observed_sizes(state)
    resized = [name for name, size in live_sizes(state).items() if observed.get(name) != size]
    return sorted(resized) + [f"{namespace}/{pod}" for namespace, pod in deletions(state)]


def settled(state: SandboxState) -> bool:
    """Whether the controller has acted on every size change and pod deletion (what a test
    waits for after a scale or a delete, before it looks at the pods)."""
    return not pending(state)


@dataclass(frozen=True)
class ControllerInputs:
    """What the controller plans pods from: the last `up`'s objects (Secrets included),
    the sandbox's name, network and the tag of its local images."""

    sandbox: str
    manifests: list[Manifest]
    subnet: str
    image_tag: str


def inputs_file(state: SandboxState) -> Path:
    return state.controller_dir / "inputs.json"


def save_inputs(state: SandboxState, inputs: ControllerInputs) -> None:
    """Written by `up` (readable by root alone: its Secrets hold values)."""
    document = {
        "sandbox": inputs.sandbox,
        "manifests": inputs.manifests,
        "subnet": inputs.subnet,
        "imageTag": inputs.image_tag,
    }
    _write(inputs_file(state), document, 0o600)


def load_inputs(state: SandboxState) -> ControllerInputs | None:
    """The last `up`'s inputs; None when there are none (`sandbox down` removed them)."""
    document = _read(inputs_file(state), None)
    if not isinstance(document, dict):
        return None
    return ControllerInputs(
        document["sandbox"], document["manifests"], document["subnet"], document["imageTag"]
    )


# -- the controller process ----------------------------------------------------------------------


def take_controller_lock(state: SandboxState) -> int | None:
    """A descriptor holding the lock that says a controller runs for this sandbox; None while
    another holds it."""
    return CONTROLLER.take_lock(state)


def record_controller(state: SandboxState, pid: int) -> None:
    CONTROLLER.record(state, pid)


def controller_pid(state: SandboxState) -> int | None:
    """The running controller's PID; None when none runs (nobody holds its lock)."""
    return CONTROLLER.pid(state)


def start_controller(state: SandboxState) -> bool:
    """Start the controller in the background unless one runs for this sandbox (it needs
    the inputs `save_inputs` wrote); returns whether it started one. The lock passes to it
    at once, so that a second `up` sees it running even before it has loaded."""
    return CONTROLLER.start(state)


def stop_controller(state: SandboxState, timeout: float = STOP_TIMEOUT) -> None:
    """Stop the controller (SIGTERM, then SIGKILL after ``timeout``); a pod it is starting or
    stopping is left as it is (`sandbox down` removes them all)."""
    CONTROLLER.stop(state, timeout)
