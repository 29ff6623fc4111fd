"""Optional DCGM quick diagnostic (``dcgmi diag -r 1``)."""

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


@check("dcgm")
def dcgm(ctx: Context) -> CheckResult:
    """``dcgmi diag -r 1`` exits 0 and no test row says ``Fail``. It runs only where the stack
    asked for it (healthChecks.dcgm.quick), so a worker image without ``dcgmi`` fails it."""
    try:
        result = ctx.runner(["dcgmi", "diag", "-r", "1"], timeout=ctx.config.dcgm_timeout_seconds)
    except CommandNotFound:
        return CheckResult.failed("dcgm", "dcgmi not installed in the worker image")
    except CommandTimeout as exc:
        return CheckResult.failed("dcgm", f"timeout after {exc.timeout:g}s")
    rows = parse_diag(result.stdout)
    failed = list(dict.fromkeys(name for name, outcome in rows if outcome == "Fail"))
    if failed:
        return CheckResult.failed("dcgm", "fail " + ", ".join(failed))
    if result.returncode != 0:
        return CheckResult.failed("dcgm", f"rc {result.returncode}")
    if not rows:
        return CheckResult.failed("dcgm", "no diag results")
    return CheckResult.passed("dcgm")
