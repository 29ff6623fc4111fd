"""Shared helpers of the health-check tests: recorded fixtures and a scripted command runner."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HEALTHCHECKS_DIR = Path(__file__).resolve().parents[2] / "healthchecks"
if str(HEALTHCHECKS_DIR) not in sys.path:
    sys.path.insert(0, str(HEALTHCHECKS_DIR))

from slurm_stack_healthchecks import registry  # noqa: E402
from slurm_stack_healthchecks.config import Config, parse_config  # noqa: E402
from slurm_stack_healthchecks.runner import CommandNotFound, CommandResult  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"

Response = CommandResult | Exception | Callable[[tuple[str, ...], str | None], CommandResult]


def fixture(name: str) -> str:
    """The text of a recorded tool output under ``fixtures/``."""
    return (FIXTURES / name).read_text()


def private_copy(directory: Path, name: str) -> Path:
    """A copy of fixture ``name`` as the benchmark job leaves its output: a file of ours, mode
    0600, in ``directory``, which is made a directory of ours, mode 0700."""
    directory.mkdir(mode=0o700, exist_ok=True)
    directory.chmod(0o700)
    copy = directory / name
    shutil.copyfile(FIXTURES / name, copy)
    copy.chmod(0o600)
    return copy


def done(stdout: str = "", returncode: int = 0, stderr: str = "") -> CommandResult:
    """A finished command (argv is filled in by :class:`FakeRunner`)."""
    return CommandResult((), returncode, stdout, stderr)


class FakeRunner:
    """A :class:`~slurm_stack_healthchecks.runner.Runner` answering from a script.

    ``script`` maps argv prefixes to a result, an exception to raise, or a callable; the longest
    matching prefix wins; anything unscripted is "not found". Every call is recorded.
    """

    def __init__(self, script: dict[tuple[str, ...], Response] | None = None) -> None:
        self.script = dict(script or {})
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def __call__(
        self, argv: Sequence[str], *, timeout: float, stdin: str | None = None
    ) -> CommandResult:
        key = tuple(argv)
        assert timeout > 0
        self.calls.append((key, stdin))
        matches = [p for p in self.script if key[: len(p)] == p]
        if not matches:
            raise CommandNotFound(key)
        response = self.script[max(matches, key=len)]
        if isinstance(response, Exception):
            raise response
        if callable(response):
            return response(key, stdin)
        return CommandResult(key, response.returncode, response.stdout, response.stderr)

    def argvs(self, program: str | None = None) -> list[tuple[str, ...]]:
        """The argv of every call (of ``program`` only, if given)."""
        return [argv for argv, _ in self.calls if program is None or argv[0] == program]


def make_config(**values: Any) -> Config:
    """A validated config; ``checks`` defaults to none."""
    values.setdefault("checks", [])
    return parse_config(values, registry.names())
