"""ConfigMap and Secret volume directories laid out as the kubelet lays them out.

The kubelet sets such a volume up as an emptyDir (directory mode 0777) and writes its files
with its AtomicWriter: the files live in a timestamped directory `..<time>`, `..data` is a
symlink to it, and each top-level name is a symlink `<name> -> ..data/<name>`. An update
writes a new timestamped directory and swaps `..data` in one rename, so a reader sees the old
files or the new ones, never a mix. Programs that check the modes of every directory on a
file's path (OpenSSH's StrictModes) see the 0777 volume directory, as they would on a node.
"""

import os
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

VOLUME_DIR_MODE = 0o777
DATA_LINK = "..data"


def write_projected(
    directory: Path, files: Iterable[tuple[str, bytes, int]], fs_group: int | None = None
) -> None:
    """Make ``directory`` hold exactly ``files`` (relative path, content, mode), atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(VOLUME_DIR_MODE)
    stamp = datetime.now(UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    payload = directory / stamp
    payload.mkdir(mode=0o755)
    top_level: set[str] = set()
    for relative, content, mode in files:
        target = payload / relative
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        _write_file(target, content, mode, fs_group)
        top_level.add(Path(relative).parts[0])
    staged_link = directory / "..data_tmp"
    staged_link.unlink(missing_ok=True)
    staged_link.symlink_to(stamp)
    staged_link.replace(directory / DATA_LINK)
    for entry in directory.iterdir():
        if entry.name.startswith(".."):
            if entry.name not in (DATA_LINK, stamp):
                shutil.rmtree(
                    entry
                ) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        elif entry.name not in top_level or not entry.is_symlink():
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    for name in sorted(top_level):
        link = directory / name
        if not link.is_symlink():
            link.symlink_to(f"{DATA_LINK}/{name}")


def _write_file(path: Path, content: bytes, mode: int, fs_group: int | None) -> None:
    """Create ``path`` with its final group and mode, then write ``content``: a Secret's bytes
    are never in a file that more users may read than its mode allows. The file is new
    (O_EXCL, in a fresh payload directory) and readable by its owner only until its group
    is set; fchmod then sets the mode exactly, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode & 0o600)
    try:
        if fs_group is not None:
            os.fchown(fd, -1, fs_group)
        os.fchmod(fd, mode)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
