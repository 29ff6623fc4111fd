"""Each node's latest quick-check results as a JSON file the exporter reads.

The quick checks run on every node as slurmd's HealthCheckProgram; the exporter runs once per
cluster. They share the jail's filesystem, so each run replaces ``<directory>/<node>.json``::

    {"node": "gpu-0", "finished": 1764150000.5, "seconds": 0.41,
     "checks": [{"name": "gpu_count", "ok": false, "seconds": 0.2, "detail": "7/8"}, ...]}

The file is written to a temporary name and renamed over the old one, so a reader sees a whole
file or the previous one. Users can read the directory (it is in the jail); only root on a node
can write it, and a directory anyone else could have planted or opened up is refused.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .result import CheckResult

# A node's file is a few hundred bytes; a bigger one was not written by us.
MAX_FILE_BYTES = 64 * 1024


class ResultsFileError(Exception):
    """The results could not be written, or a file is not one the checks wrote."""


@dataclass(frozen=True)
class NodeResults:
    """One node's latest run: when it finished, how long it took, and each check."""

    node: str
    finished: float
    seconds: float
    checks: tuple[CheckResult, ...]


def results_path(directory: Path, node: str) -> Path:
    """``<directory>/<node>.json``; raises :class:`ResultsFileError` on a name that is not a
    plain file name."""
    if not node or "/" in node or node.startswith("."):
        raise ResultsFileError(f"node name {node!r} is not a file name")
    return directory / f"{node}.json"


def _safe_directory(directory: Path) -> None:
    """Create ``directory`` (0755) if missing; refuse one that is a symlink, not ours, or
    writable by others: whoever can write there could plant a result for any node."""
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise ResultsFileError(f"{directory} is not a directory")
    if info.st_uid != os.geteuid():
        raise ResultsFileError(f"{directory} is owned by uid {info.st_uid}, not {os.geteuid()}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ResultsFileError(f"{directory} is writable by group or others")


def write_results(
    directory: Path, node: str, results: Sequence[CheckResult], finished: float, seconds: float
) -> Path:
    """Replace ``node``'s file in ``directory`` with ``results``; returns its path. Raises
    :class:`ResultsFileError` (or ``OSError``) when it cannot."""
    target = results_path(directory, node)
    _safe_directory(directory)
    document = {
        "node": node,
        "finished": finished,
        "seconds": seconds,
        "checks": [
            {"name": r.name, "ok": r.ok, "seconds": r.seconds, "detail": r.detail} for r in results
        ],
    }
    # mkstemp opens with O_EXCL under a random name: nothing planted there is followed.
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{node}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, separators=(",", ":"))
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def read_results(directory: Path, node: str) -> NodeResults | None:
    """``node``'s latest results, or ``None`` when it has no file yet. Raises
    :class:`ResultsFileError` on a file that is not a regular file of ours or not valid."""
    path = results_path(directory, node)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ResultsFileError(f"{path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            raise ResultsFileError(f"{path}: not a results file")
        text = handle.read(MAX_FILE_BYTES)
    try:
        return _parse(json.loads(text), node)
    except (ValueError, KeyError, TypeError) as exc:
        raise ResultsFileError(f"{path}: {exc}") from None


def _parse(raw: dict[str, Any], node: str) -> NodeResults:
    if raw["node"] != node:
        raise ValueError(f"names node {raw['node']!r}")
    checks = tuple(
        CheckResult(str(c["name"]), bool(c["ok"]), str(c.get("detail", "")), float(c["seconds"]))
        for c in raw["checks"]
    )
    return NodeResults(node, float(raw["finished"]), float(raw["seconds"]), checks)
