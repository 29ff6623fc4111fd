"""`sandbox up/down/status/ssh/exec`: a stack's rendered pods as a local podman cluster."""

import hashlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from slurm_stack.sandbox.apply import (
    Applier,
    ApplyReport,
    Log,
    SandboxError,
    install_fake_gpu_tools,
    network_name,
    unmount_below,
)
from slurm_stack.sandbox.exec_probes import NsenterExec
from slurm_stack.sandbox.images import ROOT, ensure_images
from slurm_stack.sandbox.kube_api import PORT as KUBE_API_PORT
from slurm_stack.sandbox.kube_api import SERVICE_ACCOUNT_DIR, SandboxKubeApi, wants_kube_api
from slurm_stack.sandbox.liveness import start_prober, stop_prober
from slurm_stack.sandbox.outside import OutsideMachines
from slurm_stack.sandbox.plan import Plan, plan
from slurm_stack.sandbox.podman import SANDBOX_LABEL, ListedPod, Podman, container_name
from slurm_stack.sandbox.prometheus import SandboxPrometheus, wants_prometheus
from slurm_stack.sandbox.prometheus import ensure_image as ensure_prometheus_image
from slurm_stack.sandbox.stack import SANDBOX_USER, cluster_name, render_for_sandbox
from slurm_stack.sandbox.state import (
    DEFAULT_ROOT,
    SandboxRecord,
    SandboxState,
    hold_ips,
    hold_pods,
    load_records,
)
from slurm_stack.sandbox.statefulsets import (
    ControllerInputs,
    forget_statefulsets,
    inputs_file,
    is_elastic,
    kept_addresses,
    live_sizes,
    lost_pods,
    planned_sizes,
    record_sizes,
    save_inputs,
    save_lost,
    save_observed,
    settled,
    start_controller,
    stop_controller,
)
from slurm_stack.spec.models import IMAGE_REVISION, ClusterSpec
from slurm_stack.stackfile import project_name

ROLE_LABEL = f"{SANDBOX_LABEL}.role"  # each container's role in its pod: init, sidecar, main


# -- the commands a person types ------------------------------------------------------------


def source_args(stack_file: Path, project: str, cwd: Path) -> list[str]:
    """The `--stack`/`--config` (and `--project-dir` where needed) arguments that select
    ``stack_file`` from ``cwd``: `--stack <name>` for a `Pulumi.<name>.yaml` in ``cwd`` given as
    an absolute path (what `--stack` makes of its argument), else `--config` with the path as
    given (a relative one is relative to ``cwd``, as it was for the command that gave it)."""
    match = re.fullmatch(r"Pulumi\.(.+)\.yaml", stack_file.name)
    stack = match.group(1) if match else None
    in_cwd = stack_file.is_absolute() and stack_file.parent.resolve() == cwd.resolve()
    args = ["--stack", stack] if stack and in_cwd else ["--config", str(stack_file)]
    if project != _project_of(cwd) and _project_of(stack_file.parent) == project:
        # The config namespace is the `name` in Pulumi.yaml beside the stack file.
        directory = str(stack_file.parent)
        args = (
            ["--stack", stack, "--project-dir", directory]
            if stack
            else [*args, "--project-dir", directory]
        )
    return args


def _project_of(directory: Path) -> str | None:
    """The project `--project-dir directory` gives (None where its Pulumi.yaml is broken)."""
    try:
        return project_name(directory)
    except (OSError, ValueError):
        return None


def python_command(executable: str, cwd: Path) -> str:
    """How to run ``executable`` (this interpreter) from ``cwd``: relative when it is below
    ``cwd`` (`.venv/bin/python` after scripts/setup.sh), else its absolute path (a bare
    `python` may not be on PATH, or be another one)."""
    path = Path(executable)
    if path.is_absolute() and path.is_relative_to(cwd):
        relative = str(path.relative_to(cwd))
        return relative if "/" in relative else f"./{relative}"
    return str(path)


def cli_command(
    action: str,
    stack_file: Path,
    project: str = "slurm-stack",
    *,
    cwd: Path | None = None,
    executable: str | None = None,
    sudo: bool | None = None,
) -> str:
    """The command line of `sandbox <action>` for ``stack_file``, as this process was run:
    the same interpreter, `sudo` in front when this runs under sudo (the sandbox needs root)."""
    cwd = cwd or Path.cwd()
    words = [action, *source_args(stack_file, project, cwd)]
    return f"{program(cwd=cwd, executable=executable, sudo=sudo)} {shlex.join(words)}"


def program(
    *, cwd: Path | None = None, executable: str | None = None, sudo: bool | None = None
) -> str:
    """`<this interpreter> -m slurm_stack sandbox`, after `sudo` when this runs under sudo
    (the sandbox needs root)."""
    cwd = cwd or Path.cwd()
    sudo = bool(os.environ.get("SUDO_USER")) if sudo is None else sudo
    python = python_command(executable or sys.executable or "python3", cwd)
    return ("sudo " if sudo else "") + shlex.join([python, "-m", "slurm_stack", "sandbox"])


# -- one cluster name, one stack file ----------------------------------------------------------


@dataclass(frozen=True)
class Collision:
    """A running sandbox that a command from another stack file would act on.

    kind "cluster": it runs the same cluster (`name`) with another state directory (another
    stack name): its pods and network carry the names this one would use. "state": it uses
    the same state directory (the same stack name) for another cluster: volumes, hosts file
    and addresses would be shared. "stack-file": the same cluster and state directory, started
    from another stack file (a copy elsewhere). "unrecorded": a cluster of that name runs, but
    no sandbox recorded starting it (one started before the sandbox kept records).
    """

    kind: Literal["cluster", "state", "stack-file", "unrecorded"]
    running: SandboxRecord | None


def find_collision(
    ours: SandboxRecord,
    records: Sequence[SandboxRecord],
    running: Mapping[str, Collection[str]],
    known_pods: Collection[str] = (),
    *,
    stopping: bool = False,
) -> Collision | None:
    """Whether a command for ``ours`` would act on another running sandbox (`Collision`).

    ``records``: what every sandbox recorded (`load_records`); ``running``: the pods podman
    runs, by cluster name, for the clusters that matter (``ours.cluster`` and those of records
    sharing its name or state directory); ``known_pods``: pods this state directory handed
    addresses to (an unrecorded cluster whose pods it knows is taken to be its own).
    ``stopping``: the command stops the sandbox (`down`), which a copy of the same stack file
    may do (the real-cluster tests write theirs afresh each run, then clean up).
    """
    for record in records:
        if not running.get(record.cluster):
            continue
        same_state, same_cluster = record.state == ours.state, record.cluster == ours.cluster
        if same_cluster and not same_state:
            return Collision("cluster", record)
        if same_state and not same_cluster:
            return Collision("state", record)
        if same_state and record.stack_file != ours.stack_file and not stopping:
            return Collision("stack-file", record)
    pods = set(running.get(ours.cluster) or ())
    recorded = any(record.cluster == ours.cluster for record in records)
    if pods and not recorded and not pods & set(known_pods):
        return Collision("unrecorded", None)
    return None


def stop_command(other: SandboxRecord, cli_base: Path | None = None) -> str:
    """How to stop sandbox ``other``: `sandbox down` where the CLI keeps it (state under
    ``cli_base``, `DEFAULT_ROOT`), else removing its pods (the real-cluster tests and the
    benchmarks keep their state elsewhere and remove their sandboxes when done)."""
    if other.state.parent == (cli_base or DEFAULT_ROOT):
        return cli_command("down", Path(other.stack_file), other.project)
    label = shlex.quote(f"label={SANDBOX_LABEL}={other.cluster}")
    return (
        f"podman pod rm --force $(podman pod ps --quiet --filter {label})  "
        f"(started by code keeping its state under {other.state.parent}, not by this CLI)"
    )


def collision_message(
    collision: Collision, ours: SandboxRecord, action: str | None, cli_base: Path | None = None
) -> str:
    """Why ``action`` from ``ours``'s stack file is refused (None: rendering it into the state
    directory), and what to do instead."""
    command = f"`sandbox {action}` from {ours.stack_file}" if action else f"{ours.stack_file}"
    other = collision.running
    if other is None:
        return (
            f"cluster {ours.cluster!r} is already running in a sandbox started from another "
            f"stack file (before sandboxes recorded theirs); refusing {command}, which would "
            "act on its pods.\n"
            f"  stop that sandbox:  {program()} down, with the --stack or --config it was "
            "started with\n"
            f"  or give the cluster another `name` in {ours.stack_file}"
        )
    stop = stop_command(other, cli_base)
    where = f"the sandbox started from {other.stack_file} (state {other.state})"
    if collision.kind == "state" and other.stack_file == ours.stack_file:
        return (
            f"cluster {other.cluster!r} still runs from {ours.stack_file}, which now names the "
            f"cluster {ours.cluster!r}; refusing {command}: both would share the state "
            f"{ours.state}.\n"
            f"  to rename a running cluster: set its `name` back to {other.cluster!r}, run "
            f"`{stop}`, then set the new name and run `up` again"
        )
    if collision.kind == "state":
        return (
            f"the sandbox state {ours.state} (one per stack name) belongs to cluster "
            f"{other.cluster!r}, running in {where}; refusing {command}: both would share its "
            "volumes, addresses and hosts file.\n"
            f"  stop that sandbox:  {stop}\n"
            f"  or give {ours.stack_file} another file name: the stack name "
            "(Pulumi.<stack>.yaml) picks the state directory"
        )
    if collision.kind == "stack-file":
        return (
            f"cluster {ours.cluster!r} is already running in {where}; refusing {command}, "
            "which would replace its pods with this file's.\n"
            f"  stop that sandbox:  {stop}\n"
            "  or give the cluster another `name` and the stack file another file name (the "
            "stack name picks the state directory)"
        )
    return (
        f"cluster {ours.cluster!r} is already running in {where}; refusing {command}, which "
        "would act on its pods.\n"
        f"  stop that sandbox:  {stop}\n"
        f"  or give the cluster another `name` in {ours.stack_file}"
    )


# -- pods as Kubernetes shows them ------------------------------------------------------------

NOT_STARTED = frozenset({"", "created", "configured", "initialized"})  # podman's states
FINISHED = frozenset({"exited", "stopped"})
ENDING = frozenset({"stopping", "removing"})


@dataclass(frozen=True)
class ContainerState:
    """One container of a pod: its role in the plan (init, sidecar, main), podman's `State`
    ("" for a planned container podman has not created) and exit code."""

    name: str
    role: str
    state: str = ""
    exit_code: int = 0


def kube_status(containers: Sequence[ContainerState]) -> tuple[str, str]:
    """A pod's READY and STATUS as `kubectl get pods` shows them, from its containers in the
    pod spec's order (init containers and sidecars first, as the plan has them).

    READY counts sidecars and main containers, not init containers, as kubectl does; one is
    ready while it runs (the sandbox waits for readiness probes when it starts a pod; podman
    does not run them afterwards). STATUS, following kubectl's printPod:
    - while no main container exists (podman creates them once the init containers are done):
      `Init:Error` when an init container or sidecar exited non-zero, else `Init:<done>/<init
      containers and sidecars>` for the one running or waiting, `Pending` when all are done;
    - then `Error` when a main container exited non-zero, `Completed` when all exited 0 (a
      finished Job pod), `Pending` when one has not started, `NotReady` when some exited 0
      while others run, `Terminating` while podman stops one, else `Running`.
    """
    counted = [c for c in containers if c.role != "init"]
    ready = f"{sum(c.state == 'running' for c in counted)}/{len(counted)}"
    mains = [c for c in containers if c.role == "main"]
    if not any(c.state for c in mains):
        initial = [c for c in containers if c.role != "main"]
        for done, container in enumerate(initial):
            if container.state in FINISHED and container.exit_code != 0:
                return ready, "Init:Error"
            if container.role == "init" and container.state in FINISHED:
                continue
            if container.role == "sidecar" and container.state == "running":
                continue
            return ready, f"Init:{done}/{len(initial)}"
        return ready, "Pending"
    finished = [c for c in mains if c.state in FINISHED]
    if any(c.exit_code != 0 for c in finished):
        return ready, "Error"
    if len(finished) == len(mains):
        return ready, "Completed"
    if any(c.state in NOT_STARTED for c in mains):
        return ready, "Pending"
    if finished:
        return ready, "NotReady"
    if any(c.state in ENDING for c in mains):
        return ready, "Terminating"
    return ready, "Running"


def pod_containers(
    pod: str, listed: Sequence[Mapping[str, object]], planned: Sequence[tuple[str, str]] = ()
) -> list[ContainerState]:
    """The containers of pod ``pod`` from `podman ps --all --format json` entries
    (``listed``), in the order of ``planned`` (its containers' names and roles in the plan).
    Planned containers podman does not have count only while the pod is initialising (podman
    creates the main containers once the init containers are done); a pod that runs other
    containers than planned (a change not applied yet) shows what it runs."""
    prefix = f"{pod}--"
    order = {f"{prefix}{name}": index for index, (name, _) in enumerate(planned)}
    roles = {f"{prefix}{name}": role for name, role in planned}
    found: dict[str, tuple[ContainerState, int]] = {}
    for entry in listed:
        names = entry.get("Names")
        names = [names] if isinstance(names, str) else names if isinstance(names, list) else []
        name = next((str(n) for n in names if str(n).startswith(prefix)), None)
        if name is None:
            continue
        labels = entry.get("Labels")
        labelled = labels.get(ROLE_LABEL) if isinstance(labels, dict) else None
        role = str(labelled or roles.get(name, "main"))
        state = str(entry.get("State") or "").lower()
        found[name] = (
            ContainerState(name, role, state, _integer(entry.get("ExitCode"))),
            _integer(entry.get("Created")),
        )
    if not any(container.role == "main" for container, _ in found.values()):
        for name, role in roles.items():
            found.setdefault(name, (ContainerState(name, role), 0))
    ranked = sorted(found.values(), key=lambda item: (order.get(item[0].name, len(order)), item[1]))
    return [container for container, _ in ranked]


def _integer(value: object) -> int:
    """A number from podman's JSON (0 where there is none)."""
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else 0


def pod_rows(
    pods: Sequence[Mapping[str, object]],
    containers: Sequence[Mapping[str, object]],
    planned: Mapping[str, Sequence[tuple[str, str]]],
) -> list[tuple[str, str, str]]:
    """NAME, READY, STATUS of each pod (`podman pod ps --format json` entries), by name."""
    rows = []
    for name in sorted(str(pod["Name"]) for pod in pods):
        ready, status = kube_status(pod_containers(name, containers, planned.get(name, ())))
        rows.append((name, ready, status))
    return rows


def format_table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> str:
    """Columns as kubectl prints them: left-aligned, three spaces apart."""
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


# -- a sandbox ---------------------------------------------------------------------------------


def api_server_image(current: Plan) -> str:
    """The image whose python3 runs the stand-in API: the node-state controller's (the ops
    image), else that of a container that mounts a ServiceAccount token (its programs talk
    to the API in Python)."""
    containers = [(p, c) for p in current.pods for c in p.containers]
    for pod, container in containers:
        if pod.component == "node-state" and container.name == "node-state":
            return container.image
    for _, container in containers:
        if any(mount.target == SERVICE_ACCOUNT_DIR for mount in container.mounts):
            return container.image
    raise SandboxError("no pod mounts a ServiceAccount token: nothing needs the stand-in API")


def subnet_for(sandbox: str) -> str:
    """A /24 of its own for each sandbox, so two stacks can run side by side."""
    n = int(hashlib.sha256(sandbox.encode()).hexdigest(), 16) % 200 + 20
    return f"10.89.{n}.0/24"


@dataclass
class Sandbox:
    """One stack's sandbox."""

    stack_file: Path
    project: str = "slurm-stack"
    state_base: Path = DEFAULT_ROOT
    log: Log = field(
        default=lambda message: print(f"sandbox: {message}", file=sys.stderr, flush=True)
    )
    podman: Podman = field(default_factory=Podman)

    def __post_init__(self) -> None:
        stack = self.stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
        self.state = SandboxState.for_stack(stack, self.state_base)
        self._spec: ClusterSpec | None = None
        self._plan: Plan | None = None
        self._quick_exec = NsenterExec(self.podman.main_pid)
        self._outputs: dict[str, object] = {}
        self._manifests: list[dict[str, Any]] = []
        self._sizes: dict[str, int] = {}  # each StatefulSet's size in the plan
        self._live_sizes: dict[str, int] = {}  # the live sizes the plan followed
        self._elastic = False  # whether a StatefulSet's size is a scaler's
        # This cluster's pods as the last collision check listed them (`Applier.seed`).
        self._listed_pods: list[ListedPod] | None = None

    # -- building the plan --------------------------------------------------------------------

    def render(self) -> Plan:
        """Render the stack and plan its pods (addresses kept from earlier applies; elastic
        StatefulSets at their live size, `planned_sizes`); refused while the state directory
        is another running cluster's (rendering writes there)."""
        self._refuse_shared_state()
        self.state.root.mkdir(parents=True, exist_ok=True)
        stack = render_for_sandbox(self.stack_file, self.project, self.state, subnet_for(self.name))
        self._spec = stack.spec
        self._outputs = stack.outputs
        self._manifests = stack.manifests
        return self._plan_pods()

    def _plan_pods(self) -> Plan:
        """Plan the rendered objects' pods at the StatefulSets' sizes as they are now."""
        self._live_sizes = live_sizes(self.state)
        self._sizes = planned_sizes(self._manifests, self._live_sizes)
        self._elastic = any(is_elastic(m) for m in self._manifests)
        with hold_ips(self.state):
            known = self.state.load_ips()
            self._plan = plan(
                self._manifests,
                str(self.state.root),
                subnet_for(self.spec.name),
                ips=known,
                image_tag=self.image_tag,
                gpu_devices=self.state.load_gpu_devices(),
                sizes=self._sizes,
            )
            kept = kept_addresses(known, self._manifests)
            self.state.save_ips({**kept, **{pod.name: pod.ip for pod in self._plan.pods}})
        return self._plan

    @property
    def image_tag(self) -> str:
        """The tag of the project's local images for the stack's Slurm version."""
        return f"{self.spec.slurm_version}-{IMAGE_REVISION}"

    @property
    def spec(self) -> ClusterSpec:
        if self._spec is None:
            self.render()
        assert self._spec is not None
        return self._spec

    @property
    def name(self) -> str:
        """The cluster's name, read from the stack file without running the program where
        it can be: `down`, like `pulumi destroy`, must not need a stack the program accepts
        (one whose slurmVersion goes back, say)."""
        return cluster_name(self.stack_file, self.project) or self.spec.name

    def applier(self) -> Applier:
        return Applier(self.name, self.state, self.podman, self.log)

    # -- which stack file runs ----------------------------------------------------------------

    def record(self) -> SandboxRecord | None:
        """What this stack file would run (read without rendering); None if its cluster has
        no `name` (rendering then says so)."""
        cluster = cluster_name(self.stack_file, self.project)
        if cluster is None:
            return None
        return SandboxRecord(self.state.root, str(self.stack_file.resolve()), cluster, self.project)

    def collision(self, *, stopping: bool = False) -> Collision | None:
        """A running sandbox from another stack file this one would act on (`find_collision`)."""
        ours = self.record()
        if ours is None:
            return None
        # The real-cluster tests and the benchmarks keep their sandboxes beside the CLI's.
        parent = self.state_base.parent
        beside = sorted(b for b in parent.iterdir() if b.is_dir()) if parent.is_dir() else []
        bases = [self.state_base, *(b for b in beside if b != self.state_base)]
        records = [record for base in bases for record in load_records(base)]
        clusters = {ours.cluster} | {
            r.cluster for r in records if r.state == ours.state or r.cluster == ours.cluster
        }
        listed = {
            cluster: self.podman.labelled("pod", f"{SANDBOX_LABEL}={cluster}")
            for cluster in sorted(clusters)
        }
        self._listed_pods = listed[ours.cluster]
        running = {cluster: [str(pod["Name"]) for pod in pods] for cluster, pods in listed.items()}
        try:
            known = self.state.load_ips()
        except ValueError:
            known = {}
        return find_collision(ours, records, running, known, stopping=stopping)

    def refuse_collision(self, action: str, *, stopping: bool = False) -> None:
        """Raise SandboxError (saying which stack file runs it and how to stop it) when
        ``action`` would act on a sandbox another stack file started."""
        ours = self.record()
        collision = self.collision(stopping=stopping) if ours is not None else None
        if ours is not None and collision is not None:
            raise SandboxError(collision_message(collision, ours, action))

    def _refuse_shared_state(self) -> None:
        """Rendering writes into the state directory (addresses, Secrets): refuse it while the
        directory is another running cluster's (the same stack name, another `name`)."""
        ours, recorded = self.record(), self.state.load_record()
        if ours is None or recorded is None or recorded.cluster == ours.cluster:
            return
        collision = self.collision(stopping=True)
        if collision is not None and collision.kind == "state":
            raise SandboxError(collision_message(collision, ours, None))

    def claim(self, action: str) -> None:
        """Refuse ``action`` (one that starts pods) when it would act on a sandbox another
        stack file started; else record this stack file as the one this sandbox runs."""
        self.refuse_collision(action)
        ours = self.record()
        if ours is not None:
            self.state.save_record(self.stack_file, ours.cluster, self.project)

    # -- commands -----------------------------------------------------------------------------

    def up(self, *, build: bool = True) -> ApplyReport:
        """Set up podman, build images if their inputs changed, render, apply; idempotent.
        Holds the pods lock (`hold_pods`) from the render on: the StatefulSet controller
        stand-in waits for it."""
        if build:
            subprocess.run(["bash", str(ROOT / "scripts" / "setup-podman.sh")], check=True)
        self._listed_pods = None
        self.claim("up")
        built = build and ensure_images(self.spec.slurm_version)
        if built:
            self.log("images built")
        with hold_pods(self.state, self.log):
            report = self._apply_stack(built)
        if wants_prometheus(self._manifests):
            prometheus = self.prometheus()
            changed = prometheus.write_config(self._manifests, self.current_plan.hosts)
            if changed or not prometheus.running():
                prometheus.start(ensure_prometheus_image(self.podman))
            self.log(f"Prometheus (from the ServiceMonitors and PrometheusRules): {prometheus.url}")
        # The outputs the next run reads back, recorded only for an `up` that succeeded.
        self.state.save_outputs(self._outputs)
        return report

    def _apply_stack(self, built: bool) -> ApplyReport:
        """`up`'s render and apply, the stand-in API and the background processes."""
        applier = self.applier()
        applier.prefetch_image_ids(self.state.load_plan_images())
        current = self.render()
        self._install_fake_gpu_tools()
        # The pods `claim` listed a moment ago are not asked for again (after an image build,
        # which takes minutes, they are).
        if self._listed_pods is not None and not built:
            applier.seed(self._listed_pods)
        self._listed_pods = None
        # What Pulumi's state holds: each StatefulSet's size (an elastic one keeps its live
        # size), and that its pods are brought to it by this apply.
        record_sizes(self.state, self._manifests, self._sizes)
        save_observed(self.state, self._sizes)
        if wants_kube_api(self._manifests):
            # Up before the pods, as an API server is: the controller's first pass finds it.
            kube_api = self.kube_api()
            kube_api.prepare(self._manifests, self._sizes)
            applier.ensure_network(current)
            kube_api.start(api_server_image(current))
            self.log(f"stand-in Kubernetes API: https://{kube_api.address}:{KUBE_API_PORT}")
        # The kubelet's liveness probes, for the pods the apply starts (or keeps) from now.
        if start_prober(self.state):
            self.log(f"liveness prober started (events: {self.state.liveness_events_file})")
        if self._elastic:
            inputs = ControllerInputs(
                self.name, self._manifests, subnet_for(self.spec.name), self.image_tag
            )
            save_inputs(self.state, inputs)
            if start_controller(self.state):
                self.log(f"StatefulSet controller started (log: {self.state.controller_log})")
        else:
            stop_controller(self.state)
        return applier.apply(current)

    def statefulsets_settled(self) -> bool:
        """Whether the StatefulSet controller stand-in has acted on every size change and pod
        deletion the stand-in API took: what to wait for after a scale or a delete, before
        looking at the pods (its log: `SandboxState.controller_log`)."""
        return settled(self.state)

    def kube_api(self) -> SandboxKubeApi:
        """The stand-in Kubernetes API this sandbox runs when a pod reads the API."""
        return SandboxKubeApi(
            self.name, network_name(self.name), subnet_for(self.name), self.state.root, self.podman
        )

    def prometheus(self) -> SandboxPrometheus:
        """The Prometheus this sandbox runs when its stack renders ServiceMonitors."""
        return SandboxPrometheus(
            self.name, network_name(self.name), subnet_for(self.name), self.state.root, self.podman
        )

    def outside(self) -> OutsideMachines:
        """Machines outside the cluster on this sandbox's network (outside.py): an external
        database, a host that runs Slurm beside the pods; `down` removes them."""
        return OutsideMachines(
            self.name, network_name(self.name), subnet_for(self.name), self.state.root, self.podman
        )

    def down(self, *, delete_data: bool = False) -> list[str]:
        """Remove the pods, the machines outside the cluster and the network; with
        ``delete_data`` also every volume and key (then pods are killed at once: no preStop
        drain, as nothing they would save is kept).
        Refused when the running cluster of this name, or this state directory, is another
        stack's (a copy of this stack file may stop its own sandbox)."""
        self.refuse_collision("down", stopping=True)
        stop_prober(self.state)  # first: no liveness kill while the pods stop
        inputs_file(self.state).unlink(missing_ok=True)  # a controller still loading exits
        stop_controller(self.state)  # and no pod started while they stop
        self.prometheus().stop()
        self.kube_api().stop()
        with hold_pods(self.state, self.log):
            removed = self.applier().down(graceful=not delete_data)
            forget_statefulsets(self.state)  # deleted with their pods
            if delete_data:
                unmount_below(self.state.root, include_itself=False)
                subprocess.run(["rm", "-rf", "--one-file-system", str(self.state.root)], check=True)
        return removed

    def node_container(self, node: str) -> str:
        """The main container of pod ``node`` (a Slurm node name is its pod's name)."""
        pod = next((p for p in self.current_plan.pods if p.name == node), None)
        if pod is None:
            names = ", ".join(p.name for p in self.current_plan.pods if not p.job)
            raise KeyError(f"no pod {node!r} in this sandbox; pods: {names}")
        main = next(c for c in pod.containers if c.role == "main")
        return container_name(pod, main)

    @property
    def current_plan(self) -> Plan:
        """The plan of the last render, planned again when a StatefulSet's live size has
        changed since (the controller stand-in started or stopped pods)."""
        if self._plan is None:
            return self.render()
        if self._elastic and live_sizes(self.state) != self._live_sizes:
            return self._plan_pods()
        return self._plan

    def pod_of(self, component: str) -> str:
        """The first long-running pod of a component (controller, login, …)."""
        return next(
            p.name for p in self.current_plan.pods if p.component == component and not p.job
        )

    def exec(
        self, node: str, command: list[str], *, timeout: float | None = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in a node's main container."""
        return self.podman.exec(self.node_container(node), command, timeout=timeout)

    def exec_quick(
        self, node: str, command: list[str], *, timeout: float | None = 120
    ) -> subprocess.CompletedProcess[str]:
        """`exec`, in milliseconds instead of a quarter of a CPU second where the container's
        main process is an unprivileged user (slurmctld's container: Slurm's admin commands
        as SlurmUser): nsenter as that user, outside the container's cgroup and seccomp
        filter (plan.py). Other containers go through podman."""
        container = self.node_container(node)
        quick = self._quick_exec.run_as_main_user(container, command, timeout=timeout)
        return quick if quick is not None else self.podman.exec(container, command, timeout=timeout)

    def login_ip(self) -> str:
        login = self.pod_of("login")
        return next(p.ip for p in self.current_plan.pods if p.name == login)

    def ssh_command(
        self, user: str = SANDBOX_USER, tty: bool = False, identity: Path | None = None
    ) -> list[str]:
        """ssh to the first login pod as ``user``, with the sandbox's key or ``identity``."""
        return [
            "ssh",
            "-i",
            str(identity or self.state.ssh_key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            f"UserKnownHostsFile={self.state.known_hosts}",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=10",
            *(["-tt"] if tty else []),
            f"{user}@{self.login_ip()}",
        ]

    def ssh(self, command: str, *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run a shell command on the login node as the sandbox user."""
        return subprocess.run(
            [*self.ssh_command(), command], capture_output=True, text=True, timeout=timeout
        )

    def _install_fake_gpu_tools(self) -> None:
        """The fake nvidia-smi and driver library that GPU pods mount (see plan.py)."""
        install_fake_gpu_tools(self.state, self.current_plan)

    def kill_pod(self, name: str, come_back: bool = True) -> ApplyReport:
        """Kill a long-running pod without its preStop hook or grace, as a crash or a lost
        node would, then let its controller bring it back under the same name (`apply`).
        ``come_back=False``: leave it gone until the next apply, as a StatefulSet leaves the
        pod of a lost node until the node is known to be gone (minutes); the StatefulSet
        controller stand-in leaves it too (its object stays: `statefulsets.lost_pods`)."""
        self.claim("kill-pod")
        with hold_pods(self.state, self.log):
            self.node_container(name)  # a KeyError naming the pods if there is no such pod
            self.applier().kill_pod(name)
            if not come_back:
                save_lost(self.state, lost_pods(self.state) | {name})
                return ApplyReport((), (), (), ())
            return self.applier().apply(self.current_plan)

    def restore(self) -> ApplyReport:
        """Start what the stack has and the sandbox lacks (a pod left gone), changing
        nothing else: the controllers' next sync."""
        with hold_pods(self.state, self.log):
            return self.applier().apply(self.current_plan)

    def delete_pod(self, name: str) -> ApplyReport:
        """Delete a pod as `kubectl delete pod` or an eviction (`kubectl drain`) does: its
        preStop hook and grace period, then its controller brings it back under the same
        name (`apply`)."""
        self.claim("delete-pod")
        with hold_pods(self.state, self.log):
            self.node_container(name)  # a KeyError naming the pods if there is no such pod
            applier = self.applier()
            applier.remove_pod(name)
            return applier.apply(self.current_plan)

    def run_cron_job(self, name: str) -> None:
        """Run one of the stack's CronJobs now."""
        self.claim("run-cronjob")
        with hold_pods(self.state, self.log):
            self.applier().run_cron_job(self.current_plan, name)

    def status(self) -> str:
        """Pods as `kubectl get pods` shows them (READY, STATUS), then `sinfo` from the
        controller."""
        lines = [
            f"sandbox {self.name} (stack file {self.stack_file}, network "
            f"{network_name(self.name)}, state {self.state.root})"
        ]
        collision = self.collision(stopping=True)
        if collision is not None and collision.running is not None:
            other = collision.running
            lines.append(
                f"warning: cluster {other.cluster!r} runs from {other.stack_file} "
                f"(state {other.state}), not from this stack file"
            )
        elif collision is not None:
            lines.append(
                f"warning: cluster {self.name!r} runs from a stack file this sandbox has no "
                "record of, not from this one"
            )
        pods = self.podman.labelled("pod", f"{SANDBOX_LABEL}={self.name}")
        if not pods:
            lines.append("no pods")
            return "\n".join(lines)
        containers = self.podman.labelled("container", ROLE_LABEL)
        planned = {
            pod.name: [(c.name, c.role) for c in pod.containers] for pod in self.current_plan.pods
        }
        rows = pod_rows(pods, containers, planned)
        lines.append(format_table(rows, ("NAME", "READY", "STATUS")))
        sinfo = self.exec(self.pod_of("controller"), ["sinfo", "-N", "-l"], timeout=30)
        lines.append(sinfo.stdout.rstrip() or sinfo.stderr.rstrip())
        return "\n".join(lines)

    def login_hint(self, *, cwd: Path | None = None, sudo: bool | None = None) -> str:
        """How a person logs in: this CLI's `sandbox ssh` with the stack file as it was given
        (`--stack` or `--config`), run as this process was, or ssh itself."""
        argv = self.ssh_command()
        batch = argv.index("BatchMode=yes")  # a person may be asked for confirmation
        command = shlex.join(argv[: batch - 1] + argv[batch + 1 :])
        sudo = bool(os.environ.get("SUDO_USER")) if sudo is None else sudo
        ssh = cli_command("ssh", self.stack_file, self.project, cwd=cwd, sudo=sudo)
        return f"log in:  {ssh}\n   or:   {'sudo ' if sudo else ''}{command}"


def exec_interactive(argv: list[str]) -> None:
    """Replace this process (ssh, podman exec -it)."""
    os.execvp(argv[0], argv)
