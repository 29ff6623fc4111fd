"""Free space on scratch paths."""

from __future__ import annotations

from ..context import Context
from ..registry import check
from ..result import CheckResult


@check("disk")
def disk(ctx: Context) -> CheckResult:
    """Each of ``disk_paths`` has at least ``min_free_disk_percent`` free (for unprivileged
    users, i.e. ``f_bavail``)."""
    minimum = ctx.config.min_free_disk_percent
    problems = []
    for path in ctx.config.disk_paths:
        try:
            st = ctx.statvfs(path)
        except OSError:
            problems.append(f"{path} missing")
            continue
        if st.f_blocks == 0:
            continue  # pseudo filesystems report no size
        free = 100.0 * st.f_bavail / st.f_blocks
        if free < minimum:
            problems.append(f"{path} {free:.1f}%<{minimum:g}%")
    if problems:
        return CheckResult.failed("disk", ", ".join(problems))
    return CheckResult.passed("disk")
