"""Make podman run a plan, the way `pulumi up` makes Kubernetes run the manifests.

Re-applying is idempotent: a pod whose plan (containers, mounts, config files) is unchanged keeps
running; a changed pod is replaced (a rollout); a pod no longer planned is stopped after its
preStop hook (a scale-down); a Job runs once per name while the stack has it (one that leaves
the stack and comes back runs again, as Pulumi deletes and recreates it). Volumes are never
deleted here.
"""

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from slurm_stack.sandbox.claims import ensure_claim
from slurm_stack.sandbox.exec_probes import NsenterExec
from slurm_stack.sandbox.images import ROOT
from slurm_stack.sandbox.liveness import targets_of, tcp_probe, update_targets
from slurm_stack.sandbox.outside import remove_outside_machines
from slurm_stack.sandbox.plan import (
    FAKE_DRIVER_LIBRARY_NAME,
    LAST_PHASE,
    NVIDIA_MAJOR,
    PHASES,
    STARTS_AFTER,
    Container,
    File,
    Plan,
    Pod,
    Probe,
    fake_gpu_minor,
)
from slurm_stack.sandbox.podman import (
    COMPONENT_LABEL,
    FINGERPRINT_LABEL,
    GRACE_LABEL,
    JOB_LABEL,
    PRE_STOP_LABEL,
    SANDBOX_LABEL,
    ListedPod,
    Podman,
    PodmanError,
    container_create_args,
    container_name,
    env_file_text,
    gateway_of,
    interface_with_address,
    network_create_args,
    pid_of_container,
    pin_bridge_address,
    pod_create_args,
)
from slurm_stack.sandbox.projected import write_projected
from slurm_stack.sandbox.seccomp import write_runtime_default_profile
from slurm_stack.sandbox.state import SandboxState
from slurm_stack.sandbox.statefulsets import save_lost

Log = Callable[[str], None]
INIT_TIMEOUT = 900  # populate-jail copies a whole root filesystem before workers may start
PROBE_POLL = 0.2
# An exec probe is asked again after 25 ms, then ever less often up to PROBE_POLL: most
# sidecars (munged) are ready within a tenth of a second, which a fixed 0.2 s would round up.
EXEC_PROBE_FIRST_POLL = 0.025
# A TCP probe is a connect from here, no process: asked more often, so a ready pod (and the
# next container, pod or phase after it) is seen sooner.
TCP_PROBE_POLL = 0.05
RESTART_CHECK_PERIOD = 1.0
CRASH_LOOP_RESTARTS = 3  # Kubernetes would back off; the sandbox reports the logs instead


class SandboxError(RuntimeError):
    """A pod did not start or a Job failed; the message carries the container's last lines."""


@dataclasses.dataclass(frozen=True)
class ApplyReport:
    """What an apply changed."""

    created: tuple[str, ...]
    kept: tuple[str, ...]
    removed: tuple[str, ...]
    jobs_run: tuple[str, ...]


@dataclasses.dataclass
class _Outcome:
    """What the component groups of one apply did (appended to from their threads)."""

    created: list[str] = dataclasses.field(default_factory=list)
    kept: list[str] = dataclasses.field(default_factory=list)
    jobs: list[str] = dataclasses.field(default_factory=list)
    stuck: list[str] = dataclasses.field(default_factory=list)


class _NotStarted(Exception):
    """A component group not started because a component it depends on failed."""


MAX_TIMEOUT_SECONDS = 2**31 // 1000


def network_name(sandbox: str) -> str:
    """The sandbox's private podman network."""
    return f"slurm-stack-{sandbox}"


def fingerprint(
    pod: Pod, files: list[File], image_ids: tuple[str, ...] = (), *, before_liveness: bool = False
) -> str:
    """Changes exactly when what the pod runs, the images it runs (a rebuild under the same
    tag included) or the files it mounts change. ``before_liveness``: the fingerprint the
    sandbox gave the pod before it counted liveness and startup probes."""
    fields = dataclasses.asdict(pod)
    if not fields["annotations"]:
        del fields["annotations"]  # pods from before annotations counted keep their fingerprint
    for container in fields["containers"]:
        _drop_probe_fields(container, unset_only=not before_liveness)
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    digest.update("\0".join(image_ids).encode())
    for file in sorted(files, key=lambda f: f.path):
        digest.update(f"\0{file.path}\0{file.mode}\0".encode() + file.content)
    return digest.hexdigest()[:16]


# Fields added after sandboxes ran, with the value that means "unset": left out of the
# fingerprint while unset, so that a pod which does not use them keeps its fingerprint (an
# existing sandbox does not restart such pods once).
_LATER_CONTAINER_FIELDS = {"liveness": None, "startup": None}
_LATER_PROBE_FIELDS = {"timeout": 1, "initial_delay": 0}


def _drop_probe_fields(container: dict[str, object], *, unset_only: bool) -> None:
    for name, unset in _LATER_CONTAINER_FIELDS.items():
        if not unset_only or container.get(name, unset) == unset:
            container.pop(name, None)
    for key in ("probe", "liveness", "startup"):
        probe = container.get(key)
        if isinstance(probe, dict):
            for name, unset in _LATER_PROBE_FIELDS.items():
                if not unset_only or probe.get(name, unset) == unset:
                    probe.pop(name, None)


def job_log(state: SandboxState, job: str, container: str) -> Path:
    """What a finished Job's container printed (`kubectl logs job/<job> -c <container>`)."""
    return state.root / "jobs" / f"{job}--{container}.log"


def pod_files(plan: Plan, pod: Pod, state: SandboxState) -> list[File]:
    """The ConfigMap and Secret files of one pod."""
    prefix = f"{state.root}/pods/{pod.name}/"
    return [file for file in plan.files if file.path.startswith(prefix)]


def _files_in(files: list[File], directory: str) -> list[tuple[str, bytes, int]]:
    prefix = directory + "/"
    return [(f.path[len(prefix) :], f.content, f.mode) for f in files if f.path.startswith(prefix)]


def fingerprinted_files(plan: Plan, pod: Pod, state: SandboxState) -> list[File]:
    """The files whose change replaces the pod: all but those of volumes the kubelet keeps
    up to date in a running pod (ConfigMaps and Secrets that are not immutable)."""
    live = tuple(f"{directory}/" for directory, kept_current in pod.projected_dirs if kept_current)
    return [f for f in pod_files(plan, pod, state) if not f.path.startswith(live or ("\0",))]


def refresh_live_volumes(plan: Plan, pod: Pod, state: SandboxState) -> None:
    """Bring a running pod's mutable ConfigMap and Secret volumes up to date, as the kubelet
    does within its sync period."""
    files = pod_files(plan, pod, state)
    for directory, kept_current in pod.projected_dirs:
        if kept_current:
            write_projected(Path(directory), _files_in(files, directory), pod.fs_group)


def install_fake_gpu_tools(state: SandboxState, plan: Plan) -> None:
    """The fake nvidia-smi and driver library that GPU pods mount, and each GPU pod's fake
    device nodes and answers directory (see plan.py)."""
    source = ROOT / "images" / "fake-gpu" / "nvidia-smi"
    target = state.root / "fake-gpu" / "bin" / "nvidia-smi"
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.exists():
        target.write_bytes(source.read_bytes())
        target.chmod(0o755)
    library = state.root / "fake-gpu" / "lib" / FAKE_DRIVER_LIBRARY_NAME
    library.parent.mkdir(parents=True, exist_ok=True)
    library.write_text(
        "TEST STAND-IN, not a library: it stands where the NVIDIA container runtime puts\n"
        "the node's driver library, so the sandbox can show it reaching the jail.\n"
    )
    for pod in plan.pods:
        devices = [host for c in pod.containers for host, _ in c.devices]
        if any(host.startswith(f"{state.root}/fake-gpu/dev/") for host in devices):
            (state.root / "fake-gpu" / pod.name).mkdir(parents=True, exist_ok=True)
        for host in devices:
            device = Path(host)
            if device.parent == state.root / "fake-gpu" / "dev" and not device.exists():
                device.parent.mkdir(parents=True, exist_ok=True)
                minor = fake_gpu_minor(device.name)
                os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(NVIDIA_MAJOR, minor))
                device.chmod(0o666)  # as the driver makes them; podman copies the mode


def write_hosts(plan: Plan, state: SandboxState) -> None:
    """Rewrite the shared hosts file in place (containers bind it: its inode must stay)."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{ip} {name}" for name, ip in plan.hosts.items()]
    state.hosts_file.parent.mkdir(parents=True, exist_ok=True)
    with open(state.hosts_file, "a+") as handle:
        handle.seek(0)
        handle.truncate()
        handle.write("\n".join(lines) + "\n")
    os.chmod(state.hosts_file, 0o644)


# The kubelet's emptyDir plugin (kubernetes/kubernetes, pkg/volume/emptydir/empty_dir.go):
# setupDir makes the directory 0777 (defaultPerm); for medium Memory, setupTmpfs first runs
# setupDir and then mounts a tmpfs over it with no option but size=<bytes> (and noswap on
# kernels that have it), so the volume is the tmpfs root with tmpfs's default mode, 1777
# (tmpfs(5)): world-writable, but only a file's owner may delete or rename it.
EMPTY_DIR_MODE = 0o777
MEMORY_EMPTY_DIR_MODE = 0o1777


def tmpfs_options(size: int) -> str:
    """The mount options of a medium Memory emptyDir of ``size`` bytes (0: no limit)."""
    return f"mode={MEMORY_EMPTY_DIR_MODE:o}" + (f",size={size}" if size else "")


def _prepare_volumes(plan: Plan, pod: Pod, state: SandboxState) -> None:
    """Volume directories as the kubelet leaves them: emptyDir fresh and 0777 (a 1777 tmpfs
    of its size for medium Memory), a volume whose group is not the pod's fsGroup handed to
    that group (setgid, group-writable)."""
    memory = dict(pod.memory_dirs)
    for path in pod.volume_dirs:
        directory = Path(path)
        if path in plan.empty_dirs and directory.exists():
            unmount_below(directory)
            shutil.rmtree(directory)  # a new pod gets a new emptyDir
        directory.mkdir(parents=True, exist_ok=True)
        if path in plan.empty_dirs:
            directory.chmod(EMPTY_DIR_MODE)
        if path in memory:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", tmpfs_options(memory[path]), "sandbox-memory", path],
                check=True,
                capture_output=True,
            )
        if (
            pod.fs_group is not None
            and path in pod.fs_group_dirs
            and directory.stat().st_gid != pod.fs_group
        ):
            os.chown(directory, -1, pod.fs_group)
            directory.chmod(directory.stat().st_mode | 0o2070)
    files = pod_files(plan, pod, state)
    for projected, _ in pod.projected_dirs:
        write_projected(Path(projected), _files_in(files, projected), pod.fs_group)


def unmount_below(directory: Path, *, include_itself: bool = True) -> None:
    """Detach every mount below ``directory`` (the in-memory volumes), deepest first, and the
    directory's own mount unless ``include_itself`` is false."""
    root = str(directory.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        # mountinfo escapes space, tab, newline and backslash as octal.
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point.startswith(root + "/") or (include_itself and point == root):
            points.append(point)
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=True, capture_output=True)


UpdateAction = Literal["keep", "roll", "stuck", "replace"]


def update_action(
    pod: Pod, print_: str, running_print: str | None, healthy: Callable[[Pod], bool]
) -> UpdateAction:
    """What an apply does with a long-running pod of the plan: keep it (unchanged and
    healthy), roll it (a StatefulSet's pod of an earlier template: one at a time, see
    `Applier._roll`), leave it stuck (the same, but not ready under OrderedReady, which
    Kubernetes leaves alone), or (re)place it (new, crashed, or not a StatefulSet's)."""
    if running_print is None:
        return "replace"
    if running_print == print_:
        return "keep" if healthy(pod) else "replace"
    if not pod.statefulset:
        return "replace"
    if pod.ordered_ready and not healthy(pod):
        return "stuck"
    return "roll"


def forced_rollback_message(pod: Pod) -> str:
    """What Kubernetes' StatefulSet controller does with a pod of an earlier template that is
    not Ready under OrderedReady: nothing, until someone deletes it (kubernetes/kubernetes
    #67250, the StatefulSet docs' "forced rollback")."""
    return (
        f"{pod.name}: StatefulSet {pod.statefulset} is stuck: the pod runs an earlier template "
        "and is not ready, and with podManagementPolicy OrderedReady Kubernetes replaces it "
        "only once it is deleted by hand"
    )


def _ordinal_order(pod_name: str) -> tuple[str, int]:
    """`itest-cpu-10` after `itest-cpu-9`: by workload name, then ordinal."""
    workload, _, ordinal = pod_name.rpartition("-")
    return (workload, int(ordinal)) if ordinal.isdigit() else (pod_name, -1)


def make_sub_path(volume: Path, sub_path: str) -> None:
    """Create the missing directories of a ``subPath`` as the kubelet does: owned by root,
    each with the mode of the volume's root (makeMounts in pkg/kubelet/kubelet_pods.go takes
    the volume path's mode and hands it to SafeMakeDir); a symlink on the way is refused,
    not followed."""
    mode = volume.stat().st_mode & 0o7777
    current = volume
    for part in sub_path.split("/"):
        current = current / part
        if current.is_symlink():
            raise ValueError(f"subPath {sub_path} of {volume}: {current} is a symlink")
        if not current.exists():
            current.mkdir()
            os.chown(current, 0, 0)
            current.chmod(mode)


def _write_env(pod: Pod, container: Container, state: SandboxState) -> str:
    path = state.env_file(container_name(pod, container))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(env_file_text(container))
    return str(path)


def _container_ids_of(pods: list[ListedPod]) -> dict[str, str]:
    """Each container's ID from a `pod ps` listing."""
    return {str(c["Names"]): str(c.get("Id", "")) for p in pods for c in p.get("Containers") or []}


def _states_of(pods: list[ListedPod]) -> dict[str, str]:
    """Each container's state (`running`, `exited`, ...) from a `pod ps` listing."""
    return {str(c["Names"]): str(c["Status"]) for p in pods for c in p.get("Containers") or []}


def finished_job_pods(pods: list[ListedPod]) -> set[str]:
    """The listed pods of Jobs none of whose containers runs."""
    return {
        str(p["Name"])
        for p in pods
        if (p.get("Labels") or {}).get(JOB_LABEL) == "true"
        and not any(
            str(c.get("Names", "")).startswith(f"{p['Name']}--") and c.get("Status") == "running"
            for c in p.get("Containers") or []
        )
    }


class Applier:
    """Applies plans of one sandbox."""

    def __init__(self, sandbox: str, state: SandboxState, podman: Podman, log: Log) -> None:
        self.sandbox = sandbox
        self.state = state
        self.podman = podman
        self.log = log
        self._image_id_cache: dict[str, str] = {}
        self._prefetch: Future[dict[str, str]] | None = None  # see prefetch_image_ids
        self._prefetched: list[str] = []
        self._states: dict[str, str] | None = None  # see _states_for
        self._started_since_states = False
        self._states_lock = threading.Lock()
        self.exec_probes = NsenterExec(self._main_pid)
        self._container_ids: dict[str, str] = {}  # of the containers this Applier started
        self._listed_ids: dict[str, str] = {}  # of the containers running_pods listed
        self._bridge: str | None = None  # the network's bridge interface, asked once
        self._network_ready = False  # ensure_network found or made it
        self._listed: list[ListedPod] | None = None  # see seed
        self._finished_jobs: set[str] = set()  # listed by running_pods

    def seed(self, pods: list[ListedPod]) -> None:
        """Take ``pods``, this sandbox's pods as podman listed them when the `up` began, as
        the first `running_pods`; a pod on the sandbox's network shows that it exists."""
        self._listed = pods
        if any(network_name(self.sandbox) in (p.get("Networks") or ()) for p in pods):
            self._network_ready = True

    # -- pods ---------------------------------------------------------------------------------

    def running_pods(self) -> dict[str, str]:
        """Pods of this sandbox that exist now, with their fingerprints. The listing also
        gives their containers' states, kept for `_states_for` until a pod starts or stops."""
        pods, self._listed = self._listed, None
        if pods is None:
            pods = self.podman.labelled("pod", f"{SANDBOX_LABEL}={self.sandbox}")
        with self._states_lock:
            self._states = _states_of(pods)
            self._started_since_states = False
        self._listed_ids = _container_ids_of(pods)
        self._finished_jobs = finished_job_pods(pods)
        return {
            str(p["Name"]): str((p.get("Labels") or {}).get(FINGERPRINT_LABEL, "")) for p in pods
        }

    def remove_pod(self, pod_name: str, grace: int | None = None) -> None:
        """Stop a pod as the kubelet does: the main container's preStop hook, then SIGTERM and
        SIGKILL once the pod's termination grace period (hook included) is over."""
        self._started_since_states = True
        update_targets(self.state, remove_pods={pod_name})  # the kubelet stops probing it
        grace = self._grace_of(pod_name) if grace is None else grace
        pre_stop = self._pre_stop_of(pod_name)
        started = time.monotonic()
        if pre_stop:
            main = self._main_container_name(pod_name)
            if main:
                self.log(f"{pod_name}: preStop {' '.join(pre_stop)} (grace {grace}s)")
                try:
                    # Beyond ~24 days (epoll's limit) the hook gets no timeout: a `wait`
                    # policy's year-long grace means "as long as it runs".
                    timeout = grace if grace < MAX_TIMEOUT_SECONDS else None
                    self.podman.exec(main, pre_stop, timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.log(f"{pod_name}: preStop still running after the {grace}s grace period")
        left = max(int(grace - (time.monotonic() - started)), 1)
        self.podman.run(["pod", "stop", "--time", str(left), pod_name], check=False)
        self.podman.run(["pod", "rm", "--force", "--time", "0", pod_name], check=False)
        unmount_below(self.state.root / "pods" / pod_name)  # its in-memory volumes

    def kill_pod(self, pod_name: str) -> None:
        """Kill a pod at once, without its preStop hook or grace (a crash, a lost node)."""
        self.kill_pods(pod_name)

    def kill_pods(self, *pod_names: str) -> None:
        """Kill pods at once, in one podman call: podman removes them side by side, where a
        call per pod took a second or two each."""
        update_targets(self.state, remove_pods=set(pod_names))
        self.podman.run(["pod", "rm", "--force", "--time", "0", *pod_names])
        for name in pod_names:
            unmount_below(self.state.root / "pods" / name)

    def _grace_of(self, pod_name: str) -> int:
        """The termination grace period the pod was created with (30 s, as Kubernetes, if
        unknown)."""
        out = self.podman.run(
            ["pod", "inspect", "--format", f'{{{{index .Labels "{GRACE_LABEL}"}}}}', pod_name],
            check=False,
        ).stdout.strip()
        return int(out) if out.isdigit() else 30

    def _main_container_name(self, pod_name: str) -> str | None:
        # podman 4.3 lists no pod name for containers unless asked with --pod: match names.
        for entry in self.podman.labelled("container", f"{SANDBOX_LABEL}.role=main"):
            for name in entry.get("Names") or []:
                if str(name).startswith(f"{pod_name}--"):
                    return str(name)
        return None

    def _start_container(
        self, pod: Pod, container: Container, *, to_exit: bool = False
    ) -> tuple[str, str]:
        """Start one of the pod's containers; with ``to_exit``, wait until it has exited
        (in the same podman call) and raise unless it exited 0. Returns its name and, run to
        its exit, what it printed (stdout, then stderr)."""
        name = container_name(pod, container)
        env_file = _write_env(pod, container, self.state)
        for mount in container.mounts:
            if mount.sub_path:
                make_sub_path(Path(mount.source), mount.sub_path)
        restart = not pod.job and container.role != "init"
        args = container_create_args(
            pod,
            container,
            env_file,
            str(self.state.hosts_file),
            restart=restart,
            runtime_default_seccomp=str(write_runtime_default_profile(self.state.seccomp_file)),
            pid_file="" if to_exit else str(self._pid_file(name)),
        )
        if to_exit:
            result = self.podman.run(["run", *args[1:]], check=False, timeout=INIT_TIMEOUT)
            if result.returncode != 0:
                # No container when podman could not create it (an image that does not exist):
                # then podman's own message says why.
                created = self.podman.exists("container", name)
                raise SandboxError(
                    f"{pod.name}: container {container.name} "
                    + (
                        f"exited {result.returncode}:\n{self.podman.logs(name)}"
                        if created
                        else f"not created:\n{result.stderr.strip()}"
                    )
                )
            return name, result.stdout + result.stderr
        else:
            try:
                # Create and start in one call, which prints the container's ID.
                started = self.podman.run(["run", "--detach", *args[1:]])
                self._container_ids[name] = started.stdout.strip()
            except PodmanError as error:
                raise SandboxError(
                    f"{pod.name}: container {container.name} not started:\n{error}"
                ) from error
        return name, ""

    def _pid_file(self, container: str) -> Path:
        directory = self.state.pid_dir
        directory.mkdir(parents=True, exist_ok=True)
        return directory / container

    def _main_pid(self, container: str) -> int | None:
        """A container's main PID: from the PID file of a container this Applier started
        (no podman call), else asked of podman."""
        pid = pid_of_container(self._pid_file(container), self._container_ids.get(container, ""))
        return pid if pid is not None else self.podman.main_pid(container)

    def _wait_ready(self, pod: Pod, container: Container, name: str) -> None:
        probe = container.probe
        if probe is None:
            return
        deadline = time.monotonic() + max(probe.period * probe.failures, 30)
        next_restart_check = time.monotonic() + RESTART_CHECK_PERIOD
        poll = TCP_PROBE_POLL if probe.port is not None else EXEC_PROBE_FIRST_POLL
        while time.monotonic() < deadline:
            if self._probe_passes(pod, container, name, probe):
                return
            # Each podman call costs a CPU's fraction of a second: asked less often than the
            # probe, which decides how soon a ready pod is seen.
            if time.monotonic() >= next_restart_check:
                next_restart_check = time.monotonic() + RESTART_CHECK_PERIOD
                restarts = self.podman.run(
                    ["inspect", "--format", "{{.RestartCount}}", name], check=False
                ).stdout.strip()
                if restarts.isdigit() and int(restarts) >= CRASH_LOOP_RESTARTS:
                    raise SandboxError(
                        f"{pod.name}: container {container.name} keeps exiting "
                        f"({restarts} restarts):\n" + self.podman.logs(name)
                    )
            time.sleep(poll)
            poll = poll if probe.port is not None else min(poll * 2, PROBE_POLL)
        raise SandboxError(
            f"{pod.name}: container {container.name} not ready after "
            f"{max(probe.period * probe.failures, 30):g}s:\n" + self.podman.logs(name)
        )

    def _probe_passes(self, pod: Pod, container: Container, name: str, probe: Probe) -> bool:
        if probe.port is not None:
            return tcp_probe(pod.ip, probe.port, timeout=1).passed
        return self.exec_probes.passes(
            name, probe.command, user=container.user, group=container.group
        )

    def start_pod(self, plan: Plan, pod: Pod, print_fingerprint: str) -> None:
        """Create a pod and start its containers in Kubernetes order; wait until it is ready
        (a Job pod: until its containers have finished)."""
        self._started_since_states = True
        _prepare_volumes(plan, pod, self.state)
        self.podman.run(
            pod_create_args(pod, network_name(self.sandbox), self.sandbox, print_fingerprint)
        )
        for index, container in enumerate(pod.containers):
            runs_to_exit = container.role == "init" or (pod.job and container.role == "main")
            name, printed = self._start_container(pod, container, to_exit=runs_to_exit)
            if index == 0:  # the pod is on the network now, so its bridge exists
                self._pin_bridge_address(plan)
            if pod.job and container.role == "main":
                log = job_log(self.state, pod.name, container.name)
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(printed)
            if not runs_to_exit:
                # Probed for liveness from its start, as the kubelet probes it.
                self._watch(pod, name)
                self._wait_ready(pod, container, name)

    def _watch(self, pod: Pod, *names: str) -> None:
        """Have the liveness prober watch the pod's containers ``names`` (all, if none is
        named) that have a livenessProbe."""
        ids = {**self._listed_ids, **self._container_ids}
        update_targets(
            self.state, add=[t for t in targets_of(pod, ids) if not names or t.name in names]
        )

    def _pin_bridge_address(self, plan: Plan) -> None:
        if self._bridge is None:
            self._bridge = (
                interface_with_address(gateway_of(plan.subnet))
                or self.podman.run(
                    [
                        "network",
                        "inspect",
                        "--format",
                        "{{.NetworkInterface}}",
                        network_name(self.sandbox),
                    ]
                ).stdout.strip()
            )
        pin_bridge_address(self._bridge, plan.subnet)

    # -- the whole plan -----------------------------------------------------------------------

    def ensure_network(self, plan: Plan) -> None:
        """The sandbox's network, made if missing (tools beside the pods join it); asked of
        podman once per Applier."""
        if self._network_ready:
            return
        if not self.podman.exists("network", network_name(self.sandbox)):
            self.podman.run(
                network_create_args(network_name(self.sandbox), plan.subnet, self.sandbox)
            )
        self._network_ready = True

    def prepare_directories(self, plan: Plan) -> None:
        """The plan's claims: each mounted filesystem of its size, or a directory."""
        sizes = dict(plan.claims)
        for directory in plan.directories:
            if directory in sizes:
                ensure_claim(Path(directory), sizes[directory])
            elif "/claims/" in directory:
                Path(directory).mkdir(parents=True, exist_ok=True)

    def apply(self, plan: Plan) -> ApplyReport:
        """Bring the sandbox to ``plan``; see the module docstring."""
        self.ensure_network(plan)
        self.prepare_directories(plan)
        write_hosts(plan, self.state)
        self._image_id_cache.clear()
        self._cache_image_ids(plan)
        save_lost(self.state, ())  # a pod left gone starts again: the controllers' next sync

        running = self.running_pods()
        update_targets(self.state, keep_pods=set(running))  # none of a pod gone meanwhile
        planned = {pod.name for pod in plan.pods}
        self.state.forget_jobs_except({pod.name for pod in plan.pods if pod.job})
        finished = sorted(self._finished_jobs & (set(running) - planned))
        self.remove_finished_jobs(*finished)  # deleting a Job deletes its pod
        removed = list(finished)
        # A StatefulSet scales down from its highest ordinal.
        for name in sorted(
            set(running) - planned - set(finished), key=_ordinal_order, reverse=True
        ):
            self.log(f"{name}: no longer planned; stopping it")
            self.remove_pod(name)
            removed.append(name)

        groups: dict[str, list[Pod]] = {}
        for pod in plan.pods:  # in phase order, so a group's dependencies are submitted first
            groups.setdefault(pod.component, []).append(pod)
        outcome = _Outcome()
        self._apply_groups(plan, groups, running, outcome)
        order = {pod.name: index for index, pod in enumerate(plan.pods)}

        def in_plan_order(names: list[str]) -> tuple[str, ...]:
            return tuple(sorted(names, key=order.__getitem__))

        return ApplyReport(
            created=in_plan_order(outcome.created),
            kept=in_plan_order(outcome.kept),
            removed=tuple(removed),
            jobs_run=in_plan_order(outcome.jobs),
        )

    def _apply_groups(
        self, plan: Plan, groups: dict[str, list[Pod]], running: dict[str, str], outcome: "_Outcome"
    ) -> None:
        """Each component's pods, once the components it depends on are ready; raises what
        failed once every component that could go on has."""
        futures: dict[str, Future[None]] = {}
        with ThreadPoolExecutor(max_workers=len(groups) or 1) as pool:
            for component, pods in groups.items():
                waits = [
                    futures[c] for c in STARTS_AFTER.get(component, tuple(groups)) if c in futures
                ]
                futures[component] = pool.submit(
                    self._apply_group, plan, pods, running, waits, outcome
                )
        failed = [
            str(error)
            for error in (future.exception() for future in futures.values())
            if error is not None and not isinstance(error, _NotStarted)
        ]
        if outcome.stuck or failed:
            raise SandboxError("\n\n".join([*outcome.stuck, *failed]))

    def _apply_group(
        self,
        plan: Plan,
        pods: list[Pod],
        running: dict[str, str],
        waits: list["Future[None]"],
        outcome: "_Outcome",
    ) -> None:
        """Once ``waits`` (the components these pods depend on) have succeeded, bring one
        component's pods to the plan: keep, roll, replace or start each; run its Jobs."""
        if any(wait.exception() is not None for wait in waits):
            raise _NotStarted()
        todo: list[tuple[Pod, str]] = []
        rolls: dict[str, list[tuple[Pod, str]]] = {}
        states = self._states_for(pods, running)
        for pod in pods:
            files = fingerprinted_files(plan, pod, self.state)
            print_ = fingerprint(pod, files, self._image_ids(pod))
            if pod.schedule is not None:
                continue
            if pod.job:
                if self.state.job_done(pod.name).exists():
                    continue
                if pod.name in running:
                    self.remove_pod(pod.name)
                todo.append((pod, print_))
                continue
            running_print = running.get(pod.name)
            if running_print not in (None, print_) and running_print == fingerprint(
                pod, files, self._image_ids(pod), before_liveness=True
            ):
                running_print = print_  # started before probes counted: not restarted for it
            action = update_action(pod, print_, running_print, lambda p: self._healthy(p, states))
            if action == "keep":
                refresh_live_volumes(plan, pod, self.state)
                self._watch(pod)
                outcome.kept.append(pod.name)
            elif action == "stuck":
                outcome.stuck.append(forced_rollback_message(pod))
                self.log(outcome.stuck[-1])
            elif action == "roll":
                rolls.setdefault(pod.statefulset, []).append((pod, print_))
            else:
                if pod.name in running:
                    self.log(f"{pod.name}: changed; replacing it")
                    # The running pod's own hook, as Kubernetes runs the old pod's.
                    self.remove_pod(pod.name)
                todo.append((pod, print_))
        rolled, failed = self._roll_and_start(plan, rolls, todo)
        outcome.created.extend(rolled)
        if failed:
            raise SandboxError("\n\n".join(failed))
        for pod, _ in todo:
            (outcome.jobs if pod.job else outcome.created).append(pod.name)

    def _roll_and_start(
        self, plan: Plan, rolls: dict[str, list[tuple[Pod, str]]], todo: list[tuple[Pod, str]]
    ) -> tuple[list[str], list[str]]:
        """Start the new pods and roll each StatefulSet's changed pods, all at once; return
        the pods rolled and what failed."""
        with ThreadPoolExecutor(max_workers=len(rolls) + 1) as pool:
            futures = [pool.submit(self._roll, plan, pods) for pods in rolls.values()]
            try:
                self._start_all(plan, todo)
                failed = []
            except SandboxError as error:
                failed = [str(error)]
            rolled = []
            for future in futures:
                done, problem = future.result()
                rolled.extend(done)
                if problem:
                    failed.append(problem)
        return rolled, failed

    def _roll(self, plan: Plan, pods: list[tuple[Pod, str]]) -> tuple[list[str], str]:
        """A StatefulSet's rolling update: one pod at a time, highest ordinal first, each
        stopped as Kubernetes stops it (preStop, grace) and the next only once the new one
        is ready. A new pod that does not become ready stops the roll there: the pods not
        reached keep running their old template."""
        done: list[str] = []
        for pod, print_ in sorted(
            pods, key=lambda item: _ordinal_order(item[0].name), reverse=True
        ):
            self.log(f"{pod.name}: its template changed; replacing it (rolling update)")
            self.remove_pod(pod.name)
            try:
                self.start_pod(plan, pod, print_)
            except (SandboxError, PodmanError) as error:
                left = [p.name for p, _ in pods if p.name != pod.name and p.name not in done]
                return done, (
                    f"rolling update of StatefulSet {pod.statefulset} stopped at {pod.name}, "
                    f"which did not become ready; {', '.join(left) or 'no other pod'} kept "
                    f"the template before:\n{error}"
                )
            done.append(pod.name)
        return done, ""

    def run_cron_job(self, plan: Plan, name: str) -> None:
        """Run a CronJob's pod once now, as `kubectl create job --from=cronjob/NAME` would."""
        pod = next((p for p in plan.pods if p.name == name and p.schedule is not None), None)
        if pod is None:
            known = ", ".join(p.name for p in plan.pods if p.schedule is not None) or "none"
            raise SandboxError(f"no CronJob {name!r} in this stack; CronJobs: {known}")
        self.podman.run(["pod", "rm", "--force", name], check=False)
        try:
            self.start_pod(plan, pod, fingerprint(pod, fingerprinted_files(plan, pod, self.state)))
        finally:
            self.podman.run(["pod", "rm", "--force", name], check=False)

    def _start_all(self, plan: Plan, todo: list[tuple[Pod, str]]) -> None:
        if not todo:
            return
        for pod, _ in todo:
            self.log(f"{pod.name}: starting ({pod.component}{', job' if pod.job else ''})")
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(self._run_pod, plan, pod, print_) for pod, print_ in todo]
            errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise SandboxError("\n\n".join(str(e) for e in errors))

    def _run_pod(self, plan: Plan, pod: Pod, print_: str) -> None:
        """Start a pod; a Job's, once its main containers have finished (what they printed
        is kept, `job_log`), is recorded as done and its sidecars stopped."""
        self.start_pod(plan, pod, print_)
        if pod.job:
            self.state.job_done(pod.name).parent.mkdir(parents=True, exist_ok=True)
            self.state.job_done(pod.name).touch()
            self._stop_sidecars(pod)

    def _stop_sidecars(self, pod: Pod) -> None:
        """SIGTERM to a finished pod's sidecars, as the kubelet sends it; the pod stays, as a
        Job's pod stays on Kubernetes, until the Job leaves the stack (`remove_finished_jobs`)."""
        for container in pod.containers:
            if container.role == "sidecar":
                pid = self._main_pid(container_name(pod, container))
                if pid is not None:
                    os.kill(pid, signal.SIGTERM)

    def remove_finished_jobs(self, *pod_names: str) -> None:
        """Remove pods of finished Jobs at once: nothing runs in them to stop gracefully."""
        if pod_names:
            self.kill_pods(*pod_names)

    def fingerprint_of(self, plan: Plan, pod: Pod) -> str:
        """The fingerprint the apply gives ``pod`` of ``plan`` when it starts it."""
        return fingerprint(pod, fingerprinted_files(plan, pod, self.state), self._image_ids(pod))

    def _image_ids(self, pod: Pod) -> tuple[str, ...]:
        """The IDs of the pod's images that exist (each asked of podman once per apply)."""
        ids = []
        for image in sorted({c.image for c in pod.containers}):
            if image not in self._image_id_cache:
                out = self.podman.run(
                    ["image", "inspect", "--format", "{{.Id}}", image], check=False
                )
                self._image_id_cache[image] = out.stdout.strip() if out.returncode == 0 else ""
            ids.append(self._image_id_cache[image])
        return tuple(i for i in ids if i)

    def prefetch_image_ids(self, images: list[str]) -> None:
        """Start asking podman for the IDs of ``images`` (the last apply's, while this one's
        plan is rendered); `apply` takes the answer if its plan has the same images."""
        self._prefetched = sorted(images)
        asker = ThreadPoolExecutor(max_workers=1)
        self._prefetch = asker.submit(self._inspect_images, self._prefetched)
        asker.shutdown(wait=False)

    def _inspect_images(self, images: list[str]) -> dict[str, str]:
        """Each image's ID, in one podman call; empty unless they all exist."""
        if not images:
            return {}
        out = self.podman.run(["image", "inspect", "--format", "{{.Id}}", *images], check=False)
        ids = out.stdout.split()
        if out.returncode == 0 and len(ids) == len(images):
            return dict(zip(images, ids, strict=True))
        return {}

    def _cache_image_ids(self, plan: Plan) -> None:
        """The ID of every image of the plan, in one podman call when they all exist (else
        `_image_ids` asks for each); the images are recorded for the next `up`'s prefetch."""
        images = sorted({c.image for pod in plan.pods for c in pod.containers})
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None and self._prefetched == images:
            self._image_id_cache.update(prefetch.result())
        else:
            self._image_id_cache.update(self._inspect_images(images))
        self.state.save_plan_images(images)

    def _states_for(self, pods: list[Pod], running: dict[str, str]) -> dict[str, str]:
        """Container states for judging ``pods``' health: taken once per apply, and again
        for a component started after this apply has started or replaced pods."""
        if not any(p.name in running for p in pods):
            return {}
        with self._states_lock:
            if self._states is None or self._started_since_states:
                self._started_since_states = False
                self._states = self._container_states()
            return self._states

    def _container_states(self) -> dict[str, str]:
        """The state of each container of this sandbox's pods (`running`, `exited`, ...), in
        one podman call."""
        return _states_of(self.podman.labelled("pod", f"{SANDBOX_LABEL}={self.sandbox}"))

    @staticmethod
    def _healthy(pod: Pod, states: dict[str, str]) -> bool:
        """Every container of a long-running pod that should run is running."""
        return all(
            states.get(container_name(pod, container)) == "running"
            for container in pod.containers
            if container.role != "init"
        )

    def _pre_stop_of(self, pod_name: str) -> tuple[str, ...]:
        """The preStop hook of a running pod's main container (from its labels)."""
        main = self._main_container_name(pod_name)
        if not main:
            return ()
        out = self.podman.run(
            ["inspect", "--format", f'{{{{index .Config.Labels "{PRE_STOP_LABEL}"}}}}', main],
            check=False,
        ).stdout.strip()
        return tuple(json.loads(out)) if out and out != "<no value>" else ()

    def down(self, *, graceful: bool = True) -> list[str]:
        """Stop and remove every pod (preStop hooks first), then the machines outside the
        cluster (outside.py) and the network; keep the state. Pods go in the reverse of their
        start order, so workers drain while slurmctld still answers. Not ``graceful``: kill
        every pod and machine at once (nothing is kept anyway)."""
        pods = self.podman.labelled("pod", f"{SANDBOX_LABEL}={self.sandbox}")
        phase = {
            str(p["Name"]): PHASES.get(
                str((p.get("Labels") or {}).get(COMPONENT_LABEL)), LAST_PHASE
            )
            for p in pods
        }
        names = sorted(phase, key=lambda name: (phase[name], _ordinal_order(name)), reverse=True)
        if graceful:
            finished = finished_job_pods(pods)
            self.remove_finished_jobs(*sorted(finished))
            for name in names:
                if name not in finished:
                    self.remove_pod(name)
        elif names:
            self.kill_pods(*names)
        remove_outside_machines(self.podman, self.sandbox, seconds=None if graceful else 0)
        self.podman.run(["network", "rm", "--force", network_name(self.sandbox)], check=False)
        self._network_ready = False
        return names


__all__ = ["Applier", "ApplyReport", "PodmanError", "SandboxError", "network_name"]
