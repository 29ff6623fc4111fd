"""gpu_driver, gpu_count and gpu_ecc against recorded ``nvidia-smi`` output."""

import time
from pathlib import Path

import pytest
from slurm_stack_healthchecks.checks.gpu import gpu_count, gpu_driver, gpu_ecc
from slurm_stack_healthchecks.context import Context
from slurm_stack_healthchecks.nvidia_smi import (
    ECC_ARGS,
    GPU_LIST_ARGS,
    ParseError,
    parse_ecc,
    parse_gpu_list,
)
from slurm_stack_healthchecks.result import CheckResult
from slurm_stack_healthchecks.runner import CommandTimeout, run_command

from tests.healthchecks.hc_helpers import FakeRunner, done, fixture, make_config

LIST = ("nvidia-smi", *GPU_LIST_ARGS)
ECC = ("nvidia-smi", *ECC_ARGS)
GPU_CHECKS = ["gpu_driver", "gpu_count", "gpu_ecc"]


def _ctx(runner: FakeRunner, expected_gpus: int = 8) -> Context:
    return Context(make_config(checks=GPU_CHECKS, expected_gpus=expected_gpus), runner=runner)


def _smi(gpus: str = "nvidia-smi-gpus-8xh100.csv", ecc: str = "nvidia-smi-ecc-8xh100-healthy.csv"):
    return FakeRunner({LIST: done(fixture(gpus)), ECC: done(fixture(ecc))})


def _all(ctx: Context) -> list[CheckResult]:
    return [gpu_driver(ctx), gpu_count(ctx), gpu_ecc(ctx)]


def test_the_queries_are_the_documented_ones() -> None:
    assert LIST == (
        "nvidia-smi",
        "--query-gpu=index,name,uuid,pci.bus_id",
        "--format=csv,noheader",
    )
    assert ECC == (
        "nvidia-smi",
        "--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
        "remapped_rows.pending,remapped_rows.failure",
        "--format=csv,noheader,nounits",
    )


def test_parsers_read_the_recorded_8xh100_output() -> None:
    gpus = parse_gpu_list(fixture("nvidia-smi-gpus-8xh100.csv"))
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[3].name == "NVIDIA H100 80GB HBM3"
    assert gpus[3].pci_bus_id == "00000000:5D:00.0"
    assert gpus[3].uuid.startswith("GPU-")
    ecc = parse_ecc(fixture("nvidia-smi-ecc-uncorrectable.csv"))
    assert ecc[4].uncorrected_volatile == 2
    assert ecc[4].retired_pages_pending is None  # [N/A] on H100: rows are remapped instead
    assert ecc[4].remapped_rows_pending is True
    assert ecc[0].problems() == []
    with pytest.raises(ParseError, match="expected 4 fields"):
        parse_gpu_list(fixture("nvidia-smi-no-driver.txt"))


def test_healthy_8xh100_node() -> None:
    runner = _smi()
    results = _all(_ctx(runner))
    assert results == [
        CheckResult("gpu_driver", True, ""),
        CheckResult("gpu_count", True, "8/8"),
        CheckResult("gpu_ecc", True, ""),
    ]
    # gpu_driver and gpu_count share one cached list query.
    assert runner.argvs() == [LIST, ECC]


def test_one_gpu_missing() -> None:
    result = gpu_count(_ctx(_smi(gpus="nvidia-smi-gpus-7of8.csv")))
    assert (result.ok, result.text) == (False, "gpu_count 7/8")


def test_lost_gpu_counts_the_rest_and_fails_the_driver() -> None:
    runner = FakeRunner({LIST: done(fixture("nvidia-smi-gpus-lost.txt"), 15), ECC: done("", 15)})
    ctx = _ctx(runner)
    assert gpu_count(ctx).text == "gpu_count 7/8"
    driver = gpu_driver(ctx)
    assert not driver.ok
    assert driver.detail.startswith("rc 15: Unable to determine the device handle")
    assert gpu_ecc(ctx).text == "gpu_ecc rc 15"


def test_more_gpus_than_configured_fails_too() -> None:
    assert gpu_count(_ctx(_smi(), expected_gpus=4)).text == "gpu_count 8/4"


@pytest.mark.parametrize(
    ("ecc", "detail"),
    [
        ("nvidia-smi-ecc-uncorrectable.csv", "gpu4 uncorrectable 2+remap pending"),
        ("nvidia-smi-ecc-remap-pending.csv", "gpu6 remap pending"),
        ("nvidia-smi-ecc-remap-failure.csv", "gpu2 remap failed"),
    ],
)
def test_ecc_problems(ecc: str, detail: str) -> None:
    assert gpu_ecc(_ctx(_smi(ecc=ecc))) == CheckResult("gpu_ecc", False, detail)


def test_ecc_fields_not_reported_do_not_fail() -> None:
    result = gpu_ecc(_ctx(_smi(ecc="nvidia-smi-ecc-not-reported.csv"), expected_gpus=2))
    assert result.ok


def test_ecc_of_a_lost_gpu_fails() -> None:
    result = gpu_ecc(_ctx(_smi(ecc="nvidia-smi-ecc-gpu-lost.txt")))
    assert (result.ok, result.text) == (False, "gpu_ecc gpu3 lost")


def test_driver_hang_costs_one_timeout_for_all_gpu_checks() -> None:
    runner = FakeRunner({("nvidia-smi",): CommandTimeout(["nvidia-smi"], 5)})
    assert [r.text for r in _all(_ctx(runner))] == [
        "gpu_driver timeout after 5s",
        "gpu_count ?/8 (driver timeout)",
        "gpu_ecc driver timeout",
    ]
    assert len(runner.calls) == 1


def test_driver_hang_with_a_real_hanging_nvidia_smi(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    config = make_config(checks=GPU_CHECKS, expected_gpus=8, nvidia_smi_timeout_seconds=0.2)
    ctx = Context(config, runner=run_command)
    started = time.monotonic()
    results = _all(ctx)
    elapsed = time.monotonic() - started
    assert results[0].text == "gpu_driver timeout after 0.2s"
    assert not any(r.ok for r in results)
    assert elapsed < 1.5  # one timeout (+ reaping), not three


def test_missing_nvidia_smi_fails_only_where_gpus_are_expected() -> None:
    assert [r.ok for r in _all(_ctx(FakeRunner(), expected_gpus=8))] == [False, False, False]
    assert gpu_driver(_ctx(FakeRunner())).text == "gpu_driver nvidia-smi not found"
    assert gpu_count(_ctx(FakeRunner())).text == "gpu_count 0/8"
    assert all(r.ok for r in _all(_ctx(FakeRunner(), expected_gpus=0)))


def test_driver_not_loaded() -> None:
    runner = FakeRunner({("nvidia-smi",): done(fixture("nvidia-smi-no-driver.txt"), 9)})
    ctx = _ctx(runner)
    assert gpu_driver(ctx).detail.startswith("rc 9: NVIDIA-SMI has failed because it couldn't")
    assert gpu_count(ctx).detail.startswith("?/8 (rc 9: NVIDIA-SMI has failed")
    assert gpu_ecc(ctx).detail.startswith("rc 9: NVIDIA-SMI has failed")


def test_no_devices_found_is_zero_gpus() -> None:
    runner = FakeRunner({("nvidia-smi",): done(fixture("nvidia-smi-no-devices.txt"), 6)})
    ctx = _ctx(runner)
    assert gpu_driver(ctx).ok
    assert gpu_count(ctx).text == "gpu_count 0/8"
    assert gpu_ecc(ctx).ok
