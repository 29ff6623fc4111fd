"""NVIDIA XID events in kernel log lines, and which XIDs make a node unfit for jobs.

The driver logs ``NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.``.
``FATAL_XIDS`` are the codes whose immediate action in NVIDIA's XID catalog is a GPU reset, a
node reboot or hardware service, i.e. the GPU is not trustworthy until someone acts:

* 48 double-bit (uncorrectable) ECC error;
* 62 internal micro-controller halt;
* 63 row remapping / page retirement recorded: a reset is needed to apply it;
* 64 row remapping / page retirement failed to record (RMA territory);
* 74 NVLink error;
* 79 GPU has fallen off the bus;
* 92 high single-bit ECC error rate (a failing memory predictor);
* 94 contained ECC error (the app died; a reset applies the remap);
* 95 uncontained ECC error (other processes on the GPU may be corrupted);
* 119 GSP RPC timeout, 120 GSP error (the GPU firmware stopped answering);
* 140 unrecovered ECC error.

Not fatal, deliberately: 13 (graphics engine exception), 31 (GPU memory page fault), 43 (GPU
stopped processing), 45 (preemptive cleanup after an earlier error), 68 and 109: NVIDIA
attributes them to the application (an out-of-bounds access, a killed process); NVIDIA's own
Kubernetes device plugin ignores the same set. A node's config can replace the set
(``fatal_xids``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .kernel_log import LogLine

FATAL_XIDS: frozenset[int] = frozenset({48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
APPLICATION_XIDS: frozenset[int] = frozenset({13, 31, 43, 45, 68, 109})

# "PCI:" is absent in old drivers: "NVRM: Xid (0000:01:00): 79, ...".
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<code>\d+)\b")


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid`` line."""

    code: int
    pci: str
    seconds_since_boot: float | None


def parse_xid_events(lines: Iterable[LogLine]) -> list[XidEvent]:
    """The XID events in ``lines``, in order; other lines are skipped."""
    events = []
    for line in lines:
        match = _XID_RE.search(line.message)
        if match:
            events.append(
                XidEvent(int(match["code"]), match["pci"].lower(), line.seconds_since_boot)
            )
    return events


def recent_fatal(
    events: Iterable[XidEvent],
    fatal: Iterable[int],
    *,
    now_since_boot: float,
    window_seconds: float | None,
) -> list[XidEvent]:
    """Fatal events within the last ``window_seconds`` (all since boot when ``None``).

    An event without a timestamp counts: it is since boot, and the window cannot exclude it.
    """
    fatal_set = frozenset(fatal)
    oldest = None if window_seconds is None else now_since_boot - window_seconds
    return [
        e
        for e in events
        if e.code in fatal_set
        and (oldest is None or e.seconds_since_boot is None or e.seconds_since_boot >= oldest)
    ]
