"""The NCCL verdict: all_reduce_perf parsing, thresholds per GPU model, pass/fail reasons."""

import pytest
from slurm_stack_healthchecks.drain import Owner
from slurm_stack_healthchecks.nccl import (
    NcclOutputError,
    NcclResult,
    ThresholdError,
    parse_all_reduce,
    parse_thresholds,
    select_threshold,
    verdict,
)

from tests.healthchecks.hc_helpers import fixture


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
        ('{"h100": "350"}', "threshold for 'h100' must be a number > 0"),
        ('{"h100": 0}', "must be a number > 0"),
        ('{"h100": true}', "must be a number > 0"),
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
