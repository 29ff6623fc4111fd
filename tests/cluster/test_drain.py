"""Day 2 on real Slurm: worker pods that stop, by scale-down or eviction, and accounting restarts.

Booted from `Pulumi.drain.yaml`: one pool per drain policy. Every job's fate is read from
sacct (state, exit code, node, requeues, our AdminComment), polling with a bounded wait.
Slurm 26.05 lets a requeued job start again after 10 s (`requeue_delay`); 24.11 holds it for
120 s, so the waits below allow for that. A scale-down's requeue, the cancel and wait
policies and a scale to zero also run on 24.11 (`both_majors`, tests/cluster/conftest.py):
the hook reads that version's answers, and its requeued jobs wait out its hold.
"""

import contextlib
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from slurm_stack.k8s.workers import DRAIN_CLEANUP_SECONDS
from slurm_stack.paths import ENTRYPOINT
from slurm_stack.sandbox.apply import ApplyReport
from tests.cluster.conftest import Cluster, running_stack, wait_for
from tests.cluster.test_boot import error_lines

STACK = Path(__file__).resolve().parent / "Pulumi.drain.yaml"
REQUEUED_RUN_TIMEOUT = 300  # a requeue, Slurm's delay before the job may start, its new run
# A job script's prefix: what follows runs only in its first run (Slurm sets the variable in
# a requeued run), so that a run again, which the tests wait for, ends at once.
FIRST_RUN_ONLY = '[ -n "$SLURM_RESTART_COUNT" ] ||'


@pytest.fixture(scope="module")
def drain(tmp_path_factory: pytest.TempPathFactory, slurm_version: str | None) -> Iterator[Cluster]:
    yield from running_stack(STACK, tmp_path_factory, 5, slurm_version)


def submit(cluster: Cluster, options: str) -> str:
    return cluster.ok(cluster.login(f"sbatch --parsable {options}")).strip()


def scale(cluster: Cluster, **replicas: int) -> ApplyReport:
    """Set pools' replicas in the stack file and apply it, as `pulumi up` would."""

    def change(spec: dict) -> None:  # type: ignore[type-arg]
        for pool in spec["workerPools"]:
            pool["replicas"] = replicas.get(pool["name"], pool["replicas"])

    cluster.edit_stack(change)
    return cluster.sandbox.up(build=False)


def accounting(cluster: Cluster, jobs: str, fields: str, *, every_run: bool = False) -> list[str]:
    """sacct rows (`|`-separated ``fields``) of ``jobs``; ``every_run`` adds requeued runs."""
    runs = "-D " if every_run else ""
    out = cluster.ok(cluster.ctl(f"sacct -X -n -P {runs}-j {jobs} -o {fields}"))
    return out.splitlines()


def final(cluster: Cluster, job: str, timeout: float = 120) -> str:
    """The job's last run once it has ended: `state|exitcode|nodelist|admincomment`."""

    def ended() -> str:
        rows = accounting(cluster, job, "state,exitcode,nodelist,admincomment")
        ends = ("COMPLETED", "CANCELLED", "FAILED", "NODE_FAIL", "TIMEOUT")
        return rows[-1] if rows and rows[-1].startswith(ends) else ""

    try:
        return wait_for(f"job {job} to end in sacct", ended, timeout=timeout)
    except pytest.fail.Exception as timeout_error:
        # Say where the job is stuck: slurmctld's view and every run sacct has.
        status = cluster.ctl(f"scontrol show job {job} -o").stdout.strip()
        runs = cluster.ctl(f"sacct -D -n -P -j {job} -o jobid,state,nodelist,start,end").stdout
        pytest.fail(f"{timeout_error}\nscontrol: {status}\nsacct:\n{runs}")


def node_of(cluster: Cluster, job: str) -> str:
    out = cluster.ok(cluster.ctl(f"squeue -h -j {job} -o %N"))
    return out.strip()


def gone(cluster: Cluster, node: str) -> bool:
    record = cluster.ctl(f"scontrol show node {node}")
    listed = node in cluster.ok(cluster.ctl("sinfo -N -h -o %N")).split()
    return not listed and (record.returncode != 0 or f"NodeName={node} " not in record.stdout)


# A pool whose CPU limit is below the machine's cores (the hold and keep pools: 1 of 2): slurmd
# registers the pod's CPUs (the pool's `CPUs=`) and says once at start that the machine has more.
FEWER_CPUS_THAN_THE_MACHINE = "error: Node configuration differs from hardware: CPUs=1:"


def test_the_workers_of_a_cluster_without_gpus_log_no_error_at_start(drain: Cluster) -> None:
    """No pool of this stack has GPUs. On a real node every slurmd of such a cluster logged
    `error: System GPU detection failed` (twice) at start: Slurm 26.05 probes a dynamic
    node's GPUs unless gres.conf says AutoDetect=off, and slurmd reads gres.conf before
    that probe only where slurm.conf names a GRES type."""
    slurmds = {
        name: [line for line in lines if FEWER_CPUS_THAN_THE_MACHINE not in line]
        for name, lines in error_lines(drain).items()
        if name.endswith("--slurmd")
    }
    assert not any(slurmds.values()), slurmds


def test_a_job_that_ends_while_accounting_restarts_is_in_sacct(drain: Cluster) -> None:
    job = submit(drain, "--wrap 'sleep 3'")
    wait_for("the job running", lambda: drain.job_state(job) == "RUNNING")
    # slurmdbd and MariaDB go away together; the job ends while they are gone.
    for pod in ("drain-accounting-0", "drain-mariadb-0"):
        drain.sandbox.applier().kill_pod(pod)
    assert drain.wait_job(job, timeout=60) == "COMPLETED"
    report = drain.sandbox.up(build=False)
    assert {"drain-accounting-0", "drain-mariadb-0"} <= set(report.created)
    # slurmctld kept the job's record and hands it to slurmdbd once it answers again.
    assert final(drain, job).startswith("COMPLETED|0:0|drain-cpu-")


@pytest.mark.both_majors
def test_scale_down_requeues_what_outlasts_the_wait_and_starts_nothing_new_there(
    drain: Cluster,
) -> None:
    blockers = [submit(drain, f"-w drain-cpu-{i} --exclusive --wrap 'sleep 25'") for i in (0, 1)]
    wait_for("cpu-0 and cpu-1 busy", lambda: all(drain.job_state(j) == "RUNNING" for j in blockers))
    # 40 s: more than twice the pool's 15 s wait. Only cpu-2 has room, and keeps one CPU free.
    long = submit(drain, f"-c1 --requeue --wrap '{FIRST_RUN_ONLY} sleep 40'")
    wait_for("the long job running", lambda: drain.job_state(long) == "RUNNING")
    assert node_of(drain, long) == "drain-cpu-2"

    with ThreadPoolExecutor(1) as background:
        scaling = background.submit(scale, drain, cpu=2)
        wait_for(
            "drain-cpu-2 draining",
            lambda: "DRAIN" in drain.node_field("drain-cpu-2", "State") or scaling.done(),
        )
        assert not scaling.done(), "the scale-down ended before its drain was seen"
        # Twenty jobs while cpu-2 drains with a free CPU: none may start there.
        short = drain.ok(
            drain.login("for i in $(seq 20); do sbatch --parsable -c1 --wrap 'sleep 1'; done")
        ).split()
        report = scaling.result(timeout=180)
    assert report.removed == ("drain-cpu-2",)
    wait_for("drain-cpu-2 gone from sinfo and scontrol", lambda: gone(drain, "drain-cpu-2"), 30)

    state, exit_code, node, comment = final(drain, long, REQUEUED_RUN_TIMEOUT).split("|")
    assert (state, exit_code) == ("COMPLETED", "0:0")
    assert node in ("drain-cpu-0", "drain-cpu-1")
    runs = accounting(drain, long, "state,nodelist", every_run=True)
    assert runs[0] == "REQUEUED|drain-cpu-2", runs
    assert comment.startswith("slurm-stack: requeued: node drain-cpu-2 left the cluster")
    assert "Restarts=1" in drain.ok(drain.ctl(f"scontrol show job {long} -o"))

    assert len(short) == 20
    for row in [final(drain, job, 120) for job in short]:
        state, exit_code, node, _ = row.split("|")
        assert (state, exit_code) == ("COMPLETED", "0:0") and node != "drain-cpu-2", row
    out = drain.ok(drain.login("srun -N2 hostname"))
    assert sorted(out.split()) == ["drain-cpu-0", "drain-cpu-1"]


@pytest.mark.both_majors
def test_cancel_policy_cancels_with_a_reason_and_wait_policy_waits(drain: Cluster) -> None:
    cancelled = submit(drain, "-p hold --requeue --wrap 'sleep 300'")
    waited = submit(drain, "-p keep --wrap 'sleep 25'")
    wait_for(
        "both jobs running",
        lambda: drain.job_state(cancelled) == drain.job_state(waited) == "RUNNING",
    )
    started = time.monotonic()
    report = scale(drain, hold=0, keep=0)
    assert sorted(report.removed) == ["drain-hold-0", "drain-keep-0"]

    state, _, node, comment = final(drain, cancelled).split("|")
    assert state.startswith("CANCELLED") and node == "drain-hold-0"
    assert comment.startswith("slurm-stack: cancelled (drain policy cancel): node drain-hold-0")
    # `wait` has no deadline: the scale-down lasted until the job had ended on its node.
    assert final(drain, waited) == "COMPLETED|0:0|drain-keep-0|"
    assert time.monotonic() - started >= 20
    for node in ("drain-hold-0", "drain-keep-0"):
        wait_for(f"{node} gone", lambda node=node: gone(drain, node), 30)


@contextlib.contextmanager
def one_node_in(drain: Cluster, pool: str) -> Iterator[None]:
    """The one-node ``pool`` scaled up and idle for the block if another test scaled it to
    zero, and left as the block found it."""
    node = f"drain-{pool}-0"
    scaled_up = node not in drain.node_states()
    if scaled_up:
        scale(drain, **{pool: 1})
        wait_for(f"{node} idle", lambda: drain.node_states().get(node) == "idle")
    try:
        yield
    finally:
        if scaled_up:
            scale(drain, **{pool: 0})


# Longer than two of Slurm's client calls to a stopped slurmctld (each retries for
# MessageTimeout, 10 s, before it fails).
SLURMCTLD_STOPPED_SECONDS = 30


def test_slurmctld_stopped_while_a_stop_waits_is_not_taken_for_no_jobs(drain: Cluster) -> None:
    """The keep pool's stop waits as long as its jobs run (`wait`), asking slurmctld every
    2 s. slurmctld is stopped (as in a controller restart) for 30 s of that wait: each of
    those questions fails, and none may read as "no jobs left", or the pod would stop and
    take the job with it. The job runs to its end on its node, and only then does the pod go."""
    with one_node_in(drain, "keep"):
        stop_with_slurmctld_stopped_for_a_while(drain)


def stop_with_slurmctld_stopped_for_a_while(drain: Cluster) -> None:
    job = submit(drain, "-p keep --no-requeue --wrap 'sleep 75'")
    wait_for("the job running", lambda: drain.job_state(job) == "RUNNING")
    slurmctld = drain.sandbox.node_container(drain.controller)
    podman = drain.sandbox.podman
    with ThreadPoolExecutor(1) as pool:
        stopping = pool.submit(drain.sandbox.delete_pod, "drain-keep-0")
        wait_for(
            "drain-keep-0 drained by its preStop",
            lambda: drain.node_reason("drain-keep-0") == "k8s: pod terminating",
        )
        podman.run(["stop", "--time", "10", slurmctld])
        stopped = time.monotonic()
        try:
            while time.monotonic() - stopped < SLURMCTLD_STOPPED_SECONDS:
                assert not stopping.done(), "the hook ended while slurmctld could not answer"
                time.sleep(0.5)
            state = podman.run(["inspect", "--format", "{{.State.Status}}", slurmctld])
            assert state.stdout.strip() == "exited", state.stdout  # stopped all along
        finally:
            podman.run(["start", slurmctld])
        report = stopping.result(timeout=300)
    assert report.created == ("drain-keep-0",)
    assert final(drain, job) == "COMPLETED|0:0|drain-keep-0|"
    wait_for("drain-keep-0 idle", lambda: drain.node_states().get("drain-keep-0") == "idle", 60)


HOLD_WAIT_SECONDS = 5  # the hold pool's drain.waitSeconds in Pulumi.drain.yaml


def test_a_worker_whose_slurmctld_is_frozen_stops_within_its_wait_and_clean_up(
    drain: Cluster,
) -> None:
    """On a real node a worker whose slurmctld was gone took about 7 minutes to stop with a
    20 s wait: its preStop hook asked slurmctld up to 30 times, about 12 s each, before the
    wait began. The pool's wait and the clean-up now bound the whole hook."""
    with one_node_in(drain, "hold"):
        stop_with_slurmctld_frozen_then_back(drain)


def stop_with_slurmctld_frozen_then_back(drain: Cluster) -> None:
    job = submit(drain, f"-p hold --requeue --wrap '{FIRST_RUN_ONLY} sleep 300'")
    wait_for("the job running", lambda: drain.job_state(job) == "RUNNING")
    hook = [ENTRYPOINT, "drain-node"]  # the worker's preStop, as the kubelet runs it
    with drain.frozen(drain.controller):
        started = time.monotonic()
        ran = drain.sandbox.exec("drain-hold-0", hook, timeout=600)
        took = time.monotonic() - started
    assert took <= HOLD_WAIT_SECONDS + DRAIN_CLEANUP_SECONDS + 3, (took, ran.stderr)
    assert "slurmctld did not answer for the node's update mark" in ran.stderr, ran.stderr
    print(f"preStop with slurmctld frozen: {took:.1f} s")
    # slurmctld is back: the pod's stop now drains the node and ends the job as the pool's
    # policy (cancel) says, and its StatefulSet brings it back clean.
    report = drain.sandbox.delete_pod("drain-hold-0")
    assert report.created == ("drain-hold-0",)
    state, _, node, comment = final(drain, job).split("|")
    assert state.startswith("CANCELLED") and node == "drain-hold-0"
    assert comment.startswith("slurm-stack: cancelled (drain policy cancel): node drain-hold-0")
    wait_for("drain-hold-0 idle", lambda: drain.node_states().get("drain-hold-0") == "idle", 60)


def test_an_evicted_worker_drains_comes_back_clean_and_its_job_runs_again(
    drain: Cluster,
) -> None:
    # Asked for both nodes by name: once requeued, it may run only when drain-cpu-1 is back.
    job = submit(
        drain, f"-w drain-cpu-0,drain-cpu-1 -N2 --requeue --wrap '{FIRST_RUN_ONLY} sleep 30'"
    )
    wait_for("the job running", lambda: drain.job_state(job) == "RUNNING")
    # An eviction (`kubectl drain`) deletes the pod gracefully; its StatefulSet recreates it.
    report = drain.sandbox.delete_pod("drain-cpu-1")
    assert report.created == ("drain-cpu-1",)
    wait_for("drain-cpu-1 idle", lambda: drain.node_states().get("drain-cpu-1") == "idle", 60)
    assert drain.node_reason("drain-cpu-1") == "none"  # a new record, not the drained one

    state, exit_code, nodes, comment = final(drain, job, REQUEUED_RUN_TIMEOUT).split("|")
    assert (state, exit_code) == ("COMPLETED", "0:0")
    hosts = drain.ok(drain.ctl(f"scontrol show hostnames {nodes}")).split()
    assert sorted(hosts) == ["drain-cpu-0", "drain-cpu-1"]
    assert "requeued: node drain-cpu-1 left the cluster" in comment
    runs = accounting(drain, job, "state", every_run=True)
    assert runs == ["REQUEUED", "COMPLETED"], runs


@pytest.mark.both_majors
def test_scale_to_zero_and_back_cancels_what_cannot_be_requeued(drain: Cluster) -> None:
    job = submit(drain, "-w drain-cpu-1 --no-requeue --wrap 'sleep 300'")
    wait_for("the job running", lambda: drain.job_state(job) == "RUNNING")
    report = scale(drain, cpu=0)
    assert report.removed == ("drain-cpu-1", "drain-cpu-0")  # highest ordinal first
    state, _, _, comment = final(drain, job).split("|")
    assert state.startswith("CANCELLED")
    assert comment.startswith("slurm-stack: cancelled: Slurm cannot requeue it")
    wait_for("no node left", lambda: not drain.node_states(), 30)

    report = scale(drain, cpu=2)
    assert sorted(report.created) == ["drain-cpu-0", "drain-cpu-1"]
    wait_for("both nodes idle", lambda: drain.all_idle(2), 90)
    assert [drain.node_reason(node) for node in ("drain-cpu-0", "drain-cpu-1")] == ["none"] * 2
    out = drain.ok(drain.login("srun -N2 hostname"))
    assert sorted(out.split()) == ["drain-cpu-0", "drain-cpu-1"]


def test_root_jobs_are_refused_unless_the_stack_allows_them(drain: Cluster) -> None:
    # This stack leaves jail.allowRootJobs off; the itest stack turns it on for its root tests.
    result = drain.sandbox.exec("drain-login-0", ["sh", "-c", "srun -t 1 echo ran"])
    assert result.returncode != 0 and "ran" not in result.stdout
    config = drain.ok(drain.ctl("scontrol show config"))
    assert re.search(r"^DisableRootJobs\s*=\s*Yes$", config, re.MULTILINE | re.IGNORECASE)
