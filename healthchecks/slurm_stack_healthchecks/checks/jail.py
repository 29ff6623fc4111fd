"""The jail is mounted and populated: its marker file exists."""

from __future__ import annotations

from ..context import Context
from ..registry import check
from ..result import CheckResult
from ..runner import CommandError


@check("jail")
def jail(ctx: Context) -> CheckResult:
    """``jail_marker`` exists.

    Probed with ``test -e`` in a child process rather than ``os.stat``: the jail is a shared
    filesystem, and a stat on a hung mount would block this process for good, while a child can
    be abandoned at its timeout.
    """
    marker = ctx.config.jail_marker
    try:
        result = ctx.runner(["test", "-e", marker], timeout=ctx.config.command_timeout_seconds)
    except CommandError as exc:
        return CheckResult.failed("jail", f"probe failed ({exc})"[:70])
    if result.returncode != 0:
        return CheckResult.failed("jail", "marker missing")
    return CheckResult.passed("jail")
