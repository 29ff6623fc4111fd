"""The project's images for a sandbox: built with `images/build.sh` when their inputs change."""

import fcntl
import hashlib
import subprocess
from pathlib import Path

from slurm_stack.spec.versions import DEBIAN_SUITE

ROOT = Path(__file__).resolve().parents[2]
# Everything the image builds copy; a change in any of these rebuilds.
IMAGE_INPUTS = ("images", "chroot_plugin", "healthchecks")
CACHE_DIR = Path("/var/cache/slurm-stack")


def inputs_digest(root: Path = ROOT) -> str:
    """A hash over every file the image builds read."""
    digest = hashlib.sha256()
    for top in IMAGE_INPUTS:
        for path in sorted((root / top).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".so", ".o"):
                continue
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def ensure_images(slurm_version: str, *, force: bool = False, quiet: bool = False) -> bool:
    """Build the images for ``slurm_version`` unless a build of the same inputs is stamped and
    its images still exist; returns whether it built. One build per version at a time: a
    second caller (the suite builds 24.11's images beside its first tests) waits for the
    first and then finds them built."""
    suite = DEBIAN_SUITE[slurm_version]  # type: ignore[index]  # a str from callers; KeyError names a bad one
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with (CACHE_DIR / f"images-{suite}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_unless_stamped(slurm_version, suite, force=force, quiet=quiet)


def _build_unless_stamped(slurm_version: str, suite: str, *, force: bool, quiet: bool) -> bool:
    stamp = CACHE_DIR / f"images-{suite}-{inputs_digest()}.built"
    if stamp.exists() and not force and _images_exist(slurm_version):
        return False
    subprocess.run(
        ["bash", str(ROOT / "images" / "build.sh"), suite],
        check=True,
        stdout=subprocess.DEVNULL if quiet else None,
    )
    for old in CACHE_DIR.glob(f"images-{suite}-*.built"):
        old.unlink()
    stamp.touch()
    return True


def _images_exist(slurm_version: str) -> bool:
    from slurm_stack.spec.models import IMAGE_REVISION

    tag = f"{slurm_version}-{IMAGE_REVISION}"
    names = (
        "controller",
        "worker",
        "login",
        "accounting",
        "munge",
        "rest",
        "ops",
        "sssd",
        "jail",
        "mariadb",
    )
    return all(
        subprocess.run(
            ["podman", "image", "exists", f"localhost/slurm-stack/{name}:{tag}"], check=False
        ).returncode
        == 0
        for name in names
    )
