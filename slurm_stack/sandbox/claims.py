"""PersistentVolumeClaims as filesystems of their own, as a block-backed volume gives a pod.

Each claim with a known size is an ext4 filesystem in a sparse image file of that size
(`<state>/volumes/<claim>.ext4`), loop-mounted on the claim's directory. So a claim fills up
at its size (ENOSPC, as on the real volume), survives `sandbox down`, and is written at the
speed of a filesystem of its own: this machine's root filesystem creates files slowly enough
that copying the jail image's root filesystem onto it took most of a cold start (about 20 s,
against about 3 s onto its own ext4; `benchmarks/sandbox_bench.py`).

A claim directory that already holds data but has no image (a state directory from before
claims had images) is left as a plain directory: nothing a user stored is moved or deleted.
"""

import os
import subprocess
from pathlib import Path

IMAGE_DIRECTORY = "volumes"


def image_of(claim_dir: Path) -> Path:
    """Where the filesystem image of the claim mounted on ``claim_dir`` lives."""
    return claim_dir.parent.parent / IMAGE_DIRECTORY / f"{claim_dir.name}.ext4"


def image_size(requested: int, host_dir: Path) -> int:
    """The image's size: the claim's request, at most what the host's filesystem has free
    (the image is sparse, so a larger one would only fail later, when written)."""
    stats = os.statvfs(host_dir)
    return min(requested, stats.f_bavail * stats.f_frsize)


def _run(args: list[str]) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")


def ensure_claim(claim_dir: Path, requested: int) -> None:
    """Make ``claim_dir`` the mounted filesystem of a claim of ``requested`` bytes: create and
    format its image on first use, mount it when it is not mounted (after `down` or a reboot).
    Idempotent; never formats an image that exists."""
    if claim_dir.is_mount():
        return
    claim_dir.mkdir(parents=True, exist_ok=True)
    image = image_of(claim_dir)
    if not image.exists():
        if any(claim_dir.iterdir()):
            return  # data from before claims had images: kept where it is
        image.parent.mkdir(parents=True, exist_ok=True)
        partial = image.with_suffix(".partial")
        with partial.open("wb") as handle:
            handle.truncate(image_size(requested, image.parent))
        # -m 0: no blocks reserved for root (a volume's whole size is the user's, as on a
        # provisioned volume); the journal stays, as a provisioner's mkfs leaves it.
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "root_owner=0:0", str(partial)])
        partial.rename(image)
        _run(["mount", "-o", "loop", str(image), str(claim_dir)])
        # The directory a provisioner hands out is empty; a fresh ext4 holds lost+found.
        (claim_dir / "lost+found").rmdir()
        return
    _run(["mount", "-o", "loop", str(image), str(claim_dir)])
