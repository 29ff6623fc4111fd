"""munge answers: its socket exists and a credential round-trips."""

from __future__ import annotations

import os
import stat

from ..context import Context
from ..registry import check
from ..result import CheckResult
from ..runner import CommandError


@check("munge")
def munge(ctx: Context) -> CheckResult:
    """``munge_socket`` is a socket, and ``munge -n | unmunge`` through it succeeds."""
    socket_path = ctx.config.munge_socket
    try:
        is_socket = stat.S_ISSOCK(os.stat(socket_path).st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        return CheckResult.failed("munge", "socket missing")
    timeout = ctx.config.command_timeout_seconds
    try:
        encoded = ctx.runner(["munge", "-n", "-S", socket_path], timeout=timeout)
        if encoded.returncode != 0 or not encoded.stdout.strip():
            return CheckResult.failed("munge", f"encode failed rc {encoded.returncode}")
        decoded = ctx.runner(["unmunge", "-S", socket_path], timeout=timeout, stdin=encoded.stdout)
    except CommandError as exc:
        return CheckResult.failed("munge", str(exc)[:60])
    if decoded.returncode != 0:
        return CheckResult.failed("munge", f"decode failed rc {decoded.returncode}")
    return CheckResult.passed("munge")
