"""Reading the kernel log: ``/dev/kmsg`` records or ``dmesg`` lines, with their timestamps.

Both formats carry the time since boot: ``/dev/kmsg`` as ``PRIO,SEQ,MICROSECONDS,FLAGS;text``
and ``dmesg`` as ``[ SECONDS.MICROS] text``. Lines in any other format (``journalctl``,
``dmesg -T``) keep their text without a timestamp.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .runner import Runner

KMSG_PATH = "/dev/kmsg"

_KMSG_RE = re.compile(r"^\d+,\d+,(?P<usec>\d+),[^;]*;(?P<msg>.*)$")
_DMESG_RE = re.compile(r"^\[\s*(?P<sec>\d+\.\d+)\]\s?(?P<msg>.*)$")


@dataclass(frozen=True)
class LogLine:
    """One kernel message; ``seconds_since_boot`` is ``None`` when the line had no timestamp."""

    seconds_since_boot: float | None
    message: str


def parse_kernel_log(lines: Iterable[str]) -> list[LogLine]:
    """Parse ``/dev/kmsg`` records, ``dmesg`` lines or plain lines (formats may mix)."""
    parsed = []
    for raw in lines:
        # /dev/kmsg continuation lines (" SUBSYSTEM=pci") are metadata of the previous record.
        if not raw.strip() or raw.startswith(" "):
            continue
        line = raw.rstrip("\n")
        if match := _KMSG_RE.match(line):
            parsed.append(LogLine(int(match["usec"]) / 1e6, match["msg"]))
        elif match := _DMESG_RE.match(line):
            parsed.append(LogLine(float(match["sec"]), match["msg"]))
        else:
            parsed.append(LogLine(None, line))
    return parsed


def read_kmsg(path: str = KMSG_PATH) -> list[LogLine]:
    """Every record still in the kernel ring buffer, without blocking.

    Each ``read()`` of ``/dev/kmsg`` returns one record; ``EAGAIN`` means the end was reached,
    ``EPIPE`` that records were overwritten while reading (skip on). A regular file (tests)
    reads to EOF. Raises ``OSError`` when the log cannot be opened (e.g. no ``CAP_SYSLOG``).
    """
    chunks = []
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return parse_kernel_log(b"".join(chunks).decode("utf-8", "replace").splitlines())


def read_dmesg(runner: Runner, timeout: float) -> list[LogLine]:
    """``dmesg`` output (which prints ``[seconds]`` timestamps by default)."""
    result = runner(["dmesg"], timeout=timeout)
    if result.returncode != 0:
        raise OSError(f"dmesg exited {result.returncode}: {result.stderr.strip()[:80]}")
    return parse_kernel_log(result.stdout.splitlines())
