"""The life of a sandbox's background daemons (the liveness prober, liveness_server.py; the
StatefulSet controller stand-in, statefulset_controller.py): processes that outlive the
`sandbox up` that starts them, one of each per sandbox.

A daemon is a module run as `python -m MODULE STATE_DIR [LOCK_FD]`. A lock file in its
directory says whether one runs: `Daemon.start` takes the lock, starts the module detached
(a session of its own, no terminal) and hands the lock's descriptor to it, so that a second
`up` sees it running at once, before it has even loaded; the daemon holds it for its life
(`serve`). The PID file beside the lock names the process that holds it, for `Daemon.stop`
(SIGTERM, then SIGKILL, through a pidfd: no signal reaches a process that took its PID).
"""

import fcntl
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from slurm_stack.sandbox.state import SandboxState

STOP_TIMEOUT = 10.0  # seconds for a daemon to exit after SIGTERM, then after SIGKILL


def wait_gone(handle: int, timeout: float) -> bool:
    """Whether the process of pidfd ``handle`` exits within ``timeout`` seconds."""
    return bool(select.select([handle], [], [], timeout)[0])


@dataclass(frozen=True)
class Daemon:
    """One kind of background daemon: the module it runs, the directory (of a sandbox's
    state) that holds its lock and PID files, ``<stem>.lock`` and ``<stem>.pid``, and the
    file its stderr is appended to."""

    module: str
    directory: Callable[[SandboxState], Path]
    stem: str
    output: Callable[[SandboxState], Path]
    # Those this process started, to reap them once they exit.
    _children: list[subprocess.Popen[bytes]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def lock_file(self, state: SandboxState) -> Path:
        return self.directory(state) / f"{self.stem}.lock"

    def pid_file(self, state: SandboxState) -> Path:
        return self.directory(state) / f"{self.stem}.pid"

    def take_lock(self, state: SandboxState) -> int | None:
        """A descriptor holding the lock that says the daemon runs for this sandbox, held
        while it stays open here or in a child given it; None while another holds it."""
        self.directory(state).mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file(state), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def record(self, state: SandboxState, pid: int) -> None:
        """Note the PID of the daemon that holds the lock, for `stop`."""
        self.pid_file(state).write_text(f"{pid}\n")

    def pid(self, state: SandboxState) -> int | None:
        """The running daemon's PID; None when none runs (nobody holds its lock, or the
        recorded process is not this module for this sandbox)."""
        if not self.lock_file(state).exists():
            return None
        free = self.take_lock(state)
        if free is not None:
            os.close(free)
            return None
        try:
            pid = int(self.pid_file(state).read_text())
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        ours = self.module.encode() in command and str(state.root).encode() in command
        return pid if ours else None

    def start(
        self, state: SandboxState, prepare: Callable[[SandboxState], None] | None = None
    ) -> bool:
        """Start the daemon in the background unless one runs for this sandbox; returns
        whether it started one. ``prepare``, where given, runs first, under the lock. Costs a
        fork and exec (the daemon loads in its own time); the lock passes to it at once."""
        lock = self.take_lock(state)
        if lock is None:
            return False
        try:
            if prepare is not None:
                prepare(state)
            self._children[:] = [child for child in self._children if child.poll() is None]
            with open(self.output(state), "ab") as stderr:
                child = subprocess.Popen(
                    [sys.executable, "-m", self.module, str(state.root), str(lock)],
                    pass_fds=(lock,),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    cwd="/",
                    start_new_session=True,  # not the terminal's: a Ctrl-C of `up` spares it
                )
            self.record(state, child.pid)
            self._children.append(child)
        finally:
            os.close(lock)  # the daemon's copy holds it from here on
        return True

    def stop(self, state: SandboxState, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the daemon, if one runs: SIGTERM, then SIGKILL after ``timeout`` seconds
        (and as long again for it to go)."""
        pid = self.pid(state)
        if pid is None:
            return
        try:
            handle = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            signal.pidfd_send_signal(handle, signal.SIGTERM)
            if not wait_gone(handle, timeout):
                signal.pidfd_send_signal(handle, signal.SIGKILL)
                wait_gone(handle, timeout)
        except ProcessLookupError:
            pass
        finally:
            os.close(handle)
            for child in self._children:  # reaped, where this process started it
                if child.pid == pid:
                    child.poll()


# -- the daemon's side -------------------------------------------------------------------------


class Service(Protocol):
    """What a daemon runs: `run` until `stop` (called from a signal handler) ends it."""

    def run(self) -> None: ...

    def stop(self) -> None: ...


S = TypeVar("S", bound=Service)


def serve(
    daemon: Daemon,
    argv: Sequence[str],
    make: Callable[[SandboxState], S],
    *,
    title: str,
    announce: Callable[[S, str], None] | None = None,
) -> int:
    """The main function of ``daemon``'s module: run the service ``make`` builds for the
    sandbox whose state directory is ``argv[0]`` until SIGTERM or SIGINT, or until it ends on
    its own. ``argv[1]``, where given, is a descriptor holding the lock (`Daemon.start`);
    without it the lock is taken here (none runs, 0 returned, while another holds it).
    ``announce`` says the service started and stopped, as ``title``; stderr by default."""
    state = SandboxState(Path(argv[0]))
    if len(argv) > 1:
        lock = int(argv[1])
    else:
        taken = daemon.take_lock(state)
        if taken is None:
            return 0  # another runs for this sandbox
        lock = taken
        daemon.record(state, os.getpid())
    service = make(state)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: service.stop())
    say = announce or _to_stderr
    say(service, f"{title} {os.getpid()} for {state.root}: started")
    service.run()
    say(service, f"{title} {os.getpid()}: stopped")
    os.close(lock)
    return 0


def _to_stderr(_service: object, line: str) -> None:
    print(line, file=sys.stderr)
