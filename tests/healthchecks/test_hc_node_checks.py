"""jail, munge, disk and dcgm, healthy and not."""

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_stack_healthchecks.checks.dcgm import dcgm, parse_diag
from slurm_stack_healthchecks.checks.disk import disk
from slurm_stack_healthchecks.checks.jail import jail
from slurm_stack_healthchecks.checks.munge import munge
from slurm_stack_healthchecks.context import Context
from slurm_stack_healthchecks.result import CheckResult
from slurm_stack_healthchecks.runner import CommandTimeout, run_command

from tests.healthchecks.hc_helpers import FakeRunner, done, fixture, make_config

CREDENTIAL = "MUNGE:AwQFAAAWmRN3cXCt6sHb0PhPZ2UTp8t6iH1ZfH8zQmK3wU3v0y3y:\n"


@pytest.fixture
def munge_socket() -> Iterator[str]:
    # A real unix socket; a short directory keeps the path under the 108-byte sun_path limit.
    directory = tempfile.mkdtemp(prefix="hc-")
    path = os.path.join(directory, "munge.socket.2")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    yield path
    server.close()
    os.unlink(path)
    os.rmdir(directory)


def test_jail_marker(tmp_path: Path) -> None:
    marker = tmp_path / ".slurm-stack-populated"
    config = make_config(checks=["jail"], jail_marker=str(marker))
    assert jail(Context(config, runner=run_command)) == CheckResult("jail", False, "marker missing")
    marker.touch()
    assert jail(Context(config, runner=run_command)).ok


def test_jail_probe_timeout_on_a_hung_mount() -> None:
    runner = FakeRunner({("test",): CommandTimeout(["test"], 5)})
    result = jail(Context(make_config(checks=["jail"]), runner=runner))
    assert result.text == "jail probe failed (test: timeout after 5s)"


def _munge_runner(encode: int = 0, decode: int = 0) -> FakeRunner:
    return FakeRunner(
        {
            ("munge", "-n"): done(CREDENTIAL if encode == 0 else "", encode),
            ("unmunge",): done("STATUS:          Success (0)\n", decode),
        }
    )


def test_munge_round_trip(munge_socket: str) -> None:
    runner = _munge_runner()
    config = make_config(checks=["munge"], munge_socket=munge_socket)
    assert munge(Context(config, runner=runner)).ok
    assert runner.calls == [
        (("munge", "-n", "-S", munge_socket), None),
        (("unmunge", "-S", munge_socket), CREDENTIAL),
    ]


def test_munge_failures(munge_socket: str, tmp_path: Path) -> None:
    config = make_config(checks=["munge"], munge_socket=munge_socket)
    assert munge(Context(config, runner=_munge_runner(encode=1))).text == (
        "munge encode failed rc 1"
    )
    assert munge(Context(config, runner=_munge_runner(decode=15))).text == (
        "munge decode failed rc 15"
    )
    hung = FakeRunner({("munge",): CommandTimeout(["munge"], 5)})
    assert munge(Context(config, runner=hung)).text == "munge munge: timeout after 5s"
    regular_file = tmp_path / "not-a-socket"
    regular_file.touch()
    for path in (str(tmp_path / "absent"), str(regular_file)):
        runner = _munge_runner()
        result = munge(Context(make_config(checks=["munge"], munge_socket=path), runner=runner))
        assert result.text == "munge socket missing"
        assert runner.calls == []


class _Fs:
    def __init__(self, blocks: int, bavail: int) -> None:
        self.f_blocks = blocks
        self.f_bavail = bavail


def _statvfs(table: dict[str, _Fs]):
    def statvfs(path: str) -> _Fs:
        if path not in table:
            raise FileNotFoundError(2, "No such file or directory", path)
        return table[path]

    return statvfs


def test_disk_free_space() -> None:
    config = make_config(
        checks=["disk"], disk_paths=["/tmp", "/var/spool/slurmd"], min_free_disk_percent=5
    )
    healthy = _statvfs({"/tmp": _Fs(1000, 400), "/var/spool/slurmd": _Fs(1000, 50)})
    assert disk(Context(config, statvfs=healthy)).ok  # exactly 5% is enough
    low = _statvfs({"/tmp": _Fs(1000, 32), "/var/spool/slurmd": _Fs(1000, 900)})
    assert disk(Context(config, statvfs=low)).text == "disk /tmp 3.2%<5%"
    both = _statvfs({"/tmp": _Fs(1000, 0)})
    assert (
        disk(Context(config, statvfs=both)).text == "disk /tmp 0.0%<5%, /var/spool/slurmd missing"
    )


def test_disk_on_this_machine() -> None:
    config = make_config(checks=["disk"], disk_paths=["/"], min_free_disk_percent=0)
    assert disk(Context(config)).ok


def test_dcgm_diag_pass_and_fail() -> None:
    rows = parse_diag(fixture("dcgmi-diag-r1-fail.txt"))
    assert ("Page Retirement/Row Remap", "Fail") in rows
    assert ("Inforom", "Pass") in rows
    config = make_config(checks=["dcgm"])
    passing = FakeRunner({("dcgmi", "diag", "-r", "1"): done(fixture("dcgmi-diag-r1-pass.txt"))})
    assert dcgm(Context(config, runner=passing)) == CheckResult("dcgm", True, "")
    failing = FakeRunner(
        {("dcgmi", "diag", "-r", "1"): done(fixture("dcgmi-diag-r1-fail.txt"), 226)}
    )
    assert dcgm(Context(config, runner=failing)).text == "dcgm fail Page Retirement/Row Remap"


def test_dcgm_absent_hung_or_broken() -> None:
    config = make_config(checks=["dcgm"], dcgm_timeout_seconds=8)
    # Asked for by the stack but missing from the image: a failure, never a silent pass.
    absent = dcgm(Context(config, runner=FakeRunner()))
    assert absent == CheckResult("dcgm", False, "dcgmi not installed in the worker image")
    hung = FakeRunner({("dcgmi",): CommandTimeout(["dcgmi"], 8)})
    assert dcgm(Context(config, runner=hung)).text == "dcgm timeout after 8s"
    no_host_engine = FakeRunner(
        {
            ("dcgmi",): done(
                "Error: unable to establish a connection to the specified host: localhost\n", 255
            )
        }
    )
    assert dcgm(Context(config, runner=no_host_engine)).text == "dcgm rc 255"
