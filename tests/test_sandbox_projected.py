"""ConfigMap and Secret volumes in the sandbox have the kubelet's layout and modes."""

import os
from pathlib import Path

import pytest

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


def test_modes_are_exact_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)
    try:
        write_projected(tmp_path / "v", [("a", b"1", 0o644), ("b", b"2", 0o440)], os.getgid())
    finally:
        os.umask(old)
    assert (tmp_path / "v" / "a").stat().st_mode & 0o7777 == 0o644
    assert (tmp_path / "v" / "b").stat().st_mode & 0o7777 == 0o440
    assert (tmp_path / "v" / "b").stat().st_gid == os.getgid()


def test_secret_bytes_are_only_written_into_a_file_with_its_final_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write(2) of a file's content finds the file already at its final mode and group:
    no moment where a 0644 file (open's default under umask 022) holds a 0400 key."""
    real_write = os.write
    seen: dict[str, list[tuple[int, int, bytes]]] = {}

    def write(fd: int, data: bytes) -> int:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(tmp_path)):
            status = os.fstat(fd)
            seen.setdefault(path, []).append((status.st_mode & 0o7777, status.st_gid, bytes(data)))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    files = [("munge.key", b"secret" * 1000, 0o400), ("sub/host_key", b"k" * 10, 0o440)]
    old = os.umask(0o022)
    try:
        write_projected(tmp_path / "keys", files, os.getgid())
    finally:
        os.umask(old)
    for relative, content, mode in files:
        path = os.path.realpath(tmp_path / "keys" / relative)
        writes = seen.get(path)
        assert writes, f"{relative}: its content was not written through write(2) on its own fd"
        assert b"".join(data for _, _, data in writes) == content
        assert {(m, g) for m, g, _ in writes} == {(mode, os.getgid())}, relative
