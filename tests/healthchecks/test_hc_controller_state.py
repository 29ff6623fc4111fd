"""slurmctld's state files put back before a controller starts: what a real cluster's two
controllers left after a stalled primary came back (only `.old` copies), restored from the
newest whole copy, and nothing touched while a controller is in control."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from slurm_stack_healthchecks.controller_state import (
    KEPT_PREFIX,
    Restore,
    restore_state,
    restores_needed,
)

# What the real cluster's shared state directory held when both controllers crash-looped.
LEFT_BY_TWO_WRITERS = [
    "assoc_mgr_state", "assoc_mgr_state.old", "assoc_usage.old", "clustername",
    "fed_mgr_state.old", "hash.3", "heartbeat", "job_state.old", "last_config_lite",
    "last_tres", "node_state.old", "part_state", "part_state.old", "priority_last_decay_ran",
    "qos_usage", "resv_state", "trigger_state",
]  # fmt: skip


def test_the_files_with_only_an_old_copy_are_found() -> None:
    assert restores_needed(LEFT_BY_TWO_WRITERS) == [
        Restore("assoc_usage", "assoc_usage.old"),
        Restore("fed_mgr_state", "fed_mgr_state.old"),
        Restore("job_state", "job_state.old"),
        Restore("node_state", "node_state.old"),
    ]


@pytest.mark.parametrize(
    ("names", "wanted"),
    [
        (["job_state", "job_state.old", "job_state.new"], []),  # whole: a save under way
        (["job_state.old", "job_state.new"], [Restore("job_state", "job_state.new")]),
        (["job_state.new"], [Restore("job_state", "job_state.new")]),
        (["heartbeat", "clustername", "hash.7", ".old", ".new"], []),
        (["x.old.old"], [Restore("x.old", "x.old.old")]),
    ],
)
def test_the_newest_whole_copy_is_chosen(names: list[str], wanted: list[Restore]) -> None:
    assert restores_needed(names) == wanted


def make_state(directory: Path, names: list[str]) -> None:
    directory.mkdir()
    for name in names:
        if name.startswith("hash."):
            (directory / name).mkdir()
            (directory / name / "job.3").mkdir()
        else:
            (directory / name).write_text(f"saved as {name}\n")
            (directory / name).chmod(0o600)


def test_a_directory_no_controller_serves_is_restored_and_its_copies_kept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    make_state(state, LEFT_BY_TWO_WRITERS)
    lines: list[str] = []
    assert restore_state(state, lambda: False, lines.append, now=lambda: 0) == 0
    for name in ("assoc_usage", "fed_mgr_state", "job_state", "node_state"):
        assert (state / name).read_text() == f"saved as {name}.old\n"
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600
        assert (state / f"{name}.old").exists()  # copied, not moved
    assert (state / "part_state").read_text() == "saved as part_state\n"
    kept = state / f"{KEPT_PREFIX}19700101T000000Z"
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        n for n in LEFT_BY_TWO_WRITERS if not n.startswith("hash.")
    )
    assert (state / "hash.3" / "job.3").is_dir()
    assert not list(state.glob("*.restoring"))
    assert "result=restored file=job_state from=job_state.old" in "\n".join(lines)
    # The next start finds nothing to do, and asks no controller.
    assert restore_state(state, lambda: pytest.fail("asked"), lines.append) == 0


def test_nothing_is_touched_while_a_controller_is_in_control(tmp_path: Path) -> None:
    state = tmp_path / "state"
    make_state(state, ["job_state.old", "node_state"])
    lines: list[str] = []
    assert restore_state(state, lambda: True, lines.append) == 0
    assert sorted(p.name for p in state.iterdir()) == ["job_state.old", "node_state"]
    assert lines == ['controller-state result=left missing=job_state why="in control"']


def test_a_directory_that_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "state"
    not_a_directory.write_text("")
    lines: list[str] = []
    assert restore_state(not_a_directory, lambda: False, lines.append) == 1
    assert "result=error" in lines[0]
