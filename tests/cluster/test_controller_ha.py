"""A backup controller on real Slurm: booted from `Pulumi.ha.yaml` (a primary and a backup
slurmctld sharing StateSaveLocation, SlurmctldTimeout 10 s). The primary's pod is killed
and left gone, as a StatefulSet leaves the pod of a lost Kubernetes node; every job's fate
is read from sacct."""

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from slurm_stack.k8s.controller import state_claim_name
from slurm_stack.paths import SLURMD_SPOOL_DIR
from tests.cluster.conftest import Cluster, running_stack, wait_for

STACK = Path(__file__).resolve().parent / "Pulumi.ha.yaml"
PRIMARY, BACKUP = "ha-controller-0", "ha-controller-1"


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_stack(STACK, tmp_path_factory, 2)


def ping(cluster: Cluster) -> dict[str, str]:
    """`scontrol ping` from the login node: each controller's hostname -> UP or DOWN."""
    out = cluster.login("scontrol ping", timeout=60).stdout
    found = {}
    for line in out.splitlines():
        # "Slurmctld(primary) at ha-controller-0 is UP"
        words = line.split()
        if "at" in words and words[-2] == "is":
            found[words[words.index("at") + 1]] = words[-1]
    return found


def job_state(cluster: Cluster, job: str) -> str:
    """From the login node: the primary's pod, where `Cluster.job_state` asks, may be gone."""
    out = cluster.login(f"scontrol show job {job} -o", timeout=60).stdout
    return next((t.split("=", 1)[1] for t in out.split() if t.startswith("JobState=")), "")


def saved_since(cluster: Cluster, moment: float) -> bool:
    """Whether the primary wrote its job state after ``moment`` (its clock, seconds): it
    saves in the background within seconds of a change (SAVE_MAX_WAIT, 5 s, in Slurm's
    state_save.c), and a job it had not saved when it died is unknown to the backup."""
    out = cluster.ctl("stat -c %.9Y /var/spool/slurmctld/job_state").stdout.strip()
    return bool(out) and float(out.replace(",", ".")) > moment


# How long a backup handing control back may take to answer the primary, serving no client
# meanwhile (`CONTROL_TIMEOUT` in Slurm's src/slurmctld/slurmctld.h).
CONTROL_TIMEOUT_SECONDS = 30


class SinfoWatch:
    """`sinfo` from the login node, again and again: the longest stretch without an answer."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.stop = cluster, threading.Event()
        self.longest_gap = 0.0
        self.answers = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last_answer = time.monotonic()
        while not self.stop.is_set():
            ok = self.cluster.login("sinfo -h -o %D", timeout=120).returncode == 0
            now = time.monotonic()
            if ok:
                self.longest_gap = max(self.longest_gap, now - last_answer)
                last_answer, self.answers = now, self.answers + 1
            time.sleep(0.5)

    def __enter__(self) -> "SinfoWatch":
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=180)


def test_the_primary_and_the_backup_both_answer(ha: Cluster) -> None:
    assert ping(ha) == {PRIMARY: "UP", BACKUP: "UP"}


def log_times(line_start: str, log: str) -> list[datetime]:
    """When slurmctld logged each line that starts (after its timestamp) with ``line_start``."""
    return [
        datetime.fromisoformat(line[1:24])
        for line in log.splitlines()
        if line.startswith("[") and line[26:].startswith(line_start)
    ]


def test_on_a_first_start_the_backup_waits_for_the_primary_and_no_one_stalls(
    ha: Cluster,
) -> None:
    """Both pods start together on a first deploy. A starting primary asks the backup to give
    up control and waits up to 30 s for an answer (CONTROL_TIMEOUT), serving no one; a backup
    that was starting too took the connection and never answered. The backup's entrypoint
    now starts slurmctld once the primary answers, so the primary is in control within
    seconds of its start, and the backup after it."""
    primary = ha.sandbox.podman.logs(ha.sandbox.node_container(PRIMARY), tail=100_000)
    backup = ha.sandbox.podman.logs(ha.sandbox.node_container(BACKUP), tail=100_000)
    [started, *_] = log_times("slurmctld version", primary)
    [in_control, *_] = log_times("Running as primary controller", primary)
    assert (in_control - started).total_seconds() < 5, primary
    assert "Socket timed out" not in primary, primary
    assert f"the primary controller {PRIMARY} answers; starting the backup" in backup, backup
    [backup_started, *_] = log_times("slurmctld version", backup)
    assert backup_started > in_control
    # What the login node's clients were served (configless, through sackd), in order.
    out = " ".join(ha.ok(ha.login("scontrol show config")).split())
    assert f"SlurmctldHost[0] = {PRIMARY}({PRIMARY}.ha-controller-pods.slurm-ha.svc)" in out
    assert f"SlurmctldHost[1] = {BACKUP}({BACKUP}.ha-controller-pods.slurm-ha.svc)" in out
    assert "SlurmctldTimeout = 10 sec" in out


def test_losing_the_primary_hands_over_and_no_job_is_lost(ha: Cluster) -> None:
    # Long enough to end under the backup: the primary dies while it runs, not as it ends.
    running = ha.ok(ha.login("sbatch --parsable -N2 -o /dev/null --wrap 'srun sleep 40'")).strip()
    wait_for(f"job {running} running", lambda: job_state(ha, running) == "RUNNING")
    queued = []
    for _ in range(10):
        before_submit = float(ha.ok(ha.ctl("date +%s.%N")))
        queued.append(ha.ok(ha.login("sbatch --parsable -o /dev/null --wrap 'sleep 1'")).strip())
    assert all(job_state(ha, job) == "PENDING" for job in queued)
    wait_for("the primary's state saved", lambda: saved_since(ha, before_submit), timeout=30)
    jobs = [running, *queued]
    with SinfoWatch(ha) as watch:
        ha.sandbox.kill_pod(PRIMARY, come_back=False)
        wait_for("the backup alone", lambda: ping(ha) == {PRIMARY: "DOWN", BACKUP: "UP"}, 90)
        # Every job, the one that ran across the takeover and the ten that waited, runs to
        # its end under the backup.
        wait_for(
            "every job COMPLETED",
            lambda: all(job_state(ha, job) == "COMPLETED" for job in jobs),
            timeout=180,
        )
        # A slurmd that restarts now, its cached config gone, must fetch the config from the
        # backup: --conf-server lists both controllers, and the primary's address no longer
        # answers. Its container restarts in place, as the kubelet restarts a crashed one.
        node = "ha-cpu-1"
        ha.ok(ha.node(node, f"rm -rf {SLURMD_SPOOL_DIR}/conf-cache"))
        ha.sandbox.podman.run(["restart", f"{node}--slurmd"])
        wait_for(
            f"{node} back",
            lambda: (
                ha.node(node, f"test -s {SLURMD_SPOOL_DIR}/conf-cache/slurm.conf").returncode == 0
                and f"{node} " in ha.login("sinfo -h -N -t idle -o '%N '", timeout=60).stdout
            ),
            timeout=120,
        )
        # The primary's pod comes back (its node returned, or it was rescheduled) and takes
        # control again; the backup stands by.
        ha.sandbox.restore()
        wait_for("both controllers up", lambda: ping(ha) == {PRIMARY: "UP", BACKUP: "UP"}, 120)

    def fates() -> list[str]:
        out = ha.login(f"sacct -n -X -P -o JobID,State -j {','.join(jobs)}", timeout=60)
        return sorted(out.stdout.split())

    # Slurm 26.05's backup queues its accounting records while in control (sdiag's "DBD
    # Agent queue size" grows) and hands them over with its state: they reach slurmdbd
    # once the primary is back (docs/controller-ha.md).
    completed = sorted(f"{job}|COMPLETED" for job in jobs)
    wait_for("every job COMPLETED in sacct", lambda: fates() == completed, timeout=120)
    # sinfo kept answering, with a gap while each controller took over: about 15 s for the
    # takeover, and for the handback up to the backup's CONTROL_TIMEOUT (README, measured
    # 28-30 s); the bound allows 10 s more for sinfo's own call on a busy machine.
    print(f"longest sinfo gap: {watch.longest_gap:.1f} s over {watch.answers} answers")
    assert watch.answers > 0
    assert watch.longest_gap < CONTROL_TIMEOUT_SECONDS + 10, watch.longest_gap

    job = ha.ok(ha.login("sbatch --parsable -N2 -o /dev/null --wrap 'srun true'")).strip()
    wait_for(f"job {job} ended", lambda: job_state(ha, job) == "COMPLETED", timeout=60)


# The state files a real cluster's shared directory held only as `.old` copies after both
# controllers had saved at once (a stalled primary resumed while the backup handed control
# back, and liveness probes stopped both).
LOST_TO_TWO_WRITERS = ("assoc_usage", "job_state", "node_state", "fed_mgr_state")


def test_controllers_left_with_only_old_state_copies_come_back_with_every_job(
    ha: Cluster,
) -> None:
    """From Slurm 25.05 slurmctld refuses to start without its current state files (`fatal: No
    Assoc usage file ... to recover`): on the real cluster both controllers crash-looped. A
    controller's start now puts them back from the copies, as no controller is in control."""
    wait_for("both controllers up", lambda: ping(ha) == {PRIMARY: "UP", BACKUP: "UP"}, 120)
    running = ha.ok(ha.login("sbatch --parsable -N2 -o /dev/null --wrap 'srun sleep 30'")).strip()
    wait_for(f"job {running} running", lambda: job_state(ha, running) == "RUNNING")
    before_submit = float(ha.ok(ha.ctl("date +%s.%N")))
    held = [
        ha.ok(ha.login("sbatch --parsable --hold -o /dev/null --wrap true")).strip()
        for _ in range(3)
    ]
    wait_for("the primary's state saved", lambda: saved_since(ha, before_submit), timeout=30)
    ha.sandbox.applier().kill_pods(PRIMARY, BACKUP)
    state = ha.sandbox.state.root / "claims" / state_claim_name(ha.sandbox.spec)
    for name in LOST_TO_TWO_WRITERS:
        if (state / name).exists():
            (state / name).replace(state / f"{name}.old")
    assert not (state / "job_state").exists() and (state / "job_state.old").exists()

    ha.sandbox.restore()  # the StatefulSet brings both back
    wait_for("both controllers up", lambda: ping(ha) == {PRIMARY: "UP", BACKUP: "UP"}, 120)
    assert all((state / name).exists() for name in ("assoc_usage", "job_state", "node_state"))
    started = ha.sandbox.podman.logs(ha.sandbox.node_container(PRIMARY), tail=100_000)
    assert "controller-state result=restored file=job_state from=job_state.old" in started
    # Every job is still known: the one that ran on and the held ones, which run once released.
    ha.ok(ha.login(f"scontrol release {','.join(held)}", timeout=60))
    jobs = [running, *held]
    wait_for(
        "every job COMPLETED",
        lambda: all(job_state(ha, job) == "COMPLETED" for job in jobs),
        timeout=120,
    )


# How long the primary stands still: past the backup's takeover (10 s) and long enough that
# a probe of the backup (every 30 s, each waiting up to MessageTimeout, 10 s, for the frozen
# primary's answer) runs wholly within it. The real cluster's primary stood still for 107 s.
STALL_SECONDS = 60


def utc_now() -> datetime:
    """Now, to the second, as the liveness events are stamped."""
    return datetime.now(UTC).replace(microsecond=0)


def event_time(event: str) -> datetime:
    """When a liveness event was logged (`2026-11-28T02:09:16Z Warning ...`)."""
    return datetime.fromisoformat(event.split()[0].replace("Z", "+00:00"))


def liveness_events(cluster: Cluster) -> list[str]:
    """What the sandbox's liveness prober logged, as the kubelet's events read."""
    events = cluster.sandbox.state.liveness_events_file
    return events.read_text().splitlines() if events.exists() else []


def test_a_stalled_primary_that_resumes_keeps_every_job(ha: Cluster) -> None:
    """The primary's processes are frozen as a frozen node or a hung storage mount freezes
    them, then continue. The backup takes over and
    hands control back; the backup's liveness probe must not fail meanwhile (on the real
    cluster it did, each `scontrol ping` waiting out the frozen primary, and the kubelet
    killed both controllers); every job runs to its end."""
    wait_for("both controllers up", lambda: ping(ha) == {PRIMARY: "UP", BACKUP: "UP"}, 120)
    running = ha.ok(ha.login("sbatch --parsable -N2 -o /dev/null --wrap 'srun sleep 60'")).strip()
    wait_for(f"job {running} running", lambda: job_state(ha, running) == "RUNNING")
    before_submit = float(ha.ok(ha.ctl("date +%s.%N")))
    queued = [
        ha.ok(ha.login("sbatch --parsable -o /dev/null --wrap 'sleep 1'")).strip() for _ in range(3)
    ]
    wait_for("the primary's state saved", lambda: saved_since(ha, before_submit), timeout=30)
    backup_log = ha.sandbox.node_container(BACKUP)
    in_control = "Running as primary controller"
    took_control_before = ha.sandbox.podman.logs(backup_log, tail=100_000).count(in_control)
    events_before = len(liveness_events(ha))
    with ha.frozen(PRIMARY):
        frozen_at, frozen_since = time.monotonic(), utc_now()
        wait_for(
            "the backup in control",
            lambda: (
                ha.sandbox.podman.logs(backup_log, tail=100_000).count(in_control)
                > took_control_before
            ),
            timeout=90,
        )
        # Clients ask the primary first, which takes the connection and never answers; they
        # give up after MessageTimeout rather than ask the backup (docs/controller-ha.md).
        client = ha.login("sinfo -h -o %D", timeout=60)
        assert client.returncode != 0 and "Socket timed out" in client.stderr, client
        time.sleep(max(0.0, STALL_SECONDS - (time.monotonic() - frozen_at)))
    resumed = utc_now()
    wait_for("both controllers up", lambda: ping(ha) == {PRIMARY: "UP", BACKUP: "UP"}, 240)
    jobs = [running, *queued]

    def fates() -> list[str]:
        out = ha.login(f"sacct -n -X -P -o JobID,State -j {','.join(jobs)}", timeout=60)
        return sorted(out.stdout.split())

    completed = sorted(f"{job}|COMPLETED" for job in jobs)
    wait_for("every job COMPLETED in sacct", lambda: fates() == completed, timeout=240)
    events = liveness_events(ha)[events_before:]
    print("liveness events during and after the stall:", *events, sep="\n  ")
    # While the primary stood still the backup served and its probe passed. Handing control
    # back it answers no ping for a moment: a failure or two then, far from the four a kill
    # takes.
    backup_failed = [e for e in events if f"pod/{BACKUP} slurmctld: Liveness probe failed" in e]
    assert not [e for e in backup_failed if frozen_since <= event_time(e) <= resumed], events
    assert not [e for e in events if "Killing" in e and f"pod/{BACKUP}" in e], events
