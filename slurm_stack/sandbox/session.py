"""`sandbox up/down/status/ssh/exec`: a stack's rendered pods as a local podman cluster."""

import hashlib
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from slurm_stack.sandbox.apply import Applier, ApplyReport, Log, network_name, unmount_below
from slurm_stack.sandbox.images import ROOT, ensure_images
from slurm_stack.sandbox.plan import FAKE_DRIVER_LIBRARY_NAME, Plan, plan
from slurm_stack.sandbox.podman import SANDBOX_LABEL, Podman, container_name
from slurm_stack.sandbox.stack import SANDBOX_USER, render_for_sandbox
from slurm_stack.sandbox.state import DEFAULT_ROOT, SandboxState
from slurm_stack.spec.models import IMAGE_REVISION, ClusterSpec


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

    # -- building the plan --------------------------------------------------------------------

    def render(self) -> Plan:
        """Render the stack and plan its pods (addresses kept from earlier applies)."""
        self.state.root.mkdir(parents=True, exist_ok=True)
        stack = render_for_sandbox(self.stack_file, self.project, self.state)
        self._spec = stack.spec
        self._plan = plan(
            stack.manifests,
            str(self.state.root),
            subnet_for(stack.spec.name),
            ips=self.state.load_ips(),
            image_tag=f"{stack.spec.slurm_version}-{IMAGE_REVISION}",
        )
        self.state.save_ips({pod.name: pod.ip for pod in self._plan.pods})
        return self._plan

    @property
    def spec(self) -> ClusterSpec:
        if self._spec is None:
            self.render()
        assert self._spec is not None
        return self._spec

    @property
    def name(self) -> str:
        return self.spec.name

    def applier(self) -> Applier:
        return Applier(self.name, self.state, self.podman, self.log)

    # -- commands -----------------------------------------------------------------------------

    def up(self, *, build: bool = True) -> ApplyReport:
        """Set up podman, build images if their inputs changed, render, apply; idempotent."""
        if build:
            subprocess.run(["bash", str(ROOT / "scripts" / "setup-podman.sh")], check=True)
            if ensure_images(self.spec.slurm_version):
                self.log("images built")
        current = self.render()
        self._install_fake_gpu_tools()
        return self.applier().apply(current)

    def down(self, *, delete_data: bool = False) -> list[str]:
        """Remove the pods and network; with ``delete_data`` also every volume and key (then
        pods are killed at once: no preStop drain, as nothing they would save is kept)."""
        removed = self.applier().down(graceful=not delete_data)
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
        return self._plan or self.render()

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
        source = ROOT / "images" / "fake-gpu" / "nvidia-smi"
        target = self.state.root / "fake-gpu" / "bin" / "nvidia-smi"
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.exists():
            target.write_bytes(source.read_bytes())
            target.chmod(0o755)
        library = self.state.root / "fake-gpu" / "lib" / FAKE_DRIVER_LIBRARY_NAME
        library.parent.mkdir(parents=True, exist_ok=True)
        library.write_text(
            "TEST STAND-IN, not a library: it stands where the NVIDIA container runtime puts\n"
            "the node's driver library, so the sandbox can show it reaching the jail.\n"
        )
        for pod in self.current_plan.pods:
            if any(c.devices for c in pod.containers):
                (self.state.root / "fake-gpu" / pod.name).mkdir(parents=True, exist_ok=True)

    def kill_pod(self, name: str) -> ApplyReport:
        """Kill a long-running pod without its preStop hook or grace, as a crash or a lost
        node would, then let its controller bring it back under the same name (`apply`)."""
        self.node_container(name)  # a KeyError naming the pods if there is no such pod
        self.applier().kill_pod(name)
        return self.applier().apply(self.current_plan)

    def delete_pod(self, name: str) -> ApplyReport:
        """Delete a pod as `kubectl delete pod` or an eviction (`kubectl drain`) does: its
        preStop hook and grace period, then its controller brings it back under the same
        name (`apply`)."""
        self.node_container(name)  # a KeyError naming the pods if there is no such pod
        applier = self.applier()
        applier.remove_pod(name)
        return applier.apply(self.current_plan)

    def run_cron_job(self, name: str) -> None:
        """Run one of the stack's CronJobs now."""
        self.applier().run_cron_job(self.current_plan, name)

    def status(self) -> str:
        """Pods and their state, then `sinfo` from the controller."""
        out = self.podman.run(
            [
                "pod",
                "ps",
                "--filter",
                f"label={SANDBOX_LABEL}={self.name}",
                "--format",
                "{{.Name}}\t{{.Status}}\t{{.NumberOfContainers}} containers",
            ],
            check=False,
        ).stdout
        lines = [
            f"sandbox {self.name} (network {network_name(self.name)}, state {self.state.root})"
        ]
        lines.append(out.rstrip() or "no pods")
        if out.strip():
            sinfo = self.exec(self.pod_of("controller"), ["sinfo", "-N", "-l"], timeout=30)
            lines.append(sinfo.stdout.rstrip() or sinfo.stderr.rstrip())
        return "\n".join(lines)

    def login_hint(self) -> str:
        """How a person logs in."""
        argv = self.ssh_command()
        batch = argv.index("BatchMode=yes")  # a person may be asked for confirmation
        command = " ".join(shlex.quote(a) for a in argv[: batch - 1] + argv[batch + 1 :])
        return (
            f"log in:  python -m slurm_stack sandbox ssh --stack {self.state.root.name}\n"
            f"   or:   {command}"
        )


def exec_interactive(argv: list[str]) -> None:
    """Replace this process (ssh, podman exec -it)."""
    os.execvp(argv[0], argv)
