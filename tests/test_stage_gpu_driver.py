"""images/worker/stage-gpu-driver: this node's driver files gathered for the jail plugin.

Runs the real script as root in a private mount namespace, on a directory tree laid out as the
NVIDIA container runtime lays out a GPU pod.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "images" / "worker" / "stage-gpu-driver"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="bind mounts need root and unshare(1)",
)


@pytest.fixture
def pod(tmp_path: Path) -> Path:
    """A pod's library and tool directories with driver files and others beside them."""
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.550.54.15").write_text("driver libcuda\n")
    (lib / "libcuda.so.1").symlink_to("libcuda.so.550.54.15")
    (lib / "libnvidia-ml.so.1").write_text("driver nvml\n")
    (lib / "libcudart.so.12").write_text("CUDA runtime: belongs in the jail\n")
    (lib / "libc.so.6").write_text("not the driver\n")
    second = tmp_path / "usr/local/nvidia/lib64"
    second.mkdir(parents=True)
    (second / "libcuda.so.1").write_text("another driver's copy\n")
    (second / "libnvidia-ptxjitcompiler.so.1").write_text("another driver's ptxjit\n")
    bin_dir = tmp_path / "usr/bin"
    bin_dir.mkdir(parents=True)
    for tool in ("nvidia-smi", "ls"):
        (bin_dir / tool).write_text("#!/bin/sh\necho ran\n")
        (bin_dir / tool).chmod(0o755)
    return tmp_path


LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/local/nvidia/lib64")


def stage_and_run(
    pod: Path, then: str, lib_dirs: tuple[str, ...] = LIB_DIRS
) -> subprocess.CompletedProcess[str]:
    """Stage into <pod>/staged in a private mount namespace, then run `then` there."""
    env = {
        **os.environ,
        "GPU_DRIVER_LIB_DIRS": " ".join(f"{pod}/{d}" for d in lib_dirs),
        "GPU_DRIVER_BIN_DIRS": f"{pod}/usr/bin {pod}/missing/bin",
    }
    script = f'"$0" {pod}/staged && cd {pod}/staged && {then}'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script, str(SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_only_driver_files_are_staged_all_from_one_directory(pod: Path) -> None:
    result = stage_and_run(pod, "find . -mindepth 2 | sort")
    assert result.returncode == 0, result.stderr
    # The other directory's driver is never mixed in, not even a file the first one lacks.
    assert result.stdout.split() == [
        "./bin/nvidia-smi",
        "./lib/libcuda.so.1",
        "./lib/libcuda.so.550.54.15",
        "./lib/libnvidia-ml.so.1",
    ]
    assert "4 driver files of this node staged" in result.stderr


def test_the_first_directory_with_a_driver_is_chosen(pod: Path) -> None:
    (pod / "empty").mkdir()
    result = stage_and_run(
        pod, "find lib | sort", lib_dirs=("empty", "usr/local/nvidia/lib64", LIB_DIRS[0])
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["lib", "lib/libcuda.so.1", "lib/libnvidia-ptxjitcompiler.so.1"]


def test_a_file_that_cannot_be_bound_fails_the_staging(pod: Path) -> None:
    (pod / "usr/lib/x86_64-linux-gnu/libnvidia-odd.so.1").mkdir()  # not a file
    result = stage_and_run(pod, "echo staged")
    assert result.returncode != 0
    assert "stage-gpu-driver: error: cannot bind" in result.stderr
    assert "staged" not in result.stdout


def test_staged_files_are_the_pods_own_and_read_only(pod: Path) -> None:
    result = stage_and_run(
        pod,
        "readlink lib/libcuda.so.1; cat lib/libcuda.so.1 lib/libnvidia-ml.so.1; bin/nvidia-smi; "
        "echo x >> lib/libnvidia-ml.so.1 && echo wrote",
    )
    assert result.stdout.splitlines() == [
        "libcuda.so.550.54.15",
        "driver libcuda",
        "driver nvml",
        "ran",
    ]
    assert "Read-only file system" in result.stderr
    assert (pod / "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").read_text() == "driver nvml\n"


def test_a_restarted_container_stages_afresh_and_leaves_nothing_behind(pod: Path) -> None:
    # Twice in one namespace (a re-run) still gives one set; outside it nothing was written.
    result = stage_and_run(pod, f'"$0" {pod}/staged && find {pod}/staged -mindepth 2 | wc -l')
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4"
    assert list((pod / "staged").iterdir()) == []
