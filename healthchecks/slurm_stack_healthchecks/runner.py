"""Running external commands with a hard timeout.

Every command the checks and the drain logic run goes through a :class:`Runner`, so tests can
substitute recorded tool output and the real one can guarantee that no command outlives its
timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# How long to wait for a killed child to be reaped before giving up on it.
_REAP_GRACE_SECONDS = 0.5


@dataclass(frozen=True)
class CommandResult:
    """A command that ran to completion (any exit status)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class CommandError(Exception):
    """A command that could not produce a :class:`CommandResult`."""

    def __init__(self, argv: Sequence[str], message: str) -> None:
        super().__init__(f"{argv[0] if argv else '?'}: {message}")
        self.argv = tuple(argv)


class CommandNotFound(CommandError):
    """The executable does not exist (or is not executable)."""

    def __init__(self, argv: Sequence[str]) -> None:
        super().__init__(argv, "not found")


class CommandTimeout(CommandError):
    """The command did not finish within its timeout and was killed."""

    def __init__(self, argv: Sequence[str], timeout: float) -> None:
        super().__init__(argv, f"timeout after {timeout:g}s")
        self.timeout = timeout


class Runner(Protocol):
    """Runs ``argv`` (no shell) and returns its output.

    Raises :class:`CommandNotFound` or :class:`CommandTimeout`; a non-zero exit status is a
    normal :class:`CommandResult`.
    """

    def __call__(
        self, argv: Sequence[str], *, timeout: float, stdin: str | None = None
    ) -> CommandResult: ...


def run_command(
    argv: Sequence[str],
    *,
    timeout: float | None,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """The real :class:`Runner`: ``subprocess`` in its own process group, killed on timeout
    (``None``: no limit, for the preStop hook's calls while a pool's `wait` policy has no
    deadline); ``env``: its environment instead of this process's."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
            env=None if env is None else dict(env),
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        raise CommandNotFound(argv) from None
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        _kill_and_abandon(proc)
        raise CommandTimeout(argv, expired.timeout) from None
    return CommandResult(tuple(argv), proc.returncode, stdout, stderr)


def _kill_and_abandon(proc: subprocess.Popen[str]) -> None:
    # subprocess.run() would wait() for the killed child without a limit, but a hung GPU driver
    # leaves nvidia-smi in uninterruptible sleep where SIGKILL never lands: wait briefly, then
    # leave the child behind (init reaps it) so the health check itself never hangs.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_REAP_GRACE_SECONDS)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
