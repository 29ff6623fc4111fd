"""How fast an elastic pool grows and shrinks with the queue, on real Slurm in the sandbox.

    .venv/bin/python benchmarks/elastic_bench.py [--keep] [--runs 5]

Boots its own copy of `tests/cluster/Pulumi.elastic.yaml` (pool cpu elastic, 0 to 3 nodes)
with `idleSeconds: 5`, and prints `name: value` lines:
- elastic_submit_to_start_from_zero_seconds: a one-node job submitted while the pool has no
  pod, from sbatch to the job's start (sacct's Submit and Start); the median of --runs;
- elastic_submit_to_start_from_zero_max_seconds: the slowest of those runs;
- elastic_idle_to_given_back_seconds: from the end of the last job until the pool's last pod
  is gone (idleSeconds, Slurm's power-save scan, SuspendTimeout, the pod's stop); median;
- elastic_submit_to_start_one_more_node_seconds: a running pool (one node busy) grows by one
  node for a new job; median of --runs;
- elastic_idle_seconds: the pool's idleSeconds in this run.
Runs as root; uses its own state directory and removes it at the end unless --keep.
"""

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from slurm_stack.sandbox.session import Sandbox

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "tests" / "cluster" / "Pulumi.elastic.yaml"
STATE = Path("/var/lib/slurm-stack/elastic-bench-sandbox")
NAME = "elasticbench"
IDLE_SECONDS = 5
POOL_PREFIX = f"{NAME}-cpu-"


def stack_file(directory: Path) -> Path:
    document = yaml.safe_load(STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    config["name"], config["namespace"] = NAME, f"slurm-{NAME}"
    for pool in config["workerPools"]:
        if "elastic" in pool:
            pool["elastic"]["idleSeconds"] = IDLE_SECONDS
    path = directory / f"Pulumi.{NAME}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def wait(what: str, condition: Callable[[], object], timeout: float = 300) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.time()
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


class Bench:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.controller = sandbox.pod_of("controller")

    def ctl(self, command: str) -> str:
        result = self.sandbox.exec_quick(self.controller, ["sh", "-c", command], timeout=60)
        if result.returncode != 0:
            raise SystemExit(f"{command}: {result.stderr}")
        return result.stdout

    def pods(self) -> list[str]:
        running = self.sandbox.applier().running_pods()
        return [name for name in running if name.startswith(POOL_PREFIX)]

    def all_given_back(self) -> bool:
        states = self.ctl("sinfo -N -h -p main -o %t").split()
        return not self.pods() and bool(states) and all(s == "idle~" for s in states)

    def submit(self, options: str) -> str:
        out = self.sandbox.ssh(f"sbatch --parsable {options}").stdout.strip()
        if not out.isdigit():
            raise SystemExit(f"sbatch {options}: {out}")
        return out

    def times(self, job: str) -> tuple[str, float, float, float]:
        """state, submit, start, end (epoch seconds; 0 where unknown). A moment where
        slurmdbd does not answer is read as nothing known yet."""
        command = f"sacct -X -n -P -j {job} -o state,submit,start,end"
        result = self.sandbox.exec_quick(self.controller, ["sh", "-c", command], timeout=60)
        row = result.stdout.strip() if result.returncode == 0 else ""
        if row.count("|") != 3:
            return "", 0.0, 0.0, 0.0
        state, *stamps = row.split("|")

        def epoch(stamp: str) -> float:
            try:
                return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
            except ValueError:
                return 0.0

        return state, *(epoch(s) for s in stamps)  # type: ignore[return-value]

    def ended(self, job: str) -> tuple[float, float, float]:
        wait(f"job {job} to end", lambda: self.times(job)[0] == "COMPLETED", 300)
        _, submitted, started, finished = self.times(job)
        return submitted, started, finished

    def running(self, job: str) -> bool:
        """Running on nodes that are up: Slurm says RUNNING once a job's nodes have
        registered (CONFIGURING before), and then resets its start time to that moment."""
        state = self.sandbox.exec_quick(
            self.controller, ["squeue", "-h", "-j", job, "-o", "%T"], timeout=60
        ).stdout.strip()
        return state == "RUNNING"

    def started(self, job: str) -> tuple[float, float]:
        wait(f"job {job} to run", lambda: self.running(job), 300)
        _, submitted, started, _ = self.times(job)
        return submitted, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the sandbox afterwards")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="elastic-bench-"))
    sandbox = Sandbox(stack_file(directory), state_base=STATE)
    sandbox.down(delete_data=True)
    sandbox = Sandbox(stack_file(directory), state_base=STATE)
    try:
        sandbox.up()
        bench = Bench(sandbox)
        from_zero, given_back, one_more = [], [], []
        for _ in range(args.runs):
            wait("every node given back", bench.all_given_back)
            submitted, started, finished = bench.ended(bench.submit("-N1 --wrap true"))
            from_zero.append(started - submitted)
            gone = wait("the pod given back", bench.all_given_back)
            given_back.append(gone - finished)
        for _ in range(args.runs):
            wait("every node given back", bench.all_given_back)
            busy = bench.submit("-N1 -w elasticbench-cpu-0 --wrap 'sleep 300'")
            bench.started(busy)
            submitted, started = bench.started(bench.submit("-N1 --wrap 'sleep 30'"))
            one_more.append(started - submitted)
            bench.ctl(f"scancel {busy}")
        print(f"elastic_idle_seconds: {IDLE_SECONDS}")
        print(f"elastic_submit_to_start_from_zero_seconds: {statistics.median(from_zero):.1f}")
        print(f"elastic_submit_to_start_from_zero_max_seconds: {max(from_zero):.1f}")
        print(f"elastic_idle_to_given_back_seconds: {statistics.median(given_back):.1f}")
        print(f"elastic_submit_to_start_one_more_node_seconds: {statistics.median(one_more):.1f}")
    finally:
        if not args.keep:
            sandbox.down(delete_data=True)
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
