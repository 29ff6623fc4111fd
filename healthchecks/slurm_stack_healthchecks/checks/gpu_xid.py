"""Recent fatal NVIDIA XID errors in the kernel log."""

from __future__ import annotations

from ..context import Context
from ..registry import check
from ..result import CheckResult
from ..runner import CommandError
from ..xid import parse_xid_events, recent_fatal

# Distinct (code, GPU) pairs named in the detail; the rest are counted.
_MAX_NAMED = 3


@check("gpu_xid")
def gpu_xid(ctx: Context) -> CheckResult:
    """No fatal XID (``fatal_xids``) within ``xid_window_seconds`` (since boot when ``null``).

    An unreadable kernel log fails: the check was asked for and cannot vouch for the GPUs.
    """
    try:
        lines = ctx.read_kernel_log()
    except (OSError, CommandError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return CheckResult.failed("gpu_xid", f"kernel log unreadable ({reason})"[:70])
    fatal = recent_fatal(
        parse_xid_events(lines),
        ctx.config.fatal_xids,
        now_since_boot=ctx.now_since_boot(),
        window_seconds=ctx.config.xid_window_seconds,
    )
    if not fatal:
        return CheckResult.passed("gpu_xid")
    distinct = list(dict.fromkeys((e.code, e.pci) for e in fatal))
    named = ",".join(f"{code}@{pci}" for code, pci in distinct[:_MAX_NAMED])
    more = f",+{len(distinct) - _MAX_NAMED}" if len(distinct) > _MAX_NAMED else ""
    return CheckResult.failed("gpu_xid", named + more)
