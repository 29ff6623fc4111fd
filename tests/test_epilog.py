"""The worker's Epilog kills the ending job's user's processes that no slurmstepd tracks, and
nothing else: run for real with stand-in `ps` and `kill` on its PATH."""

import subprocess
from pathlib import Path

from tests.conftest import ROOT

EPILOG = ROOT / "images" / "worker" / "epilog"
# pid, ppid, real uid, effective uid, command
PROCESSES = [
    (1, 0, 0, 0, "slurmd"),
    (100, 1, 0, 0, "slurmstepd"),  # a running job's step
    (101, 100, 1000, 1000, "python"),  # its task: tracked
    (200, 1, 1000, 1000, "sleep"),  # left behind by the ending job: re-parented
    # The same user's next job: its slurmstepd runs with the user's effective uid while it
    # opens the job's output, and has no slurmstepd above it.
    (300, 1, 0, 1000, "slurmstepd"),
]
FAKE_PS = """#!/bin/sh
case "$*" in *ruid=*) column=3 ;; *) column=4 ;; esac
cat <<'TABLE' | awk -v c="$column" '{{ print $1, $2, $c, $5 }}'
{table}
TABLE
"""
FAKE_KILL = '#!/bin/sh\necho "$@" >> "{log}"\n'


def test_only_the_users_untracked_processes_are_killed(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    table = "\n".join(" ".join(map(str, p)) for p in PROCESSES)
    for name, text in (
        ("ps", FAKE_PS.format(table=table)),
        ("kill", FAKE_KILL.format(log=tmp_path / "killed")),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    run = subprocess.run(
        ["bash", str(EPILOG)],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "SLURM_JOB_ID": "987654321",
            "SLURM_JOB_UID": "1000",
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "killed").read_text().split() == ["-KILL", "200"]


def test_roots_jobs_leave_every_process_alone(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ps").write_text(f'#!/bin/sh\necho asked >> "{tmp_path}/ps-called"\n')
    (bin_dir / "ps").chmod(0o755)
    run = subprocess.run(
        ["bash", str(EPILOG)],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "987654321", "SLURM_JOB_UID": "0"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0 and run.stderr == ""
    assert not (tmp_path / "ps-called").exists()  # slurmd runs as root: nothing is looked at
