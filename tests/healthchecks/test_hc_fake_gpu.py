"""The GPU stand-ins of images/fake-gpu answer what the health checks and the NCCL verdict
parse, so a GPU-less sandbox can exercise them."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_stack_healthchecks import registry
from slurm_stack_healthchecks.context import Context
from slurm_stack_healthchecks.nccl import NcclOutputError, parse_all_reduce, verdict
from slurm_stack_healthchecks.nvidia_smi import (
    ECC_ARGS,
    GPU_LIST_ARGS,
    RC_NO_DEVICES,
    parse_ecc,
    parse_gpu_list,
)
from slurm_stack_healthchecks.runner import CommandTimeout, run_command

from tests.healthchecks.hc_helpers import FIXTURES, make_config

FAKE_GPU = Path(__file__).resolve().parents[2] / "images" / "fake-gpu"
NVIDIA_SMI = FAKE_GPU / "nvidia-smi"
ALL_REDUCE_PERF = FAKE_GPU / "all_reduce_perf"


def _smi(state: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NVIDIA_SMI), *args],
        env={"PATH": "/usr/bin:/bin", "FAKE_GPU_DIR": str(state), **env},
        capture_output=True,
        text=True,
        timeout=10,
    )


def _all_reduce(state: Path, *args: str, node: str = "gpu-0") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ALL_REDUCE_PERF), *args],
        env={"PATH": "/usr/bin:/bin", "FAKE_GPU_DIR": str(state), "SLURMD_NODENAME": node},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("script", [NVIDIA_SMI, ALL_REDUCE_PERF])
def test_stand_ins_are_executable_and_say_what_they_are(script: Path) -> None:
    assert os.access(script, os.X_OK)
    assert "TEST STAND-IN" in script.read_text()[:300]


def test_default_gpus_answer_the_checks_queries(tmp_path: Path) -> None:
    listed = _smi(tmp_path, *GPU_LIST_ARGS, FAKE_GPU_COUNT="8")
    assert listed.returncode == 0, listed.stderr
    gpus = parse_gpu_list(listed.stdout)
    assert [g.index for g in gpus] == list(range(8))
    assert {g.name for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert len({g.uuid for g in gpus} | {g.pci_bus_id for g in gpus}) == 16
    ecc = _smi(tmp_path, *ECC_ARGS, FAKE_GPU_COUNT="8")
    rows = parse_ecc(ecc.stdout)
    assert (ecc.returncode, len(rows)) == (0, 8)
    assert all(row.problems() == [] for row in rows)
    assert _smi(tmp_path, "-L", FAKE_GPU_COUNT="2").stdout.startswith(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-"
    )


def test_without_a_count_it_lists_the_gpu_devices_it_can_see(tmp_path: Path) -> None:
    # What a process can open: one GPU per /dev/nvidiaN character device, ordered by minor,
    # whatever the minors; nvidiactl and friends are not GPUs. Identity follows the minor.
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia6", "nvidia4", "nvidiactl", "nvidia-uvm"):
        os.mknod(dev / name, stat.S_IFCHR | 0o666, os.makedev(195, 0))
    (dev / "nvidia7").write_text("not a device\n")
    listed = _smi(tmp_path, "-L", FAKE_GPU_DEV=str(dev)).stdout.splitlines()
    assert [line.split(":")[0] for line in listed] == ["GPU 0", "GPU 1"]
    assert listed[0].endswith("000000000004)") and listed[1].endswith("000000000006)"), listed
    rows = _smi(tmp_path, *GPU_LIST_ARGS, FAKE_GPU_DEV=str(dev)).stdout.splitlines()
    assert [row.split(", ")[3] for row in rows] == ["00000000:38:00.0", "00000000:48:00.0"]
    empty = tmp_path / "empty"
    empty.mkdir()
    none = _smi(tmp_path, "-L", FAKE_GPU_DEV=str(empty))
    assert (none.returncode, none.stdout) == (RC_NO_DEVICES, "No devices were found\n")


def test_files_replace_a_querys_output_and_status(tmp_path: Path) -> None:
    shutil.copyfile(FIXTURES / "nvidia-smi-ecc-uncorrectable.csv", tmp_path / "ecc.out")
    bad = [r for r in parse_ecc(_smi(tmp_path, *ECC_ARGS).stdout) if r.problems()]
    assert [r.index for r in bad] == [4]
    shutil.copyfile(FIXTURES / "nvidia-smi-gpus-lost.txt", tmp_path / "gpus.out")
    (tmp_path / "gpus.err").write_text("Unable to determine the device handle for GPU3\n")
    (tmp_path / "gpus.rc").write_text("15\n")
    lost = _smi(tmp_path, *GPU_LIST_ARGS)
    assert lost.returncode == 15
    assert lost.stdout == (FIXTURES / "nvidia-smi-gpus-lost.txt").read_text()
    assert lost.stderr.startswith("Unable to determine")


def test_no_gpus_and_unknown_queries(tmp_path: Path) -> None:
    none = _smi(tmp_path, *GPU_LIST_ARGS, FAKE_GPU_COUNT="0")
    assert (none.returncode, none.stdout) == (RC_NO_DEVICES, "No devices were found\n")
    other = _smi(tmp_path, "--query-gpu=temperature.gpu", "--format=csv")
    assert other.returncode == 2
    assert "unsupported query: --query-gpu=temperature.gpu --format=csv" in other.stderr


def test_hang_file_makes_it_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hang").touch()
    monkeypatch.setenv("FAKE_GPU_DIR", str(tmp_path))
    with pytest.raises(CommandTimeout):
        run_command([str(NVIDIA_SMI), *GPU_LIST_ARGS], timeout=0.3)


@pytest.mark.parametrize(("count", "outcome"), [("8", "8/8"), ("7", "7/8")])
def test_quick_gpu_checks_run_against_the_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: str, outcome: str
) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_GPU}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_GPU_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_GPU_COUNT", count)
    config = make_config(checks=["gpu_driver", "gpu_count", "gpu_ecc"], expected_gpus=8)
    results = registry.run_checks(Context(config), config.enabled_checks)
    assert [(r.name, r.ok) for r in results] == [
        ("gpu_driver", True),
        ("gpu_count", count == "8"),
        ("gpu_ecc", True),
    ]
    assert results[1].detail == outcome


@pytest.mark.parametrize("busbw", ["365.4", "200.125", "400"])
def test_all_reduce_perf_reports_the_configured_busbw(tmp_path: Path, busbw: str) -> None:
    (tmp_path / "busbw-gpu-0").write_text(f"{busbw}\n")
    (tmp_path / "busbw").write_text("1.5\n")  # for every other node
    proc = _all_reduce(tmp_path, "-b", "512M", "-e", "8G", "-f", "2", "-g", "8")
    assert proc.returncode == 0, proc.stderr
    result = parse_all_reduce(proc.stdout)
    assert result.avg_busbw == float(busbw)
    assert [r.size_bytes for r in result.rows] == [2**29, 2**30, 2**31, 2**32, 2**33]
    assert (result.wrong, result.out_of_bounds) == (0, 0)
    mean_of_rows = sum(r.oop_busbw for r in result.rows) / len(result.rows)
    assert mean_of_rows == pytest.approx(float(busbw), rel=1e-3)
    assert "nGpus 8 minBytes 536870912 maxBytes 8589934592" in proc.stdout
    other = parse_all_reduce(_all_reduce(tmp_path, "-g", "8", node="gpu-9").stdout)
    assert other.avg_busbw == 1.5


def test_all_reduce_perf_default_and_crash(tmp_path: Path) -> None:
    default = parse_all_reduce(_all_reduce(tmp_path, "-b", "1G", "-e", "1G", "-g", "1").stdout)
    assert default.avg_busbw == 400.0
    assert len(default.rows) == 1
    assert verdict(default, 350).ok
    (tmp_path / "busbw").write_text("crash\n")
    crashed = _all_reduce(tmp_path, "-g", "8")
    assert crashed.returncode == 1
    with pytest.raises(NcclOutputError):
        parse_all_reduce(crashed.stdout)
