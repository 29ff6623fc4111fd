"""The chroot plugin's argument parser, built and unit-tested in C."""

import subprocess
from pathlib import Path

PLUGIN = Path(__file__).resolve().parent.parent / "chroot_plugin"


def test_argument_parser_unit_tests() -> None:
    build = subprocess.run(
        ["make", "-s", "-C", str(PLUGIN), "clean", "test"], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "passed, 0 failed" in build.stdout
    subprocess.run(["make", "-s", "-C", str(PLUGIN), "clean"], check=True)
