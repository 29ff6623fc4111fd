"""The NCCL verdict: all_reduce_perf parsing, thresholds per GPU model, pass/fail reasons, and
reading the output only as the benchmark job's own file."""

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from slurm_stack_healthchecks.drain import Owner
from slurm_stack_healthchecks.nccl import (
    NcclOutputError,
    NcclResult,
    OutputRefused,
    ThresholdError,
    parse_all_reduce,
    parse_thresholds,
    read_output,
    select_threshold,
    verdict,
)

from tests.healthchecks.hc_helpers import fixture, private_copy

ME = os.geteuid()
OTHER_UID = 54321  # nobody's, as another user of the node
as_root = pytest.mark.skipif(
    ME != 0,
    reason="giving a file to another uid (os.chown) needs root; the uid comparison "
    "itself is covered by test_output_of_another_uid_than_expected_is_refused",
)


def test_parses_the_passing_8xh100_run() -> None:
    result = parse_all_reduce(fixture("all_reduce_perf-8xh100-pass.txt"))
    assert result.avg_busbw == 365.384
    assert result.out_of_bounds == 0
    assert result.wrong == 0
    assert [r.size_bytes for r in result.rows] == [2**29, 2**30, 2**31, 2**32, 2**33]
    last = result.rows[-1]
    assert (last.count, last.dtype, last.redop) == (2147483648, "float", "sum")
    assert (last.oop_time_us, last.oop_algbw, last.oop_busbw, last.oop_wrong) == (
        40428.0,
        212.47,
        371.83,
        0,
    )
    assert (last.ip_busbw, last.ip_wrong) == (372.06, 0)


def test_parses_the_slow_run_with_noise_lines() -> None:
    result = parse_all_reduce(fixture("all_reduce_perf-8xh100-slow.txt"))
    assert result.avg_busbw == 200.073
    assert len(result.rows) == 5
    assert min(r.oop_busbw for r in result.rows) == 195.31


def test_wrong_results_are_counted() -> None:
    result = parse_all_reduce(fixture("all_reduce_perf-8xh100-wrong.txt"))
    assert (result.wrong, result.out_of_bounds) == (3, 3)


def test_a_crashed_run_has_no_result() -> None:
    with pytest.raises(NcclOutputError, match="Avg bus bandwidth"):
        parse_all_reduce(fixture("all_reduce_perf-8xh100-crashed.txt"))
    with pytest.raises(NcclOutputError):
        parse_all_reduce("")


def test_unvalidated_runs_report_wrong_as_unknown() -> None:
    text = fixture("all_reduce_perf-8xh100-pass.txt").replace("      0", "    N/A")
    result = parse_all_reduce(text)
    assert len(result.rows) == 5
    assert result.rows[0].oop_wrong is None
    assert result.wrong == 0


def test_thresholds_per_gpu_model() -> None:
    thresholds = parse_thresholds('{"H100": 350, "h200": 420.5, "a100": 230}')
    assert thresholds == {"h100": 350.0, "h200": 420.5, "a100": 230.0}
    assert select_threshold(thresholds, "h100") == 350.0
    assert select_threshold(thresholds, "H200") == 420.5
    assert select_threshold({"H100": 350.0}, " h100 ") == 350.0
    with pytest.raises(ThresholdError) as info:
        select_threshold(thresholds, "b200")
    assert str(info.value) == (
        "no NCCL busbw threshold for GPU type 'b200' (known: a100, h100, h200)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{h100: 350}", "not valid JSON"),
        ("[350]", "must be a JSON object"),
        ("{}", "must be a JSON object"),
        ('{"h100": "350"}', "threshold for 'h100' must be a finite number > 0"),
        ('{"h100": 0}', "must be a finite number > 0"),
        ('{"h100": true}', "must be a finite number > 0"),
        ('{"h100": 350, "H100": 360}', "given twice"),
    ],
)
def test_bad_thresholds(text: str, message: str) -> None:
    with pytest.raises(ThresholdError, match=message):
        parse_thresholds(text)


def test_verdicts() -> None:
    passing = verdict(parse_all_reduce(fixture("all_reduce_perf-8xh100-pass.txt")), 350)
    assert (passing.ok, passing.reason) == (True, None)
    slow = verdict(parse_all_reduce(fixture("all_reduce_perf-8xh100-slow.txt")), 350)
    assert (slow.ok, slow.reason) == (False, "healthcheck: nccl busbw 200.0<350 GB/s")
    assert Owner.NCCL.owns(slow.reason)
    wrong = verdict(parse_all_reduce(fixture("all_reduce_perf-8xh100-wrong.txt")), 350)
    assert (wrong.ok, wrong.reason) == (False, "healthcheck: nccl 3 wrong results")


def test_verdict_never_rounds_up_to_the_threshold() -> None:
    assert verdict(NcclResult((), 349.96, 0), 350).reason == (
        "healthcheck: nccl busbw 349.9<350 GB/s"
    )
    assert verdict(NcclResult((), 350.0, 0), 350).ok


OUTPUTS = [
    "all_reduce_perf-8xh100-pass.txt",
    "all_reduce_perf-8xh100-slow.txt",
    "all_reduce_perf-8xh100-wrong.txt",
]


@pytest.mark.parametrize("name", OUTPUTS)
def test_the_jobs_own_output_gives_the_same_verdict_as_before(tmp_path: Path, name: str) -> None:
    path = private_copy(tmp_path / "job", name)
    text = read_output(path, ME)
    assert text == fixture(name)
    assert verdict(parse_all_reduce(text), 350) == verdict(parse_all_reduce(fixture(name)), 350)


def test_a_missing_output_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir(mode=0o700)
    with pytest.raises(FileNotFoundError):
        read_output(tmp_path / "job" / "gpu-0-1.out", ME)


def _symlink(path: Path) -> None:  # to a passing output of ours beside it
    target = private_copy(path.parent, "all_reduce_perf-8xh100-pass.txt")
    path.unlink()
    path.symlink_to(target)


def _fifo(path: Path) -> None:  # would hang a plain open() for reading
    path.unlink()
    os.mkfifo(path, 0o600)


def _dir_symlink(path: Path) -> None:  # the private directory replaced by a link to it
    real = path.parent.rename(path.parent.with_name("elsewhere"))
    path.parent.symlink_to(real)


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        pytest.param(_symlink, "gpu-0-7.out is a symbolic link", id="symlink"),
        pytest.param(
            lambda p: p.chmod(0o620),
            "is writable by group or others (mode 0620)",
            id="group-writable",
        ),
        pytest.param(
            lambda p: p.chmod(0o606),
            "is writable by group or others (mode 0606)",
            id="world-writable",
        ),
        pytest.param(_fifo, "gpu-0-7.out is not a regular file", id="fifo"),
        pytest.param(
            lambda p: p.parent.chmod(0o1777),
            "job is writable by group or others (mode 1777)",
            id="shared-directory",
        ),
        pytest.param(lambda p: p.parent.chmod(0o770), "(mode 0770)", id="group-directory"),
        pytest.param(_dir_symlink, "job is a symbolic link", id="directory-symlink"),
        pytest.param(
            lambda p: os.chown(p, OTHER_UID, -1),
            f"owned by uid {OTHER_UID}, not {ME}",
            id="other-owner",
            marks=as_root,
        ),
        pytest.param(
            lambda p: os.chown(p.parent, OTHER_UID, -1),
            f"uid {OTHER_UID}, not {ME}",
            id="other-owner-directory",
            marks=as_root,
        ),
    ],
)
def test_an_output_the_job_did_not_write_for_itself_is_refused(
    tmp_path: Path, spoil: Callable[[Path], None], message: str
) -> None:
    path = private_copy(tmp_path / "job", "all_reduce_perf-8xh100-pass.txt").rename(
        tmp_path / "job" / "gpu-0-7.out"
    )
    spoil(path)
    with pytest.raises(OutputRefused, match=re.escape(message)):
        read_output(path, ME)


def test_output_of_another_uid_than_expected_is_refused(tmp_path: Path) -> None:
    path = private_copy(tmp_path / "job", "all_reduce_perf-8xh100-pass.txt")
    with pytest.raises(OutputRefused, match=f"is owned by uid {ME}, not {ME + 1}"):
        read_output(path, ME + 1)
