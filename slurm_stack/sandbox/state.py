"""A sandbox's state directory: volumes, addresses, kept Secrets, its login key, finished Jobs,
and the record of what it runs (which stack file, which cluster).

There is one directory per stack name (`Pulumi.<stack>.yaml`); the pods, their network and
their podman labels are named after the cluster's `name`. `sandbox down` removes the pods and
keeps this directory, as deleting a Kubernetes workload keeps its volumes; `down --delete-data`
removes it.
"""

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

DEFAULT_ROOT = Path("/var/lib/slurm-stack/sandbox")
RECORD_FILE = "sandbox.json"
MAX_VALID_MANIFESTS = 4096  # about ten stacks of objects, each checked for five minors


@dataclass(frozen=True)
class SandboxRecord:
    """What a sandbox runs: its state directory, the stack file its pods were started from
    (an absolute path), the cluster's `name` (which names its pods) and the Pulumi project."""

    state: Path
    stack_file: str
    cluster: str
    project: str = "slurm-stack"


@dataclass(frozen=True)
class SandboxState:
    """Paths of one sandbox (one stack) under ``root``."""

    root: Path

    @classmethod
    def for_stack(cls, stack: str, base: Path = DEFAULT_ROOT) -> "SandboxState":
        """The state of the sandbox of stack ``stack``."""
        return cls(base / stack)

    @property
    def record_file(self) -> Path:
        """What this sandbox runs (`SandboxRecord`), written by the commands that start pods."""
        return self.root / RECORD_FILE

    def load_record(self) -> SandboxRecord | None:
        """The record of what this sandbox runs; None before its first `up` (or from a version
        that did not write one) or if the file is unreadable."""
        try:
            data = json.loads(self.record_file.read_text())
            return SandboxRecord(
                self.root, str(data["stackFile"]), str(data["cluster"]), str(data["project"])
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save_record(self, stack_file: Path, cluster: str, project: str) -> SandboxRecord:
        """Record that this sandbox runs cluster ``cluster`` from ``stack_file``."""
        record = SandboxRecord(self.root, str(stack_file.resolve()), cluster, project)
        self.root.mkdir(parents=True, exist_ok=True)
        document = {"stackFile": record.stack_file, "cluster": cluster, "project": project}
        self.record_file.write_text(json.dumps(document, indent=2) + "\n")
        return record

    @property
    def secrets_file(self) -> Path:
        return self.root / "secrets.json"

    @property
    def random_salts_file(self) -> Path:
        """Each `random:` resource's salt (`stack.RandomSalts`)."""
        return self.root / "random-salts.json"

    @property
    def outputs_file(self) -> Path:
        """The stack outputs of the last `up`, which the program reads back as Pulumi's state
        gives them (its deployed slurmVersion)."""
        return self.root / "outputs.json"

    def load_outputs(self) -> dict[str, object]:
        return json.loads(self.outputs_file.read_text()) if self.outputs_file.exists() else {}

    def save_outputs(self, outputs: dict[str, object]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.outputs_file.write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n")

    @property
    def render_file(self) -> Path:
        """The last render of the stack and the digest of what it followed from
        (`render_cache`)."""
        return self.root / "render.json"

    @property
    def valid_manifests_file(self) -> Path:
        """Digests of the objects that passed the schema check (offline.validate's
        `valid_digest`), so an `up` checks only what changed."""
        return self.root / "valid-manifests.json"

    def load_valid_manifests(self) -> set[str]:
        if not self.valid_manifests_file.exists():
            return set()
        return set(json.loads(self.valid_manifests_file.read_text()))

    def save_valid_manifests(self, digests: set[str]) -> None:
        """Keep the digests; past MAX_VALID_MANIFESTS, only the newest stack's are worth
        keeping, and which those are is not known here: start over."""
        kept = sorted(digests) if len(digests) <= MAX_VALID_MANIFESTS else []
        self.root.mkdir(parents=True, exist_ok=True)
        self.valid_manifests_file.write_text(json.dumps(kept) + "\n")

    @property
    def plan_images_file(self) -> Path:
        """The images the last apply's pods ran, asked for while the next `up` renders."""
        return self.root / "images.json"

    def load_plan_images(self) -> list[str]:
        try:
            images = json.loads(self.plan_images_file.read_text())
        except (OSError, ValueError):
            return []
        return [str(i) for i in images] if isinstance(images, list) else []

    def save_plan_images(self, images: list[str]) -> None:
        if images != self.load_plan_images():
            self.root.mkdir(parents=True, exist_ok=True)
            self.plan_images_file.write_text(json.dumps(images) + "\n")

    @property
    def gpu_devices_file(self) -> Path:
        """The emulated NVIDIA device plugin's choice: JSON ``{pod: [device minors]}``. A GPU
        pod not listed gets minors 0 to its request minus 1 (see plan.py)."""
        return self.root / "gpu-devices.json"

    def load_gpu_devices(self) -> dict[str, list[int]]:
        if not self.gpu_devices_file.exists():
            return {}
        document = json.loads(self.gpu_devices_file.read_text())
        return {str(pod): [int(minor) for minor in minors] for pod, minors in document.items()}

    def save_gpu_devices(self, devices: dict[str, list[int]]) -> None:
        """Give pod ``pod`` the fake GPUs with these minors when it next starts."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.gpu_devices_file.write_text(json.dumps(devices, indent=2, sort_keys=True) + "\n")

    @property
    def ips_file(self) -> Path:
        return self.root / "ips.json"

    @property
    def hosts_file(self) -> Path:
        """The /etc/hosts every container mounts (the sandbox's stand-in for cluster DNS)."""
        return self.root / "hosts"

    @property
    def seccomp_file(self) -> Path:
        """The profile containers asking for seccomp `RuntimeDefault` get (sandbox/seccomp.py)."""
        return self.root / "seccomp-runtime-default.json"

    @property
    def pid_dir(self) -> Path:
        """The PID files of the containers the sandbox started (`podman --pidfile`), each
        named after its container, with its container ID beside it for some (`.id`)."""
        return self.root / "pids"

    @property
    def liveness_dir(self) -> Path:
        """The liveness prober's files (liveness.py): what to probe, its events, its PID."""
        return self.root / "liveness"

    @property
    def liveness_targets_file(self) -> Path:
        """The containers the liveness prober watches (JSON, written by the apply)."""
        return self.liveness_dir / "targets.json"

    @property
    def liveness_events_file(self) -> Path:
        """The prober's events, one a line, as `kubectl get events` shows the kubelet's."""
        return self.liveness_dir / "events.log"

    @property
    def pods_lock_file(self) -> Path:
        """Held (`hold_pods`) by whatever starts or stops pods: a command's apply, the
        StatefulSet controller stand-in's pass."""
        return self.root / "pods.lock"

    @property
    def ips_lock_file(self) -> Path:
        """Held while the pods' addresses are handed out and saved (`ips_file`)."""
        return self.root / "ips.lock"

    @property
    def kube_api_dir(self) -> Path:
        """The stand-in Kubernetes API's files (kube_api.py)."""
        return self.root / "kube-api"

    @property
    def kube_api_live_dir(self) -> Path:
        """What the stand-in API writes (the one directory it may): StatefulSet sizes and pod
        deletions, read by the StatefulSet controller stand-in."""
        return self.kube_api_dir / "live"

    @property
    def controller_dir(self) -> Path:
        """The StatefulSet controller stand-in's files (statefulsets.py): its inputs, what it
        has acted on, its log, its PID."""
        return self.root / "statefulset-controller"

    @property
    def controller_log(self) -> Path:
        """What the StatefulSet controller stand-in did, a line each."""
        return self.controller_dir / "controller.log"

    @property
    def ssh_key(self) -> Path:
        return self.root / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "ssh" / "known_hosts"

    def env_file(self, container: str) -> Path:
        """Environment of one container (may hold secret values: mode 0600)."""
        return self.root / "env" / f"{container}.env"

    def job_done(self, job: str) -> Path:
        """Marker of a Job that completed (Kubernetes keeps the finished Job object)."""
        return self.root / "jobs" / f"{job}.done"

    def forget_jobs_except(self, jobs: set[str]) -> None:
        """Drop the markers of Jobs no longer in the stack: `pulumi up` deletes those Job
        objects, so one that comes back under the same name runs again."""
        for marker in (self.root / "jobs").glob("*.done"):
            if marker.name.removesuffix(".done") not in jobs:
                marker.unlink()

    def load_ips(self) -> dict[str, str]:
        """Pod addresses handed out so far."""
        return json.loads(self.ips_file.read_text()) if self.ips_file.exists() else {}

    def save_ips(self, ips: dict[str, str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.ips_file.write_text(json.dumps(dict(sorted(ips.items())), indent=2) + "\n")

    def ssh_public_key(self) -> str:
        """The sandbox user's public key; the key pair is created on first use."""
        if not self.ssh_key.exists():
            self.ssh_key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            key = ed25519.Ed25519PrivateKey.generate()
            private = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            )
            fd = os.open(self.ssh_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(private)
            public = key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
            self.ssh_key.with_suffix(".pub").write_bytes(public + b" sandbox\n")
        return self.ssh_key.with_suffix(".pub").read_text().strip()


_held: dict[Path, tuple[threading.RLock, list[int]]] = {}  # per lock file: lock, [fd, depth]
_held_guard = threading.Lock()


@contextlib.contextmanager
def hold_pods(state: SandboxState, log: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the sandbox's pods lock while the block runs: one process at a time starts and
    stops its pods (a command's apply, the StatefulSet controller stand-in), as one controller
    owns a StatefulSet's pods. Re-entrant within a thread; another thread or process waits
    (``log`` says so once, when it has to)."""
    with _held_guard:
        lock, held = _held.setdefault(state.pods_lock_file, (threading.RLock(), [-1, 0]))
    with lock:
        if held[1] == 0:
            held[0] = take_lock(state.pods_lock_file, log, "the sandbox's pods")
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
            if held[1] == 0:
                os.close(held[0])


@contextlib.contextmanager
def hold_ips(state: SandboxState) -> Iterator[None]:
    """Hold the addresses lock while the block reads, hands out and saves addresses."""
    fd = take_lock(state.ips_lock_file, None, "the pods' addresses")
    try:
        yield
    finally:
        os.close(fd)


def take_lock(path: Path, log: Callable[[str], None] | None, what: str) -> int:
    """A descriptor holding an exclusive lock on ``path`` (created if missing); waits for it,
    saying so through ``log`` first if another holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if log is not None:
            log(f"waiting for {what}: another command or the StatefulSet controller acts on them")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def load_records(base: Path = DEFAULT_ROOT) -> list[SandboxRecord]:
    """The records of every sandbox whose state is under ``base``, by state directory."""
    if not base.is_dir():
        return []
    found = (SandboxState(root).load_record() for root in sorted(base.iterdir()))
    return [record for record in found if record is not None]
