"""Commands run in a container's namespaces from the host: exec probes, as the kubelet runs
them there, and the sandbox's quick exec as a container's unprivileged main user.

A `podman exec` costs a CPU about a quarter of a second; a pod waiting on a probe polled it
several times a second, and a cold start has several pods waiting at once on two cores.
`nsenter` into the container's main process costs a few milliseconds: the command runs with
the container's root, working directory, namespaces, environment and user.
What differs from the kubelet's exec through the runtime (listed in plan.py): the process is
outside the container's cgroup and seccomp filter and, where it runs as root, keeps the
capabilities of the host's root.
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


class NsenterExec:
    """Runs commands in running containers through nsenter: exec probes, and quick execs as
    an unprivileged main user; ``main_pid`` asks podman for a container's main process, once
    per container until that process is gone (a restart)."""

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
            result = run_in_container(pid, command, user, group, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0

    def run_as_main_user(
        self, container: str, command: Sequence[str], *, timeout: float | None
    ) -> subprocess.CompletedProcess[str] | None:
        """``command`` run as the container's main process runs, where that process is an
        unprivileged user with no supplementary group but its own: then nsenter's user switch
        gives the same process a `podman exec` would (no capability, no other group). None
        where it is not so, or the container does not run: the caller execs through podman."""
        pid = self._pid(container)
        if pid is None:
            return None
        try:
            user, group, groups = process_ids(pid)
        except OSError:
            return None
        if user == 0 or not groups <= {group}:
            return None
        return run_in_container(pid, command, user, group, timeout=timeout)


def process_ids(pid: int) -> tuple[int, int, set[int]]:
    """A process's real user, real group and supplementary groups."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    user = int(fields["Uid"].split()[0])
    group = int(fields["Gid"].split()[0])
    return user, group, {int(g) for g in fields["Groups"].split()}


def run_in_container(
    pid: int,
    command: Sequence[str],
    user: int | None,
    group: int | None,
    *,
    timeout: float | None,
) -> subprocess.CompletedProcess[str]:
    """``command`` in the namespaces, root, working directory and environment of process
    ``pid``, as ``user``:``group``; output captured as text, never raising on its exit."""
    return subprocess.run(
        nsenter_command(pid, command, user, group),
        env=container_environment(pid),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
