"""ConfigMap and Secret volumes in the sandbox have the kubelet's layout and modes."""

import os
from pathlib import Path

from slurm_stack.sandbox.projected import write_projected


def test_layout_is_the_kubelets(tmp_path: Path) -> None:
    volume = tmp_path / "keys"
    write_projected(volume, [("a", b"1\n", 0o644), ("sub/b", b"2\n", 0o400)])
    assert volume.stat().st_mode & 0o777 == 0o777  # an emptyDir: what StrictModes refuses
    data = volume / "..data"
    assert data.is_symlink() and os.readlink(data).startswith("..")
    assert os.readlink(volume / "a") == "..data/a" and os.readlink(volume / "sub") == "..data/sub"
    assert (volume / "a").read_bytes() == b"1\n"
    assert (volume / "sub" / "b").stat().st_mode & 0o777 == 0o400
    assert sorted(p.name for p in volume.iterdir() if not p.name.startswith("..")) == ["a", "sub"]


def test_an_update_swaps_the_whole_set(tmp_path: Path) -> None:
    volume = tmp_path / "keys"
    write_projected(volume, [("a", b"1\n", 0o644), ("b", b"2\n", 0o644)])
    old = os.readlink(volume / "..data")
    write_projected(volume, [("a", b"3\n", 0o644), ("c", b"4\n", 0o644)])
    assert (volume / "a").read_bytes() == b"3\n" and (volume / "c").read_bytes() == b"4\n"
    assert not (volume / "b").exists() and not (volume / old).exists()
    assert len([p for p in volume.iterdir() if p.name.startswith("..")]) == 2  # ..data, payload


def test_a_flat_directory_from_an_older_sandbox_is_replaced(tmp_path: Path) -> None:
    volume = tmp_path / "keys"
    volume.mkdir()
    (volume / "a").write_bytes(b"old\n")
    write_projected(volume, [("a", b"new\n", 0o644)])
    assert (volume / "a").is_symlink() and (volume / "a").read_bytes() == b"new\n"
