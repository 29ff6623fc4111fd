"""Sandbox numbers on real Slurm: cold start, dynamic node join, srun latency.

    .venv/bin/python benchmarks/sandbox_bench.py [--stack-file tests/cluster/Pulumi.itest.yaml]

Prints `name: value` lines:
- sandbox_cold_start_seconds: `sandbox up` on empty state (images already built) until every
  worker is idle;
- node_join_seconds: a worker pod removed and its node record deleted, then `up` until the
  node is idle again (pod start, munge, slurmd registering as a dynamic node);
- srun_n2_true_median_ms: median of 50 `srun -N2 true` from a login session (the chroot
  plugin enters the jail on both nodes);
- srun_true_median_ms_with_plugin / _without_plugin and srun_plugin_overhead_percent: 100
  `srun true` each (4 interleaved rounds of 25, order alternating), with the jail plugin and
  with its plugstack.conf line commented out on every node and the login node of the same
  cluster (checked: a task then sees the pod's own root, not the jail);
- srun_true_median_ms_no_jail: 100 `srun --no-jail true` in the same rounds (plugin loaded,
  jail not entered; the benchmark's copy of the stack sets jail.allowOptOut).
Runs as root; uses its own state directory and removes it at the end.
"""

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from slurm_stack.sandbox.session import Sandbox

ROOT = Path(__file__).resolve().parent.parent
STATE = Path("/var/lib/slurm-stack/bench-sandbox")


def wait_until(probe, timeout: float = 180) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while not probe():
        if time.monotonic() - start > timeout:
            raise TimeoutError("timed out")
        time.sleep(0.1)
    return time.monotonic() - start


def node_states(sandbox: Sandbox) -> dict[str, str]:
    out = sandbox.exec(sandbox.pod_of("controller"), ["sinfo", "-N", "-h", "-o", "%N %t"]).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def srun_times_ms(sandbox: Sandbox, command: str, runs: int) -> list[float]:
    """Wall time of each `command` run, measured inside one login session."""
    script = (
        f"for i in $(seq {runs}); do s=$(date +%s%N); {command} >/dev/null || exit 1; "
        "e=$(date +%s%N); echo $(( (e - s) / 1000 )); done"
    )
    result = sandbox.ssh(script, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return [int(line) / 1000 for line in result.stdout.split()]


WHERE_TASKS_RUN = "srun sh -c 'test -e /.slurm-stack-populated && echo jail || echo pod'"


def where_tasks_run(sandbox: Sandbox) -> str:
    """`jail` or `pod`: which root a task of a plain `srun` sees."""
    result = sandbox.ssh(WHERE_TASKS_RUN, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return result.stdout.strip()


def set_plugstack(sandbox: Sandbox, enabled: bool) -> None:
    """Comment the plugin line in and out on every node's and the login's cached config."""
    sed = "s/^#required/required/" if enabled else "s/^required/#required/"
    pods = [p.name for p in sandbox.current_plan.pods if p.component in ("worker", "login")]
    for pod in pods:
        for path in (
            "/var/spool/slurmd/conf-cache/plugstack.conf",
            "/run/slurm/conf/plugstack.conf",
        ):
            sandbox.exec(pod, ["sh", "-c", f"[ ! -e {path} ] || sed -i '{sed}' {path}"])
    expected = "jail" if enabled else "pod"
    if where_tasks_run(sandbox) != expected:
        raise RuntimeError(
            f"plugstack.conf edit did not take effect: tasks do not run on {expected}"
        )


def plugin_series(sandbox: Sandbox, rounds: int, runs: int) -> dict[str, list[float]]:
    """`srun true` with the plugin, with `--no-jail`, and without the plugin, interleaved in
    rounds whose order alternates, so that drift over the run (a growing job table, the host's
    other work) weighs on all three alike."""
    series: dict[str, list[float]] = {"with": [], "no_jail": [], "without": []}

    def with_plugin() -> None:
        series["with"] += srun_times_ms(sandbox, "srun true", runs)
        series["no_jail"] += srun_times_ms(sandbox, "srun --no-jail true", runs)

    def without_plugin() -> None:
        set_plugstack(sandbox, enabled=False)
        series["without"] += srun_times_ms(sandbox, "srun true", runs)
        set_plugstack(sandbox, enabled=True)

    for round_ in range(rounds):
        for step in (
            (with_plugin, without_plugin) if round_ % 2 == 0 else (without_plugin, with_plugin)
        ):
            step()
    return series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack-file", type=Path, default=ROOT / "tests/cluster/Pulumi.itest.yaml")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    stack_file = work / args.stack_file.name
    document = yaml.safe_load(args.stack_file.read_text())
    document["config"]["slurm-stack:cluster"].setdefault("jail", {})["allowOptOut"] = True
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    sandbox = Sandbox(stack_file, state_base=STATE, log=lambda message: None)
    sandbox.down(delete_data=True)
    sandbox = Sandbox(stack_file, state_base=STATE, log=lambda message: None)
    sandbox.up()  # images built and cached; not part of the cold start
    sandbox.down(delete_data=True)
    sandbox = Sandbox(stack_file, state_base=STATE, log=lambda message: None)
    try:
        start = time.monotonic()
        sandbox.up(build=False)
        workers = [p.name for p in sandbox.current_plan.pods if p.component == "worker"]
        wait_until(lambda: sorted(node_states(sandbox).values()) == ["idle"] * len(workers))
        print(f"sandbox_cold_start_seconds: {time.monotonic() - start:.1f}")

        node = workers[-1]
        sandbox.podman.run(["pod", "rm", "--force", node])
        sandbox.exec(sandbox.pod_of("controller"), ["scontrol", "delete", f"NodeName={node}"])
        start = time.monotonic()
        sandbox.up(build=False)
        wait_until(lambda: node_states(sandbox).get(node) == "idle")
        print(f"node_join_seconds: {time.monotonic() - start:.1f}")

        times = srun_times_ms(sandbox, "srun -N2 true", 50)
        print(f"srun_n2_true_median_ms: {statistics.median(times):.0f}")

        if where_tasks_run(sandbox) != "jail":
            raise RuntimeError("tasks do not enter the jail: the plugin is not active")
        series = plugin_series(sandbox, rounds=4, runs=25)
        with_plugin, no_jail, without = (
            statistics.median(series[key]) for key in ("with", "no_jail", "without")
        )
        print(f"srun_true_median_ms_with_plugin: {with_plugin:.0f}")
        print(f"srun_true_median_ms_without_plugin: {without:.0f}")
        print(f"srun_true_median_ms_no_jail: {no_jail:.0f}")
        print(f"srun_plugin_overhead_percent: {100 * (with_plugin - without) / without:.1f}")
    finally:
        sandbox.down(delete_data=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
