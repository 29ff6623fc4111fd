"""Each node's quick-check results as a file: written whole, read back, and refused where
someone other than the checks could have written it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from slurm_stack_healthchecks.result import CheckResult
from slurm_stack_healthchecks.results_file import (
    ResultsFileError,
    read_results,
    results_path,
    write_results,
)

RESULTS = [
    CheckResult("munge", True, "", 0.012),
    CheckResult("gpu_count", False, "7/8", 0.25),
]


def test_results_are_written_and_read_back(tmp_path: Path) -> None:
    directory = tmp_path / "var" / "lib" / "healthchecks"
    path = write_results(directory, "gpu-0", RESULTS, finished=1764150000.5, seconds=0.4)
    assert path == directory / "gpu-0.json"
    assert oct(directory.stat().st_mode & 0o777) == "0o755"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    latest = read_results(directory, "gpu-0")
    assert latest is not None
    assert (latest.node, latest.finished, latest.seconds) == ("gpu-0", 1764150000.5, 0.4)
    assert [(c.name, c.ok, c.detail, c.seconds) for c in latest.checks] == [
        ("munge", True, "", 0.012),
        ("gpu_count", False, "7/8", 0.25),
    ]
    assert sorted(p.name for p in directory.iterdir()) == ["gpu-0.json"]  # no temporary left


def test_a_new_run_replaces_the_file_and_a_node_without_one_has_none(tmp_path: Path) -> None:
    write_results(tmp_path, "n1", RESULTS, finished=1.0, seconds=0.1)
    write_results(tmp_path, "n1", RESULTS[:1], finished=2.0, seconds=0.1)
    latest = read_results(tmp_path, "n1")
    assert latest is not None and latest.finished == 2.0 and len(latest.checks) == 1
    assert read_results(tmp_path, "n2") is None


def test_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    with pytest.raises(ResultsFileError, match="writable by group or others"):
        write_results(tmp_path, "n1", RESULTS, finished=1.0, seconds=0.1)
    assert not (tmp_path / "n1.json").exists()


def test_a_directory_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory away")
    os.chown(tmp_path, 1000, 1000)
    with pytest.raises(ResultsFileError, match="owned by uid 1000"):
        write_results(tmp_path, "n1", RESULTS, finished=1.0, seconds=0.1)


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ResultsFileError, match="not a directory"):
        write_results(tmp_path / "link", "n1", RESULTS, finished=1.0, seconds=0.1)


def test_a_planted_symlink_or_foreign_file_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("{}")
    (tmp_path / "n1.json").symlink_to(secret)
    with pytest.raises(ResultsFileError):
        read_results(tmp_path, "n1")
    (tmp_path / "n2.json").write_text(
        json.dumps({"node": "n1", "finished": 1, "seconds": 1, "checks": []})
    )
    with pytest.raises(ResultsFileError, match="names node 'n1'"):
        read_results(tmp_path, "n2")
    (tmp_path / "n3.json").write_text("not json")
    with pytest.raises(ResultsFileError):
        read_results(tmp_path, "n3")


@pytest.mark.parametrize("node", ["", "../etc/passwd", ".hidden"])
def test_a_node_name_that_is_not_a_file_name_is_refused(tmp_path: Path, node: str) -> None:
    with pytest.raises(ResultsFileError, match="not a file name"):
        results_path(tmp_path, node)
