"""Exec probes run in a container's namespaces from the host, as the kubelet runs them there.

A `podman exec` costs a CPU about a quarter of a second; a pod waiting on a probe polled it
several times a second, and a cold start has several pods waiting at once on two cores.
`nsenter` into the container's main process costs a few milliseconds: the probe's command
runs with the container's root, working directory, namespaces, environment and user.
What differs from the kubelet's exec through the runtime (listed in plan.py): the probe
process is outside the container's cgroup and seccomp filter and keeps the capabilities of
the host's root for the user it runs as.
"""

import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

NSENTER = (
    shutil.which("nsenter") or "/usr/bin/nsenter"
)  # found on the host's PATH, not the container's


def container_environment(pid: int) -> dict[bytes, bytes]:
    """The environment the container's main process started with."""
    environment: dict[bytes, bytes] = {}
    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        name, separator, value = entry.partition(b"=")
        if separator and name:
            environment[name] = value
    return environment


def nsenter_command(
    pid: int, command: Sequence[str], user: int | None, group: int | None
) -> list[str]:
    """nsenter's arguments to run ``command`` in the namespaces, root and working directory
    of process ``pid``, as ``user``:``group`` where the container sets them."""
    argv = [NSENTER, f"--target={pid}", "--mount", "--uts", "--ipc", "--net", "--pid"]
    argv += ["--cgroup", "--root", "--wd"]
    if group is not None:
        argv.append(f"--setgid={group}")
    if user is not None:
        argv.append(f"--setuid={user}")
    return [*argv, "--", *command]


class ExecProbes:
    """Runs exec probes of running containers; ``main_pid`` asks podman for a container's
    main process, once per container until that process is gone (a restart)."""

    def __init__(self, main_pid: Callable[[str], int | None]) -> None:
        self._main_pid = main_pid
        self._pids: dict[str, int] = {}

    def _pid(self, container: str) -> int | None:
        pid = self._pids.get(container)
        if pid is None or not Path(f"/proc/{pid}").exists():
            pid = self._main_pid(container)
            if pid is None:
                self._pids.pop(container, None)
                return None
            self._pids[container] = pid
        return pid

    def passes(
        self,
        container: str,
        command: Sequence[str],
        *,
        user: int | None = None,
        group: int | None = None,
        timeout: float = 10,
    ) -> bool:
        """Whether ``command`` exits 0 in ``container`` (false while it does not run)."""
        pid = self._pid(container)
        if pid is None:
            return False
        try:
            environment = container_environment(pid)
            result = subprocess.run(
                nsenter_command(pid, command, user, group),
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0
