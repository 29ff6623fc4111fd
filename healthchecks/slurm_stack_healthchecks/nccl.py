"""The NCCL benchmark's verdict: parse ``all_reduce_perf`` output, pick the GPU model's threshold,
compare the average bus bandwidth.

``all_reduce_perf`` (nccl-tests) prints a ``#``-commented header, one row per message size::

    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
       536870912     134217728     float     sum      -1   2632.1  203.97  356.94      0 ...

and a trailer with ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 365.123``.
The average is over the rows, out-of-place and in-place, so a threshold only means something
for the message-size range it was set with (the job fixes ``-b``/``-e``).

The output is read with :func:`read_output`, which trusts only a file the benchmark job itself
wrote into its own private directory: anybody else who can put a file where the verdict looks
could otherwise drain a healthy node or return a bad one to service.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .drain import MAX_REASON_LENGTH, NCCL_PREFIX

_ROW_RE = re.compile(
    r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+(?P<root>-?\d+)"
    r"\s+(?P<oop_time>[\d.]+)\s+(?P<oop_algbw>[\d.]+)\s+(?P<oop_busbw>[\d.]+)\s+(?P<oop_wrong>\S+)"
    r"\s+(?P<ip_time>[\d.]+)\s+(?P<ip_algbw>[\d.]+)\s+(?P<ip_busbw>[\d.]+)\s+(?P<ip_wrong>\S+)\s*$"
)
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>[\d.eE+-]+|nan|inf)", re.I)
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>\d+)\s*(?P<status>\w+)?")


class NcclOutputError(ValueError):
    """The output has no result (the benchmark did not finish)."""


class OutputRefused(ValueError):
    """The output is not one the benchmark job wrote for itself; it says nothing about the node."""


class ThresholdError(ValueError):
    """No usable threshold for the GPU model."""


@dataclass(frozen=True)
class NcclRow:
    """One message size; bandwidths in GB/s, times in microseconds; ``#wrong`` is ``None`` when
    the run did not validate (``N/A``)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None


@dataclass(frozen=True)
class NcclResult:
    """A parsed ``all_reduce_perf`` run."""

    rows: tuple[NcclRow, ...]
    avg_busbw: float
    out_of_bounds: int | None

    @property
    def wrong(self) -> int:
        """Wrong elements over all rows (validation errors)."""
        return sum((r.oop_wrong or 0) + (r.ip_wrong or 0) for r in self.rows)


def _wrong(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def parse_all_reduce(text: str) -> NcclResult:
    """Parse ``all_reduce_perf`` output; raises :class:`NcclOutputError` without the
    ``# Avg bus bandwidth`` line."""
    rows = []
    avg = None
    oob = None
    for line in text.splitlines():
        if match := _ROW_RE.match(line):
            rows.append(
                NcclRow(
                    int(match["size"]),
                    int(match["count"]),
                    match["type"],
                    match["redop"],
                    float(match["oop_time"]),
                    float(match["oop_algbw"]),
                    float(match["oop_busbw"]),
                    _wrong(match["oop_wrong"]),
                    float(match["ip_time"]),
                    float(match["ip_algbw"]),
                    float(match["ip_busbw"]),
                    _wrong(match["ip_wrong"]),
                )
            )
        elif match := _AVG_RE.match(line):
            avg = float(match["value"])
        elif match := _OOB_RE.match(line):
            oob = int(match["count"])
    if avg is None or not math.isfinite(avg):
        raise NcclOutputError("no '# Avg bus bandwidth' line: the benchmark did not finish")
    return NcclResult(tuple(rows), avg, oob)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO put in the file's place must not hang the verdict before fstat() sees it.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _check_owner_and_mode(
    info: os.stat_result, owner_uid: int, what: str, kind: str, is_kind: Callable[[int], bool]
) -> None:
    if not is_kind(info.st_mode):
        raise OutputRefused(f"{what} is not a {kind}")
    if info.st_uid != owner_uid:
        raise OutputRefused(f"{what} is owned by uid {info.st_uid}, not {owner_uid}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(info.st_mode)
        raise OutputRefused(f"{what} is writable by group or others (mode {mode:04o})")


def read_output(path: Path, owner_uid: int) -> str:
    """The text of the benchmark output ``path``, trusted only as the job's own file.

    The directory holding it is opened with ``O_NOFOLLOW`` and must be a directory owned by
    ``owner_uid`` (the uid the benchmark job runs as) that group and others cannot write, so
    nobody else can have put, linked or swapped anything in it; the file is opened in it
    (``openat``) with ``O_NOFOLLOW`` and, by ``fstat`` of the open descriptor, must be a regular
    file owned by ``owner_uid`` that group and others cannot write. Raises
    :class:`OutputRefused` when one of these fails, ``OSError`` when the file cannot be read
    (``FileNotFoundError`` when it does not exist).
    """
    parent = path.parent
    try:
        dir_fd = os.open(parent, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and parent.is_symlink():
            raise OutputRefused(f"directory {parent} is a symbolic link") from None
        raise
    try:
        _check_owner_and_mode(
            os.fstat(dir_fd), owner_uid, f"directory {parent}", "directory", stat.S_ISDIR
        )
        try:
            fd = os.open(path.name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutputRefused(f"{path} is a symbolic link") from None
            raise
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as file:
        _check_owner_and_mode(os.fstat(fd), owner_uid, str(path), "regular file", stat.S_ISREG)
        return file.read().decode("utf-8", errors="replace")


def parse_thresholds(text: str) -> dict[str, float]:
    """``'{"h100": 350, "H200": 420}'`` → ``{"h100": 350.0, "h200": 420.0}`` (GB/s, keys
    lower-cased); raises :class:`ThresholdError`."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThresholdError(f"thresholds are not valid JSON: {exc.msg}") from None
    if not isinstance(raw, Mapping) or not raw:
        raise ThresholdError('thresholds must be a JSON object like {"h100": 350}')
    thresholds: dict[str, float] = {}
    for key, value in raw.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise ThresholdError(f"threshold for {key!r} must be a finite number > 0 (GB/s)")
        if key.lower() in thresholds:
            raise ThresholdError(f"threshold for {key!r} given twice (keys ignore case)")
        thresholds[key.lower()] = float(value)
    return thresholds


def select_threshold(thresholds: Mapping[str, float], gpu_type: str) -> float:
    """The busbw threshold (GB/s) for ``gpu_type``, matched case-insensitively."""
    by_lower = {k.lower(): v for k, v in thresholds.items()}
    try:
        return by_lower[gpu_type.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(by_lower)) or "none"
        raise ThresholdError(
            f"no NCCL busbw threshold for GPU type {gpu_type!r} (known: {known})"
        ) from None


@dataclass(frozen=True)
class Verdict:
    """Pass or fail; ``reason`` is the drain reason when failing."""

    ok: bool
    busbw: float
    threshold: float
    reason: str | None


def verdict(result: NcclResult, threshold: float) -> Verdict:
    """Fail on wrong results (data corruption) or an average busbw below ``threshold``."""
    busbw = result.avg_busbw
    if result.wrong or result.out_of_bounds:
        wrong = result.wrong or result.out_of_bounds
        return Verdict(False, busbw, threshold, f"{NCCL_PREFIX} {wrong} wrong results")
    if busbw < threshold:
        shown = math.floor(busbw * 10) / 10  # never round up to the threshold: "349.9<350"
        reason = f"{NCCL_PREFIX} busbw {shown:.1f}<{threshold:g} GB/s"
        return Verdict(False, busbw, threshold, reason)
    return Verdict(True, busbw, threshold, None)


def with_dcgm(reason: str | None, dcgm_failure: str | None) -> str | None:
    """The drain reason for the benchmark's ``reason`` (``None``: it passed or gave no result)
    and the DCGM diagnostic's failure (``None``: it passed or did not run):
    ``"healthcheck: nccl busbw 120.0<350 GB/s, dcgm fail Memory Bandwidth"``."""
    if dcgm_failure is None:
        return reason
    dcgm = "dcgm " + " ".join(dcgm_failure.replace(";", ",").replace("=", ":").split())
    combined = f"{reason}, {dcgm}" if reason else f"{NCCL_PREFIX} {dcgm}"
    return combined[:MAX_REASON_LENGTH].rstrip()
