"""A `subPath` mount in the sandbox: the directory is made as the kubelet makes it, and a path
out of the volume is refused."""

import os
from pathlib import Path

import pytest

from slurm_stack.sandbox.apply import make_sub_path
from slurm_stack.sandbox.plan import Mount, checked_sub_path


def test_missing_directories_get_the_volume_roots_mode_and_root_as_owner(tmp_path: Path) -> None:
    volume = tmp_path / "claim"
    volume.mkdir(mode=0o750)
    volume.chmod(0o750)
    make_sub_path(volume, "var/lib/results")
    for directory in (volume / "var", volume / "var" / "lib", volume / "var" / "lib" / "results"):
        info = directory.stat()
        assert (oct(info.st_mode & 0o7777), info.st_uid, info.st_gid) == ("0o750", 0, 0)
    mount = Mount(str(volume), "/results", True, "var/lib/results")
    assert mount.host_path == f"{volume}/var/lib/results"
    make_sub_path(volume, "var/lib/results")  # present: left as it is


def test_a_symlink_on_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "var")
    with pytest.raises(ValueError, match="is a symlink"):
        make_sub_path(tmp_path, "var/lib")
    assert not (tmp_path / "elsewhere" / "lib").exists()


@pytest.mark.parametrize("sub_path", ["/etc", "../other-claim", "a/../../b"])
def test_a_sub_path_out_of_its_volume_is_refused(sub_path: str) -> None:
    with pytest.raises(ValueError, match="must be relative and stay in its volume"):
        checked_sub_path("pod-0", sub_path)
