"""A Slurm major upgrade, 24.11 to 26.05, on a running cluster; and no way back.

Booted from `Pulumi.upgrade.yaml` at 24.11, then `slurmVersion: "26.05"` and `up`, as a user
does. Slurm's order (doc/html/upgrades.shtml): slurmdbd converts the database first, then
slurmctld its state, then the slurmds, each pool node only when its jobs are done (the pool's
update policy). Jobs and login sessions run their pod's own Slurm client, so a job on a node
still at 24.11 runs 24.11's srun, and everything started after runs 26.05's; the jail's own
files are not touched. Every job's fate is read from sacct.

It boots both image sets; `.ci/run` builds 24.11's beside the first tests (scripts/test.sh).
Alone: `bash scripts/test-upgrade.sh`.
"""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_stack.program import StackConfigError
from slurm_stack.sandbox.apply import job_log
from tests.cluster.conftest import Cluster, running_stack, wait_for
from tests.cluster.test_updates import ended, submit

STACK = Path(__file__).resolve().parent / "Pulumi.upgrade.yaml"
NODES = ("upgrade-cpu-0", "upgrade-cpu-1")


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_stack(STACK, tmp_path_factory, 2)


def set_version(cluster: Cluster, version: str) -> None:
    def change(spec: dict) -> None:  # type: ignore[type-arg]
        spec["slurmVersion"] = version

    cluster.edit_stack(change)


def major(version_line: str) -> str:
    """`slurm-wlm 24.11.5` (Debian's `srun --version`) -> `24.11`."""
    return version_line.split()[-1].rsplit(".", 1)[0]


def versions(cluster: Cluster, job: str) -> list[str]:
    """The Slurm majors a job's `srun --version` printed, from its output file (26.05's also
    logs that the jail lacks a library of its http_parser plugin: docs/operations.md)."""
    out = cluster.ok(cluster.login(f"cat slurm-{job}.out"))
    return [major(line) for line in out.splitlines() if line.startswith("slurm-wlm ")]


def in_jail(cluster: Cluster, command: str) -> str:
    """A command run from the host in the jail's own files (not through any pod)."""
    result = subprocess.run(
        ["chroot", str(cluster.jail), "sh", "-c", command], capture_output=True, text=True
    )
    return cluster.ok(result)


def test_24_11_to_26_05_keeps_every_job_and_each_runs_its_nodes_client(upgrade: Cluster) -> None:
    cluster = upgrade
    assert all(cluster.node_field(n, "Version").startswith("24.11.") for n in NODES)
    jail_client = in_jail(cluster, "dpkg-query -W -f '${Version}' slurm-client")
    assert jail_client.startswith("24.11."), jail_client
    cluster.ok(cluster.login("echo kept > upgrade-marker"))
    before = submit(cluster, "--wrap true")
    assert [state for state, _ in ended(cluster, before)] == ["COMPLETED"]
    # Runs across the upgrade on node 0: its steps run before and after slurmctld is 26.05.
    job = submit(cluster, "-w upgrade-cpu-0 --wrap 'srun --version; sleep 40; srun --version'")
    wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")

    set_version(cluster, "26.05")
    started = time.monotonic()
    report = cluster.sandbox.up()
    print(f"upgrade_up_seconds: {time.monotonic() - started:.0f}")

    # The config push waited for the old slurmds' replacement instead of reaching them.
    [reconfigure] = [j for j in report.jobs_run if j.startswith("upgrade-reconfigure-")]
    log = job_log(cluster.sandbox.state, reconfigure, "reconfigure").read_text()
    assert "not pushing config" in log and "upgrade-cpu-0(24.11." in log, log
    # The job ran to its end, once, on its 24.11 node, with that node's client.
    runs = ended(cluster, job)
    assert [state for state, _ in runs] == ["COMPLETED"], runs
    assert versions(cluster, job) == ["24.11"] * 2
    # Accounting kept the jobs from before; every node now runs 26.05.
    kept = cluster.ok(cluster.ctl(f"sacct -X -n -P -j {before} -o state")).strip()
    assert kept == "COMPLETED"
    wait_for("both nodes idle", lambda: cluster.all_idle(2))
    assert all(cluster.node_field(n, "Version").startswith("26.05.") for n in NODES)
    # Login sessions and jobs started now run 26.05's client; the jail's files are its own.
    assert major(cluster.ok(cluster.login("sbatch --version"))) == "26.05"
    new = submit(cluster, "-N2 --wrap 'srun --version'")
    assert [state for state, _ in ended(cluster, new)] == ["COMPLETED"]
    assert versions(cluster, new) == ["26.05"]
    assert in_jail(cluster, "dpkg-query -W -f '${Version}' slurm-client") == jail_client
    assert cluster.ok(cluster.login("cat upgrade-marker")).strip() == "kept"


def test_going_back_to_24_11_is_refused_before_anything_changes(upgrade: Cluster) -> None:
    cluster = upgrade
    before = cluster.daemons()
    set_version(cluster, "24.11")
    try:
        with pytest.raises(StackConfigError, match=r"going back to 24\.11 is not supported"):
            cluster.sandbox.up(build=False)
    finally:
        set_version(cluster, "26.05")
    assert cluster.daemons() == before
