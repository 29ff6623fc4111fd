"""Fault run on real Slurm: batch jobs keep flowing while pods are killed under them.

    .venv/bin/python benchmarks/fault_run.py [--jobs 200] [--seed N] [--keep]
        [--controller-stop kill|term]

Boots its own copy of `tests/cluster/Pulumi.drain.yaml` (three 2-CPU workers, accounting on,
pool drain policy requeue) in the sandbox, submits ``--jobs`` short batch jobs (1-4 s each,
requeueable) from the login node, and meanwhile kills, at seeded random moments, a worker pod,
the controller pod and the slurmdbd pod, each without preStop or grace (a crash), letting each
come back as its controller would. `--controller-stop term` stops the controller the way
Kubernetes deletes a pod instead (SIGTERM, so slurmctld saves its state first). Then it waits
for the queue to empty (but for jobs Slurm holds, and jobs RUNNING for over a minute: ones a
killed slurmctld lost the end of) and checks:
- every job's last run is COMPLETED in sacct;
- no job ran twice at once: each run writes a start and an end line to its own file in the
  jail, and no two runs of one job overlap in time.
Prints `name: value` lines: jobs_submitted, submissions_forgotten (ids sbatch printed that a
killed slurmctld forgot and gave out again), jobs_completed, jobs_requeued, jobs_lost (submitted but
not COMPLETED), jobs_held (of those, held by Slurm after a failed launch: they wait for
`scontrol release`), jobs_stuck_running (of those, RUNNING long after their run ended),
runs_overlapping, faults_injected, submit_retries, nodes_drained_by_slurm (drains with Slurm's
own reason, e.g. "Duplicate jobid"), controller_stop, wall_seconds.
Runs as root; uses its own state directory and removes it at the end unless --keep.
"""

import argparse
import itertools
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import yaml

from slurm_stack.sandbox.session import Sandbox

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "tests" / "cluster" / "Pulumi.drain.yaml"
STATE = Path("/var/lib/slurm-stack/fault-sandbox")
NAME = "fault"
# Each run appends its start and end (epoch seconds) and node to ~/fault-runs/<job id>.
JOB_SCRIPT = """#!/bin/bash
#SBATCH --requeue
#SBATCH -c1 --mem=64M
mkdir -p ~/fault-runs
log=~/fault-runs/$SLURM_JOB_ID
echo "start $(date +%s.%N) $(hostname) ${SLURM_RESTART_COUNT:-0}" >> $log
sleep $((1 + SLURM_JOB_ID % 4))
echo "end $(date +%s.%N) $(hostname) ${SLURM_RESTART_COUNT:-0}" >> $log
"""


def stack_file(directory: Path) -> Path:
    document = yaml.safe_load(STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    config["name"], config["namespace"] = NAME, f"slurm-{NAME}"
    config["workerPools"] = [p for p in config["workerPools"] if p["name"] == "cpu"]
    config["partitions"] = [p for p in config["partitions"] if p["name"] == "main"]
    path = directory / f"Pulumi.{NAME}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def wait_until(what: str, probe, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    """Poll ``probe`` until it is true (True) or ``timeout`` passes (False, said on stdout)."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            print(f"# timed out after {timeout:g}s waiting for {what}", flush=True)
            return False
        time.sleep(1)
    return True


def elapsed_seconds(text: str) -> int:
    """squeue's %M ([days-][hours:]minutes:seconds) in seconds."""
    days, _, clock = text.rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


class FaultRun:
    """One booted sandbox and what happened in it."""

    def __init__(self, sandbox: Sandbox, jobs: int, seed: int, controller_stop: str) -> None:
        self.sandbox = sandbox
        self.controller_stop = controller_stop
        self.jobs = jobs
        self.random = random.Random(seed)
        self.lock = threading.Lock()  # one `up` at a time
        self.faults = 0
        self.submit_retries = 0
        self.job_ids: list[str] = []

    def slurm(self, command: str, timeout: float = 60) -> str | None:
        """A command's output in the controller container; None when it failed (slurmctld
        not answering, the pod being replaced)."""
        try:
            result = self.sandbox.exec(
                self.sandbox.pod_of("controller"), ["sh", "-c", command], timeout=timeout
            )
        except Exception:
            return None
        return result.stdout if result.returncode == 0 else None

    def submit_all(self) -> None:
        self.sandbox.ssh(f"cat > ~/fault-job.sh <<'EOF'\n{JOB_SCRIPT}EOF")
        for _ in range(self.jobs):
            while True:
                result = self.sandbox.ssh("sbatch --parsable ~/fault-job.sh", timeout=120)
                if result.returncode == 0 and result.stdout.strip().isdigit():
                    self.job_ids.append(result.stdout.strip())
                    break
                self.submit_retries += 1  # slurmctld was down: submit again
                time.sleep(2)
            time.sleep(self.random.uniform(0, 0.3))

    def kill(self, pod: str) -> None:
        with self.lock:
            applier = self.sandbox.applier()
            if pod.endswith("-controller-0") and self.controller_stop == "term":
                print(f"fault: stopping {pod} (SIGTERM, grace)", flush=True)
                applier.remove_pod(pod)
            else:
                print(f"fault: killing {pod}", flush=True)
                applier.kill_pod(pod)
            applier.apply(self.sandbox.current_plan)
            self.faults += 1

    def inject_faults(self, window: float) -> None:
        victims = [f"{NAME}-cpu-{self.random.randrange(3)}", f"{NAME}-controller-0"]
        victims.append(f"{NAME}-accounting-0")
        moments = sorted(self.random.uniform(5, window) for _ in victims)
        self.random.shuffle(victims)
        start = time.monotonic()
        for moment, pod in zip(moments, victims, strict=True):
            time.sleep(max(0.0, start + moment - time.monotonic()))
            self.kill(pod)

    def overlapping_runs(self) -> int:
        """Jobs two of whose runs overlap in time (from the runs' own start/end lines)."""
        runs_dir = self.sandbox.state.root / "claims" / f"{NAME}-jail" / "home" / "sandbox"
        overlapping = 0
        for job in self.job_ids:
            path = runs_dir / "fault-runs" / job
            lines = (
                [line.split() for line in path.read_text().splitlines()] if path.exists() else []
            )
            intervals: dict[str, list[float]] = {}
            for _kind, stamp, _node, restart in lines:
                intervals.setdefault(restart, []).append(float(stamp))
            spans = sorted((min(t), max(t)) for t in intervals.values())
            if any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans)):
                overlapping += 1
        return overlapping

    def held_jobs(self) -> list[str] | None:
        """Jobs Slurm holds (e.g. "launch failed requeued held"); None if it did not answer."""
        out = self.slurm("squeue -h -o '%i %t %r'")
        if out is None:
            return None
        rows = [line.split(maxsplit=2) for line in out.splitlines() if line.strip()]
        return [row[0] for row in rows if len(row) == 3 and "held" in row[2].lower()]

    def stuck_jobs(self) -> list[str] | None:
        """Jobs RUNNING for over a minute (each run takes 1-4 s): ones slurmctld lost the end
        of when it was killed, until the node registers again."""
        out = self.slurm("squeue -h -t R -o '%i %M'")
        if out is None:
            return None
        rows = [line.split() for line in out.splitlines() if line.strip()]
        return [job for job, elapsed in rows if elapsed_seconds(elapsed) > 60]

    def only_held_or_stuck_jobs_left(self) -> bool:
        queue = self.slurm("squeue -h -o %i")
        held, stuck = self.held_jobs(), self.stuck_jobs()
        if queue is None or held is None or stuck is None:
            return False
        return len(queue.split()) == len(held) + len(stuck)

    def drained_by_slurm(self) -> list[str]:
        """Nodes drained with a reason that is neither ours nor a health check's."""
        out = self.slurm("sinfo -N -h -o '%N|%t|%E'") or ""
        rows = [line.split("|", 2) for line in out.splitlines() if line.count("|") == 2]
        return [
            f"{node} ({reason})"
            for node, state, reason in rows
            if "drain" in state and not reason.startswith(("k8s:", "healthcheck:"))
        ]

    def accounted(self, every_run: bool = False) -> list[tuple[str, str]]:
        """(job id, state) rows from sacct: each job's last run, or every run."""
        runs = "-D " if every_run else ""
        ids = ",".join(self.job_ids)
        out = self.slurm(f"sacct -X -n -P {runs}-j {ids} -o jobid,state", timeout=120) or ""
        return [tuple(line.split("|", 1)) for line in out.splitlines() if "|" in line]  # type: ignore[misc]

    def results(self) -> dict[str, int]:
        state = dict(self.accounted())
        runs: dict[str, int] = {}
        for job, _ in self.accounted(every_run=True):
            runs[job] = runs.get(job, 0) + 1
        # A killed slurmctld forgets submissions it answered in its last seconds, and hands
        # their ids out again: such a job is lost although sbatch printed its id.
        unique = sorted(set(self.job_ids), key=int)
        completed = sum(1 for job in unique if state.get(job) == "COMPLETED")
        return {
            "jobs_submitted": len(self.job_ids),
            "submissions_forgotten": len(self.job_ids) - len(unique),
            "jobs_completed": completed,
            "jobs_requeued": sum(1 for count in runs.values() if count > 1),
            "jobs_lost": len(self.job_ids) - completed,
            "jobs_held": len(self.held_jobs() or []),
            "jobs_stuck_running": len(self.stuck_jobs() or []),
            "runs_overlapping": self.overlapping_runs(),
            "faults_injected": self.faults,
            "submit_retries": self.submit_retries,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running")
    parser.add_argument(
        "--controller-stop",
        choices=("kill", "term"),
        default="kill",
        help="kill: SIGKILL, as an OOM kill (default); term: stopped as Kubernetes deletes a pod",
    )
    args = parser.parse_args()
    print(f"seed: {args.seed}", flush=True)
    directory = Path(tempfile.mkdtemp(prefix="fault-run-"))
    sandbox = Sandbox(stack_file(directory), state_base=STATE)
    sandbox.down(delete_data=True)
    sandbox = Sandbox(stack_file(directory), state_base=STATE)
    try:
        sandbox.up()
        run = FaultRun(sandbox, args.jobs, args.seed, args.controller_stop)
        wait_until(
            "three idle workers",
            lambda: (run.slurm("sinfo -N -h -o %t") or "").split() == ["idle"] * 3,
            120,
        )
        started = time.monotonic()
        faults = threading.Thread(target=run.inject_faults, args=(args.jobs * 0.4,))
        faults.start()
        run.submit_all()
        faults.join()
        wait_until(
            "the queue to empty (but for held or stuck jobs)", run.only_held_or_stuck_jobs_left, 900
        )
        wall = time.monotonic() - started
        wait_until(
            "sacct to hold every job", lambda: len(run.accounted()) >= len(set(run.job_ids)), 120
        )
        for name, value in run.results().items():
            print(f"{name}: {value}")
        print(f"nodes_drained_by_slurm: {len(run.drained_by_slurm())}")
        print(f"controller_stop: {args.controller_stop}")
        for node in run.drained_by_slurm():
            print(f"# drained by Slurm: {node}")
        print(f"wall_seconds: {wall:.0f}")
    finally:
        if not args.keep:
            sandbox.down(delete_data=True)
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
