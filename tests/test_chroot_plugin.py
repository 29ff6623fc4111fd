"""The chroot plugin in C: its argument parser, and its mounts and task limits run as root."""

import os
import subprocess
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parent.parent / "chroot_plugin"


def test_argument_parser_unit_tests() -> None:
    build = subprocess.run(
        ["make", "-s", "-C", str(PLUGIN), "clean", "test"], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stdout + build.stderr
    # The three unit-test programs ran (arguments, GPU selection, container images) and passed.
    assert build.stdout.count("passed, 0 failed") == 3, build.stdout
    subprocess.run(["make", "-s", "-C", str(PLUGIN), "clean"], check=True)


def test_jail_mounts_and_task_limits_as_root(tmp_path: Path) -> None:
    """The plugin's mount and capability code, run for real in forked children (no Slurm)."""
    if os.geteuid() != 0:
        pytest.skip("entering a jail needs root (mount namespaces, chroot)")
    build = subprocess.run(
        ["make", "-s", "-C", str(PLUGIN), "tests/test_jail_mounts"], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stdout + build.stderr
    try:
        run = subprocess.run(
            [str(PLUGIN / "tests" / "test_jail_mounts"), str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        subprocess.run(["make", "-s", "-C", str(PLUGIN), "clean"], check=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "10 passed, 0 failed"
