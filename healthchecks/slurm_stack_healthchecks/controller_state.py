"""slurmctld's saved state, put back in place before a controller starts.

slurmctld saves each state file `X` as `X.new`, then moves `X` to `X.old` and `X.new` to `X`
(`save_buf_to_state` in Slurm's src/common/state_save.c: links in 24.11, renames from 26.05).
Two controllers that save into the shared directory at once (a primary resumed after a stall
while the backup hands control back, both stopped by their liveness probes) can leave a
file with only its `.old` copy, and from 25.05 slurmctld then refuses to start ("No Assoc
usage file ... to recover"), a backup that takes over included: both controllers crash-loop.
A single controller stopped between the two moves leaves `X.new`, complete (it is written
and synced before `X` moves).

When no controller is in control, a file whose `X` is missing is restored from `X.new`, else
from `X.old`, copied (the originals stay) and replaced whole. Slurm 24.11 fell back to `.old`
itself for the job, node, partition, reservation and trigger states; `slurmctld -i`, which
would start without them, is never used: it forgets every job whose file is missing.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .logline import format_line

TOOL = "controller-state"
NEWER_FIRST = (".new", ".old")
# A directory of the saved copies before the restore, for whoever looks into it afterwards.
KEPT_PREFIX = "before-restore-"


@dataclass(frozen=True)
class Restore:
    """One state file to put back: ``name`` from ``source`` (a name in the same directory)."""

    name: str
    source: str


def restores_needed(names: Iterable[str]) -> list[Restore]:
    """The state files among ``names`` (a directory's entries) with only a `.new` or `.old`
    copy left, each with the copy to restore it from: `.new` where there is one."""
    present = set(names)
    wanted: dict[str, Restore] = {}
    for name in sorted(present):
        for suffix in NEWER_FIRST:
            base = name.removesuffix(suffix)
            if name.endswith(suffix) and base and base not in present and base not in wanted:
                source = next(base + s for s in NEWER_FIRST if base + s in present)
                wanted[base] = Restore(base, source)
    return sorted(wanted.values(), key=lambda r: r.name)


def restore(directory: Path, restores: Iterable[Restore], stamp: str) -> Path:
    """Copy each restore's source to its name in ``directory``, whole or not at all, after
    keeping every top-level file as it was in ``KEPT_PREFIX + stamp``; that directory."""
    kept = directory / f"{KEPT_PREFIX}{stamp}"
    kept.mkdir(mode=0o700, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_file() and not entry.is_symlink():
            shutil.copy2(entry, kept / entry.name)
    for item in restores:
        partial = directory / f"{item.name}.restoring"
        shutil.copy2(directory / item.source, partial)
        with open(partial, "rb") as copied:
            os.fsync(copied.fileno())
        partial.replace(directory / item.name)
    return kept


def restore_state(
    directory: Path,
    controller_in_control: Callable[[], bool],
    log: Callable[[str], None],
    now: Callable[[], float] = time.time,
) -> int:
    """The `restore-state` command: put back what ``directory`` lacks, unless a controller
    is in control (it holds the state and saves it again itself). Exit status 0, or 1 when
    the directory cannot be read or written."""
    try:
        needed = restores_needed(entry.name for entry in directory.iterdir())
    except OSError as exc:
        log(format_line(TOOL, [("result", "error"), ("error", exc)]))
        return 1
    if not needed:
        return 0
    names = ",".join(item.name for item in needed)
    if controller_in_control():
        log(format_line(TOOL, [("result", "left"), ("missing", names), ("why", "in control")]))
        return 0
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now()))
    try:
        kept = restore(directory, needed, stamp)
    except OSError as exc:
        log(format_line(TOOL, [("result", "error"), ("missing", names), ("error", exc)]))
        return 1
    for item in needed:
        log(format_line(TOOL, [("result", "restored"), ("file", item.name), ("from", item.source)]))
    log(format_line(TOOL, [("result", "kept"), ("copies", kept)]))
    return 0
