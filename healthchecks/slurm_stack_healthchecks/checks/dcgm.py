"""Optional DCGM diagnostics: ``dcgmi diag -r 1`` among the quick checks, and the reading of any
level's output (the NCCL benchmark job runs ``-r 3``)."""

from __future__ import annotations

import re

from ..context import Context
from ..registry import check
from ..result import CheckResult
from ..runner import CommandNotFound, CommandTimeout

# A result row of the diag table: "| Inforom                   | Pass       |".
_ROW_RE = re.compile(r"^\|\s*(?P<test>[^|]*?)\s*\|\s*(?P<result>Pass|Fail|Skip|Warn)\b", re.M)


def parse_diag(text: str) -> list[tuple[str, str]]:
    """``(test name, "Pass" | "Fail" | "Skip" | "Warn")`` rows of ``dcgmi diag`` table output.

    A row with an empty name (a per-GPU continuation, ``|  | Fail - GPU: 2 |``) belongs to the
    test above it.
    """
    rows: list[tuple[str, str]] = []
    for match in _ROW_RE.finditer(text):
        name = match["test"] or (rows[-1][0] if rows else "?")
        rows.append((name, match["result"]))
    return rows


def diag_failure(returncode: int, stdout: str) -> str | None:
    """What is wrong according to one ``dcgmi diag`` run (``"fail Memory Bandwidth"``,
    ``"rc 226"``, ``"no diag results"``), or ``None`` when it passed: no test row says
    ``Fail``, the exit status is 0 and there is at least one result row."""
    rows = parse_diag(stdout)
    failed = list(dict.fromkeys(name for name, outcome in rows if outcome == "Fail"))
    if failed:
        return "fail " + ", ".join(failed)
    if returncode != 0:
        return f"rc {returncode}"
    if not rows:
        return "no diag results"
    return None


# Exit statuses of `timeout ... dcgmi` in the benchmark job that are not dcgmi's own.
_TIMED_OUT = (124, 137)
_NOT_FOUND = 127


def job_diag_failure(exit_status: int, stdout: str) -> str | None:
    """:func:`diag_failure` for the benchmark job's ``timeout ... dcgmi diag -r 3``, whose exit
    status 124 or 137 means it timed out and 127 that the jail has no ``dcgmi``."""
    if exit_status in _TIMED_OUT:
        return "timeout"
    if exit_status == _NOT_FOUND:
        return "dcgmi not installed in the jail"
    return diag_failure(exit_status, stdout)


@check("dcgm")
def dcgm(ctx: Context) -> CheckResult:
    """``dcgmi diag -r 1`` passes (:func:`diag_failure`). It runs only where the stack asked for
    it (healthChecks.dcgm.quick), so a worker image without ``dcgmi`` fails it."""
    try:
        result = ctx.runner(["dcgmi", "diag", "-r", "1"], timeout=ctx.config.dcgm_timeout_seconds)
    except CommandNotFound:
        return CheckResult.failed("dcgm", "dcgmi not installed in the worker image")
    except CommandTimeout as exc:
        return CheckResult.failed("dcgm", f"timeout after {exc.timeout:g}s")
    failure = diag_failure(result.returncode, result.stdout)
    return CheckResult.passed("dcgm") if failure is None else CheckResult.failed("dcgm", failure)
