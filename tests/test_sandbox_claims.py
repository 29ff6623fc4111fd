"""The sandbox's claims: a filesystem of the requested size each, kept across remounts."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_stack.sandbox.apply import unmount_below
from slurm_stack.sandbox.claims import ensure_claim, image_of, image_size

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loop mounts need root")

MIB = 2**20


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    unmount_below(tmp_path, include_itself=False)


def test_a_claim_is_an_empty_filesystem_of_its_size(state: Path) -> None:
    claim = state / "claims" / "dev-jail"
    ensure_claim(claim, 64 * MIB)
    assert claim.is_mount()
    assert list(claim.iterdir()) == []  # as a provisioner hands it out: no lost+found
    assert (claim.stat().st_uid, claim.stat().st_mode & 0o7777) == (0, 0o755)
    assert image_of(claim) == state / "volumes" / "dev-jail.ext4"
    stats = os.statvfs(claim)
    assert 48 * MIB < stats.f_blocks * stats.f_frsize <= 64 * MIB  # less the journal
    # Full at its size, as the real volume is.
    result = subprocess.run(
        ["dd", "if=/dev/zero", f"of={claim}/fill", "bs=1M", "count=80"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "No space left on device" in result.stderr


def test_a_claim_keeps_its_files_when_mounted_again(state: Path) -> None:
    claim = state / "claims" / "dev-home"
    ensure_claim(claim, 32 * MIB)
    (claim / "alice").mkdir()
    (claim / "alice" / "notes").write_text("kept")
    ensure_claim(claim, 32 * MIB)  # mounted: nothing to do
    unmount_below(claim)  # as after a reboot
    assert not claim.is_mount() and not (claim / "alice").exists()
    ensure_claim(claim, 32 * MIB)
    assert (claim / "alice" / "notes").read_text() == "kept"


def test_a_directory_holding_data_from_before_images_is_left_as_it_is(state: Path) -> None:
    claim = state / "claims" / "dev-controller-state"
    claim.mkdir(parents=True)
    (claim / "job_state").write_text("state")
    ensure_claim(claim, 32 * MIB)
    assert not claim.is_mount() and (claim / "job_state").read_text() == "state"
    assert not image_of(claim).exists()


def test_an_image_is_no_larger_than_the_host_has_free(tmp_path: Path) -> None:
    stats = os.statvfs(tmp_path)
    free = stats.f_bavail * stats.f_frsize
    assert image_size(2**50, tmp_path) <= free
    assert image_size(MIB, tmp_path) == MIB
