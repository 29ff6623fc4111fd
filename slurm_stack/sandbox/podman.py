"""podman command lines for the plan's pods and containers, and a thin way to run them.

The argument builders are pure (tested without podman); `Podman` only runs commands.
"""

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict, overload

from slurm_stack.sandbox.plan import Container, Pod

SANDBOX_LABEL = "slurm-stack.io/sandbox"
FINGERPRINT_LABEL = "slurm-stack.io/fingerprint"
COMPONENT_LABEL = "slurm-stack.io/component"
PRE_STOP_LABEL = "slurm-stack.io/pre-stop"
GRACE_LABEL = "slurm-stack.io/termination-grace-seconds"
JOB_LABEL = "slurm-stack.io/job"  # "true" on the pods of Jobs


class PodmanError(RuntimeError):
    """A podman command failed."""


class ListedPodContainer(TypedDict, total=False):
    """A container of a `podman pod ps --format json` entry (the fields read here)."""

    Id: str
    Names: str  # its one name
    Status: str  # running, exited, ...


class ListedPod(TypedDict, total=False):
    """A `podman pod ps --format json` entry (the fields read here)."""

    Name: str
    Labels: dict[str, str] | None
    Networks: list[str] | None
    Containers: list[ListedPodContainer] | None


class ListedContainer(TypedDict, total=False):
    """A `podman ps --all --format json` entry (the fields read here)."""

    Names: list[str]
    Labels: dict[str, str] | None
    State: str
    ExitCode: int
    Created: int | str  # seconds since the epoch; a date in some podman versions


def container_name(pod: Pod, container: Container) -> str:
    """Unique name of a pod's container: `<pod>--<container>`."""
    return f"{pod.name}--{container.name}"


def network_create_args(network: str, subnet: str, sandbox: str) -> list[str]:
    """A private bridge network; no DNS (the sandbox writes /etc/hosts, see plan.py)."""
    return [
        "network",
        "create",
        "--disable-dns",
        "--subnet",
        subnet,
        "--label",
        f"{SANDBOX_LABEL}={sandbox}",
        network,
    ]


def mac_address(ip: str) -> str:
    """The fixed, locally administered MAC address of the pod at ``ip``: a pod that comes back
    at its address also comes back at its MAC, so the host's and the other pods' neighbour
    caches stay right. (With a new MAC each time, connections to a re-created pod hang for
    several seconds until the stale neighbour entry is probed again.)"""
    return "02:53:" + ":".join(f"{int(octet):02x}" for octet in ip.split("."))


def gateway_of(subnet: str) -> str:
    """The gateway podman gives a /24 network: its first address, held by the bridge."""
    return subnet.split("/")[0].rsplit(".", 1)[0] + ".1"


def interface_with_address(address: str) -> str | None:
    """The host's interface that holds IPv4 ``address`` (a network's bridge holds its
    gateway), from the kernel in one `ip` call; None when none does."""
    out = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "to", f"{address}/32"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return out[1] if len(out) > 1 else None


def pin_bridge_address(interface: str, subnet: str) -> None:
    """Give the network's bridge a fixed MAC address (its gateway's, by ``mac_address``) once
    it exists. Linux gives a bridge without one the lowest MAC among its ports, which changes
    as pods come and go; a pod that had looked the gateway up then sends to a MAC nobody has
    (connections to the host hang until its neighbour entry is probed again, up to a minute).
    On Kubernetes a pod's gateway stays put. A no-op until the bridge exists (the network's
    first container creates it) and once its address has been set."""
    try:
        assigned = Path(f"/sys/class/net/{interface}/addr_assign_type").read_text().strip()
    except OSError:
        return
    if assigned == NET_ADDR_SET:
        return
    subprocess.run(
        ["ip", "link", "set", "dev", interface, "address", mac_address(gateway_of(subnet))],
        check=True,
        capture_output=True,
    )


def pid_of_container(pid_file: Path, container_id: str) -> int | None:
    """The PID ``pid_file`` names, if that process still runs in the container of
    ``container_id`` (its cgroup says so: a PID the kernel gave to another process since, or a
    restarted container's old one, is not it); else None."""
    try:
        pid = int(pid_file.read_text().strip())
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
    except (OSError, ValueError):
        return None
    return pid if container_id and f"libpod-{container_id}" in cgroups else None


def _id_file(pid_file: Path) -> Path:
    return pid_file.with_name(pid_file.name + ".id")


NET_ADDR_SET = "3"  # addr_assign_type of an address set by hand (include/uapi/linux/netdevice.h)


def pod_create_args(pod: Pod, network: str, sandbox: str, fingerprint: str) -> list[str]:
    """A pod with the plan's fixed address; /etc/hosts comes from the sandbox's hosts file."""
    return [
        "pod",
        "create",
        "--name",
        pod.name,
        "--hostname",
        pod.name,
        "--network",
        network,
        "--ip",
        pod.ip,
        "--mac-address",
        mac_address(pod.ip),
        "--no-hosts",
        "--label",
        f"{SANDBOX_LABEL}={sandbox}",
        "--label",
        f"{COMPONENT_LABEL}={pod.component}",
        "--label",
        f"{FINGERPRINT_LABEL}={fingerprint}",
        "--label",
        f"{GRACE_LABEL}={pod.grace_seconds}",
        *(["--label", f"{JOB_LABEL}=true"] if pod.job else []),
    ]


def container_create_args(
    pod: Pod,
    container: Container,
    env_file: str,
    hosts_file: str,
    *,
    restart: bool,
    runtime_default_seccomp: str = "",
    pid_file: str = "",
) -> list[str]:
    """`podman create` for one container, with the manifest's user, capabilities and mounts;
    ``pid_file`` receives its main process's host PID."""
    args = [
        "create",
        "--pod",
        pod.name,
        "--name",
        container_name(pod, container),
        "--env-file",
        env_file,
        "--mount",
        f"type=bind,src={hosts_file},dst=/etc/hosts,ro=true",
        "--label",
        f"{SANDBOX_LABEL}.role={container.role}",
    ]
    if pid_file:
        args += ["--pidfile", pid_file]
    if container.pre_stop:
        args += ["--label", f"{PRE_STOP_LABEL}={json.dumps(list(container.pre_stop))}"]
    if restart:  # the kubelet restarts containers of long-running pods
        args += ["--restart", "always"]
    if container.user is not None:
        user = str(container.user)
        if container.group is not None:
            user += f":{container.group}"
        args += ["--user", user]
    if pod.fs_group is not None:
        args += ["--group-add", str(pod.fs_group)]
    if container.privileged:
        args.append("--privileged")
    for cap in container.cap_drop:
        args += ["--cap-drop", cap.lower()]
    for cap in container.cap_add:
        args += ["--cap-add", cap.lower()]
    if container.no_new_privileges:
        args += ["--security-opt", "no-new-privileges"]
    if container.apparmor_unconfined:
        args += ["--security-opt", "apparmor=unconfined"]
    if container.privileged:
        pass  # podman, like the kubelet, gives a privileged container no seccomp filter
    elif container.seccomp == "RuntimeDefault":
        if not runtime_default_seccomp:
            raise ValueError(f"{container.name}: no file holds the RuntimeDefault seccomp profile")
        args += ["--security-opt", f"seccomp={runtime_default_seccomp}"]
    elif container.seccomp == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    else:
        raise ValueError(f"{container.name}: the sandbox cannot apply seccomp {container.seccomp}")
    for mount in container.mounts:
        spec = f"type=bind,src={mount.host_path},dst={mount.target}"
        args += ["--mount", spec + (",ro=true" if mount.read_only else "")]
    for source, target in container.devices:
        args += [
            "--device",
            f"{source}:{target}:r" if source == "/dev/kmsg" else f"{source}:{target}",
        ]
    if container.command:
        args += ["--entrypoint", json.dumps(list(container.command))]
    args.append(container.image)
    args += list(container.args)
    return args


def env_file_text(container: Container) -> str:
    """The container's environment as a podman env file (one `NAME=value` a line)."""
    lines = []
    for name, value in container.env:
        if "\n" in value:
            raise ValueError(f"env {name} of {container.name} spans lines; podman cannot pass it")
        lines.append(f"{name}={value}")
    return "".join(line + "\n" for line in lines)


@dataclass
class Podman:
    """Runs podman; raises PodmanError with podman's own message on failure."""

    binary: str = "podman"

    def run(
        self, args: Sequence[str], *, check: bool = True, timeout: float | None = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run `podman args…`, capturing output."""
        result = subprocess.run(
            [self.binary, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise PodmanError(
                f"podman {' '.join(args[:3])} … failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def exists(self, kind: str, name: str) -> bool:
        """Whether a pod, container, network or image of that name exists."""
        return self.run([kind, "exists", name], check=False).returncode == 0

    def running(self, container: str) -> bool:
        """Whether a container of that name exists and runs."""
        result = self.run(
            ["container", "inspect", "--format", "{{.State.Running}}", container], check=False
        )
        return result.returncode == 0 and result.stdout.strip() == "true"

    def run_tracked(self, args: Sequence[str], pid_file: Path) -> str:
        """`podman run --detach` with ``args`` (what follows `run`), the container's main PID
        written to ``pid_file`` and its ID beside it, for `runs`; returns the ID."""
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        started = self.run(["run", "--detach", "--pidfile", str(pid_file), *args])
        container_id = started.stdout.strip()
        _id_file(pid_file).write_text(container_id)
        return container_id

    def runs(self, container: str, pid_file: Path) -> bool:
        """Whether a container `run_tracked` started still runs: without a podman call while
        its main process does (`pid_of_container`), else asked of podman."""
        try:
            container_id = _id_file(pid_file).read_text().strip()
        except OSError:
            container_id = ""
        return pid_of_container(pid_file, container_id) is not None or self.running(container)

    def main_pid(self, container: str) -> int | None:
        """The host PID of a container's main process; None while it does not run."""
        pid = self.run(
            ["inspect", "--format", "{{.State.Pid}}", container], check=False
        ).stdout.strip()
        return int(pid) if pid.isdigit() and int(pid) > 0 else None

    @overload
    def labelled(self, kind: Literal["pod"], label: str) -> list[ListedPod]: ...
    @overload
    def labelled(self, kind: Literal["container"], label: str) -> list[ListedContainer]: ...
    def labelled(
        self, kind: Literal["pod", "container"], label: str
    ) -> list[ListedPod] | list[ListedContainer]:
        """Pods or containers carrying ``label`` (`key=value`), as podman lists them."""
        base = ["pod", "ps"] if kind == "pod" else ["ps", "--all"]
        out = self.run([*base, "--filter", f"label={label}", "--format", "json"]).stdout
        return json.loads(out or "[]")

    def exec(
        self, container: str, command: Sequence[str], *, timeout: float | None = 60, user: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in a running container (never raises on its exit status)."""
        options = ["--user", user] if user else []
        return self.run(["exec", *options, container, *command], check=False, timeout=timeout)

    def logs(self, container: str, tail: int = 40) -> str:
        """The last lines a container printed."""
        result = self.run(["logs", "--tail", str(tail), container], check=False)
        return (result.stdout + result.stderr).strip()
