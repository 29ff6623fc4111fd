"""The real-GPU target, tests/gpu/run.sh: a minimal real Slurm with the project's rendered
configuration on this machine's NVIDIA GPUs. Skipped where there is no GPU (every CI machine);
on a GPU machine it needs the bundle that tests/gpu/build-bundle.sh builds (docs/gpu.md)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = Path(os.environ.get("GPU_BUNDLE", ROOT / "build" / "gpu-bundle"))


def _has_nvidia_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    return listed.returncode == 0 and listed.stdout.startswith("GPU ")


def test_slurm_with_our_configuration_runs_jobs_on_this_machines_gpus() -> None:
    if not _has_nvidia_gpu():
        pytest.skip("no NVIDIA GPU here: tests/gpu/run.sh runs on a GPU machine (docs/gpu.md)")
    if os.geteuid() != 0:
        pytest.skip("tests/gpu/run.sh needs root (namespaces, chroot, mounts)")
    assert (BUNDLE / "rootfs.tar.xz").exists(), (
        f"no bundle at {BUNDLE}: build it with `bash tests/gpu/build-bundle.sh` and carry it here"
    )
    run = subprocess.run(
        ["bash", str(ROOT / "tests" / "gpu" / "run.sh")],
        capture_output=True,
        text=True,
        timeout=540,
        env={**os.environ, "GPU_BUNDLE": str(BUNDLE)},
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ", 0 failed" in run.stdout
