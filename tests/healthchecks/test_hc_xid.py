"""gpu_xid: kernel log formats, the fatal set, the recent window, an unreadable log."""

import os
from pathlib import Path

import pytest
from slurm_stack_healthchecks.checks.gpu_xid import gpu_xid
from slurm_stack_healthchecks.context import Context
from slurm_stack_healthchecks.kernel_log import (
    KMSG_PATH,
    LogLine,
    parse_kernel_log,
    read_dmesg,
    read_kmsg,
)
from slurm_stack_healthchecks.xid import (
    APPLICATION_XIDS,
    FATAL_XIDS,
    XidEvent,
    parse_xid_events,
    recent_fatal,
)

from tests.healthchecks.hc_helpers import FIXTURES, FakeRunner, done, fixture, make_config

# The XID 79 fixture's event is at 86391.2 s after boot.
NOW = 86391.2 + 600


def _check(*fixtures: str, now: float = NOW, **config) -> str:
    lines = [line for name in fixtures for line in parse_kernel_log(fixture(name).splitlines())]
    ctx = Context(
        make_config(checks=["gpu_xid"], **config),
        kernel_log=lambda: lines,
        now_since_boot=lambda: now,
    )
    result = gpu_xid(ctx)
    assert result.ok == (result.text == "gpu_xid")
    return result.text


def test_fatal_set_documented_choices() -> None:
    assert {48, 63, 64, 74, 79, 92, 94, 95, 119, 120} <= FATAL_XIDS
    assert {13, 31, 43, 45} <= APPLICATION_XIDS
    assert not FATAL_XIDS & APPLICATION_XIDS


def test_kernel_log_formats() -> None:
    kmsg = parse_kernel_log(fixture("kmsg-xid79.txt").splitlines())
    assert LogLine(86391.204741, kmsg[4].message) == kmsg[4]
    assert kmsg[4].message.startswith("NVRM: Xid (PCI:0000:5d:00): 79, pid=1101234")
    # The " SUBSYSTEM=pci" / " DEVICE=..." continuation lines are not messages.
    assert not any(line.message.startswith(("SUBSYSTEM", "DEVICE")) for line in kmsg)
    assert len(kmsg) == 8
    dmesg = parse_kernel_log(fixture("dmesg-xid79.txt").splitlines())
    assert [e for e in parse_xid_events(dmesg)] == [XidEvent(79, "0000:5d:00", 86391.204741)]
    journal = parse_kernel_log(fixture("journal-xid48.txt").splitlines())
    assert parse_xid_events(journal) == [XidEvent(48, "0000:18:00", None)]
    assert parse_xid_events([LogLine(1.0, "NVRM: Xid (0000:01:00): 79, GPU has fallen")]) == [
        XidEvent(79, "0000:01:00", 1.0)
    ]


def test_xid79_fails() -> None:
    assert _check("kmsg-xid79.txt") == "gpu_xid 79@0000:5d:00"
    assert _check("dmesg-xid79.txt") == "gpu_xid 79@0000:5d:00"


def test_application_xids_13_31_43_pass() -> None:
    events = parse_xid_events(parse_kernel_log(fixture("kmsg-xid-benign.txt").splitlines()))
    assert sorted({e.code for e in events}) == [13, 31, 43]
    assert _check("kmsg-xid-benign.txt", now=61877.3 + 60) == "gpu_xid"


def test_window_excludes_old_fatal_xids_and_null_means_since_boot() -> None:
    assert _check("kmsg-xid48-old.txt") == "gpu_xid"  # 48 and 63 at 3600 s, now ~86991 s
    assert (
        _check("kmsg-xid48-old.txt", xid_window_seconds=None)
        == "gpu_xid 48@0000:18:00,63@0000:18:00"
    )
    assert _check("kmsg-xid79.txt", now=86391.2 + 3601) == "gpu_xid"


def test_lines_without_timestamps_always_count() -> None:
    assert _check("journal-xid48.txt", now=10**9) == "gpu_xid 48@0000:18:00"


def test_fatal_set_is_configurable() -> None:
    assert _check("kmsg-xid79.txt", fatal_xids=[48]) == "gpu_xid"
    assert _check("kmsg-xid-benign.txt", now=61877.3 + 60, fatal_xids=[31]) == (
        "gpu_xid 31@0000:9a:00"
    )


def test_many_fatal_events_are_summarised() -> None:
    events = [XidEvent(code, f"0000:{i:02x}:00", 5.0) for i, code in enumerate([79] * 5)]
    fatal = recent_fatal(events, FATAL_XIDS, now_since_boot=10.0, window_seconds=60)
    assert len(fatal) == 5
    lines = [LogLine(5.0, f"NVRM: Xid (PCI:{e.pci}): {e.code}, pid=1, x") for e in events]
    ctx = Context(
        make_config(checks=["gpu_xid"]), kernel_log=lambda: lines, now_since_boot=lambda: 10.0
    )
    assert gpu_xid(ctx).detail == "79@0000:00:00,79@0000:01:00,79@0000:02:00,+2"


def test_unreadable_kernel_log_fails() -> None:
    def denied() -> list[LogLine]:
        raise PermissionError(1, "Operation not permitted")

    ctx = Context(make_config(checks=["gpu_xid"]), kernel_log=denied)
    assert gpu_xid(ctx).text == "gpu_xid kernel log unreadable (Operation not permitted)"


def test_read_kmsg_reads_records_from_a_file() -> None:
    lines = read_kmsg(str(FIXTURES / "kmsg-xid79.txt"))
    assert [e.code for e in parse_xid_events(lines)] == [79]


@pytest.mark.skipif(not os.access(KMSG_PATH, os.R_OK), reason="no readable /dev/kmsg here")
def test_read_kmsg_on_the_real_device_returns_without_blocking() -> None:
    lines = read_kmsg()
    assert lines
    assert all(line.seconds_since_boot is not None for line in lines)


def test_dmesg_source_through_the_runner(tmp_path: Path) -> None:
    runner = FakeRunner({("dmesg",): done(fixture("dmesg-xid79.txt"))})
    config = make_config(checks=["gpu_xid"], xid_source="dmesg")
    ctx = Context(config, runner=runner, now_since_boot=lambda: NOW)
    assert gpu_xid(ctx).text == "gpu_xid 79@0000:5d:00"
    assert runner.argvs() == [("dmesg",)]
    with pytest.raises(OSError, match="dmesg exited 1: dmesg: read kernel buffer failed"):
        read_dmesg(FakeRunner({("dmesg",): done("", 1, "dmesg: read kernel buffer failed")}), 5)
    missing = Context(config, runner=FakeRunner(), now_since_boot=lambda: NOW)
    assert gpu_xid(missing).text == "gpu_xid kernel log unreadable (dmesg: not found)"
