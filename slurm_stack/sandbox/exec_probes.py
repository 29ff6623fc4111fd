"""Commands run in a container's namespaces from the host: exec probes, as the kubelet runs
them there, and the sandbox's quick exec as a container's unprivileged main user.

A `podman exec` costs a CPU about a quarter of a second; a pod waiting on a probe polled it
several times a second, and a cold start has several pods waiting at once on two cores.
`nsenter` into the container's main process costs a few milliseconds: the command runs with
the container's root, working directory, namespaces, environment and user.
What differs from the kubelet's exec through the runtime (listed in plan.py): the process is
outside the container's seccomp filter and, where it runs as root, keeps the capabilities of
the host's root; it is outside the container's cgroups too, except for `NsenterExec.probe`
(the liveness prober's), which joins them first, as runc's exec does: a frozen (paused)
container's probe then hangs until its timeout, as on a node.
"""

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

NSENTER = (
    shutil.which("nsenter") or "/usr/bin/nsenter"
)  # found on the host's PATH, not the container's


# Moves itself into each cgroup.procs file named before `--`, then execs what follows: a
# process that joins a frozen cgroup freezes, so the join happens after Popen has returned
# (a preexec_fn would block Popen itself) and the caller's timeout covers it.
JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'
MAX_OUTPUT = 10 * 1024  # the kubelet keeps this much of a probe's output (maxReadLength)


@dataclass(frozen=True)
class ProbeResult:
    """One probe's outcome, with what the kubelet would put in its event."""

    passed: bool
    output: str = ""
    timed_out: bool = False


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
        self._timed_out: list[subprocess.Popen[str]] = []  # killed, maybe not gone yet
        self._lock = threading.Lock()

    def pid(self, container: str) -> int | None:
        """The container's main process (asked of ``main_pid`` once it is gone); None while
        the container does not run."""
        pid = self._pids.get(container)
        if pid is None or not Path(f"/proc/{pid}").exists():
            pid = self._main_pid(container)
            if pid is None:
                self._pids.pop(container, None)
                return None
            self._pids[container] = pid
        return pid

    def probe(
        self,
        container: str,
        command: Sequence[str],
        *,
        user: int | None,
        group: int | None,
        timeout: float,
    ) -> ProbeResult:
        """An exec probe as the kubelet runs it: ``command`` in the container's namespaces
        and cgroups, as ``user``:``group``; it passes on exit 0 within ``timeout`` seconds.
        One that times out is killed and left behind (a frozen one dies once thawed)."""
        self._reap()
        pid = self.pid(container)
        if pid is None:
            return ProbeResult(False, f"container {container} is not running")
        try:
            process = subprocess.Popen(
                ["/bin/sh", "-c", JOIN_CGROUPS, "sh", *cgroup_procs_files(pid), "--",
                 *nsenter_command(pid, command, user, group)],
                env=container_environment(pid),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )  # fmt: skip
        except (OSError, ValueError) as error:  # the container's process is gone meanwhile
            return ProbeResult(False, str(error))
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            if process.stdout is not None:
                process.stdout.close()
            with self._lock:
                self._timed_out.append(process)
            quoted = json.dumps(" ".join(command))  # as Go's %q, which the kubelet uses
            return ProbeResult(False, f"command {quoted} timed out", True)
        return ProbeResult(process.returncode == 0, output[:MAX_OUTPUT].rstrip())

    def _reap(self) -> None:
        with self._lock:
            self._timed_out = [p for p in self._timed_out if p.poll() is None]

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
        pid = self.pid(container)
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
        pid = self.pid(container)
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


def cgroup_procs_files(pid: int) -> list[str]:
    """The `cgroup.procs` file of each cgroup process ``pid`` is in, one per hierarchy (cgroup
    v1's controllers and named hierarchies, and the unified one), where this host mounts it."""
    mounts = _cgroup_mounts()
    files = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        wanted = frozenset(filter(None, controllers.split(",")))
        for options, (root, point) in mounts.items():
            # The unified hierarchy has no controller in its line, a v1 hierarchy its own.
            if wanted <= options and bool(wanted) == bool(options):
                relative = path.removeprefix(root) if root != "/" else path
                files.append(f"{point}{relative.rstrip('/')}/cgroup.procs")
                break
    return files


def _cgroup_mounts() -> dict[frozenset[str], tuple[str, str]]:
    """This host's cgroup mounts, by their controllers (none for cgroup2): the root of the
    hierarchy each mounts, and where."""
    mounts: dict[frozenset[str], tuple[str, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        kind, _source, options = [*tail.split(" ", 2), "", ""][:3]
        if kind in ("cgroup", "cgroup2"):
            parts = fields.split()
            controllers = (
                frozenset(options.split(",")) - {"rw", "ro"} if kind == "cgroup" else frozenset()
            )
            mounts.setdefault(controllers, (_unescape(parts[3]), _unescape(parts[4])))
    return mounts


def _unescape(field: str) -> str:
    """A mountinfo path, whose space, tab, newline and backslash are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def is_frozen(pid: int) -> bool:
    """Whether process ``pid``'s cgroup is frozen (`podman pause`): cgroup v1's
    freezer.state, or v2's cgroup.freeze; false where that cannot be read (it is gone)."""
    try:
        directories = [Path(procs).parent for procs in cgroup_procs_files(pid)]
    except (OSError, ValueError):
        return False
    for directory in directories:
        for name, frozen in (("freezer.state", ("FROZEN", "FREEZING")), ("cgroup.freeze", ("1",))):
            try:
                if (directory / name).read_text().strip() in frozen:
                    return True
            except OSError:
                continue
    return False
