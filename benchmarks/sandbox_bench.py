"""Sandbox numbers on real Slurm: cold start, dynamic node join, srun latency.

    .venv/bin/python benchmarks/sandbox_bench.py [--stack-file FILE] [--rounds N]

Prints `name: value` lines:
- sandbox_cold_start_seconds: `sandbox up` on empty state (images already built) until every
  worker is idle, for the benchmark's stack (default: the test stack, with accounting,
  metrics, two pools, users);
- sandbox_cold_start_seconds_dev: the same for the README's `dev` stack (accounting, one pool
  of two workers, login), the boot a new user waits for;
- node_join_seconds: a worker pod removed and its node record deleted, then `up` until the
  node is idle again (pod start, munge, slurmd registering as a dynamic node);
- srun_n2_true_median_ms: median of 50 `srun -N2 true` from a login session (the chroot
  plugin enters the jail on both nodes);
- srun_true_median_ms_with_plugin / _without_plugin and srun_plugin_overhead_percent:
  `srun true` in --rounds interleaved rounds of 25 (default 4, i.e. 100 runs; order
  alternating), with the jail plugin and with its plugstack.conf line commented out on every
  node and the login node of the same cluster (checked: a task then sees the pod's own root,
  not the jail);
- srun_true_median_ms_no_jail: `srun --no-jail true` in the same rounds (plugin loaded,
  jail not entered; the benchmark's copy of the stack sets jail.allowOptOut);
- jail_entry_paired_ms / _percent: median difference between `srun true` and `srun --no-jail
  true` run back to back, over 200 pairs: what entering the jail adds to a step, measured
  where the host's drift cancels (percent of the --no-jail median);
- srun_plugin_overhead_paired_ms / _percent: the same pairing for the whole plugin: 100 pairs
  of `srun -w <node> true` with and without the plugin line, switched between the two runs
  of a pair (percent of the without-plugin median).
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


def srun_times_ms(sandbox: Sandbox, commands: str | list[str], runs: int) -> list[float]:
    """Wall time of each run of each command (in turn, ``runs`` times), in one login session."""
    timed = "s=$(date +%s%N); {} >/dev/null || exit 1; e=$(date +%s%N); echo $(( (e - s) / 1000 ))"
    body = "; ".join(
        timed.format(c) for c in ([commands] if isinstance(commands, str) else commands)
    )
    result = sandbox.ssh(f"for i in $(seq {runs}); do {body}; done", timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return [int(line) / 1000 for line in result.stdout.split()]


def paired_difference_ms(sandbox: Sandbox, first: str, second: str, pairs: int) -> float:
    """Median of (time of `first` - time of `second`) over back-to-back pairs: drift in the
    host's load cancels within a pair, so a small difference shows through the noise."""
    times = srun_times_ms(sandbox, [first, second], pairs)
    return statistics.median(a - b for a, b in zip(times[::2], times[1::2], strict=True))


WHERE_TASKS_RUN = "srun sh -c 'test -e /.slurm-stack-populated && echo jail || echo pod'"


def where_tasks_run(sandbox: Sandbox) -> str:
    """`jail` or `pod`: which root a task of a plain `srun` sees."""
    result = sandbox.ssh(WHERE_TASKS_RUN, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return result.stdout.strip()


PLUGSTACK_COPIES = ("/var/spool/slurmd/conf-cache/plugstack.conf", "/run/slurm/conf/plugstack.conf")


def edit_plugstack(sandbox: Sandbox, pods: list[str], enabled: bool) -> None:
    """Comment the plugin line in or out of the cached plugstack.conf in ``pods``."""
    sed = "s/^#required/required/" if enabled else "s/^required/#required/"
    edit = "; ".join(f"[ ! -e {path} ] || sed -i '{sed}' {path}" for path in PLUGSTACK_COPIES)
    for pod in pods:
        sandbox.exec(pod, ["sh", "-c", edit])


def set_plugstack(sandbox: Sandbox, enabled: bool) -> None:
    """The plugin on or off on every node and the login node, checked from a task."""
    pods = [p.name for p in sandbox.current_plan.pods if p.component in ("worker", "login")]
    edit_plugstack(sandbox, pods, enabled)
    expected = "jail" if enabled else "pod"
    if where_tasks_run(sandbox) != expected:
        raise RuntimeError(
            f"plugstack.conf edit did not take effect: tasks do not run on {expected}"
        )


def paired_plugin_overhead_ms(sandbox: Sandbox, node: str, pairs: int) -> float:
    """Median of (with plugin - without) for one `srun -w node true` each, back to back, the
    plugin switched on the login node and ``node`` between them (order alternating)."""
    pods = [sandbox.pod_of("login"), node]
    command = f"srun -w {node} true"
    differences = []
    for pair in range(pairs):
        timed = {}
        for enabled in (True, False) if pair % 2 else (False, True):
            edit_plugstack(sandbox, pods, enabled)
            timed[enabled] = srun_times_ms(sandbox, command, 1)[0]
        differences.append(timed[True] - timed[False])
    edit_plugstack(sandbox, pods, True)
    return statistics.median(differences)


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


def cold_start_seconds(sandbox: Sandbox) -> float:
    """`sandbox up` on empty state until every worker is idle; the sandbox is left running."""
    start = time.monotonic()
    sandbox.up(build=False)
    workers = [p.name for p in sandbox.current_plan.pods if p.component == "worker"]
    wait_until(lambda: sorted(node_states(sandbox).values()) == ["idle"] * len(workers))
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack-file", type=Path, default=ROOT / "tests/cluster/Pulumi.itest.yaml")
    parser.add_argument(
        "--rounds", type=int, default=4, help="interleaved rounds of 25 runs per plugin series"
    )
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
    dev = Sandbox(ROOT / "Pulumi.dev.yaml", state_base=STATE, log=lambda message: None)
    try:
        print(f"sandbox_cold_start_seconds_dev: {cold_start_seconds(dev):.1f}")
    finally:
        dev.down(delete_data=True)
    sandbox = Sandbox(stack_file, state_base=STATE, log=lambda message: None)
    try:
        print(f"sandbox_cold_start_seconds: {cold_start_seconds(sandbox):.1f}")
        workers = [p.name for p in sandbox.current_plan.pods if p.component == "worker"]

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
        series = plugin_series(sandbox, rounds=args.rounds, runs=25)
        with_plugin, no_jail, without = (
            statistics.median(series[key]) for key in ("with", "no_jail", "without")
        )
        print(f"srun_true_median_ms_with_plugin: {with_plugin:.0f}")
        print(f"srun_true_median_ms_without_plugin: {without:.0f}")
        print(f"srun_true_median_ms_no_jail: {no_jail:.0f}")
        print(f"srun_plugin_overhead_percent: {100 * (with_plugin - without) / without:.1f}")
        entry = paired_difference_ms(sandbox, "srun true", "srun --no-jail true", 200)
        print(f"jail_entry_paired_ms: {entry:.1f}")
        print(f"jail_entry_paired_percent: {100 * entry / no_jail:.1f}")
        overhead = paired_plugin_overhead_ms(sandbox, workers[0], 100)
        print(f"srun_plugin_overhead_paired_ms: {overhead:.1f}")
        print(f"srun_plugin_overhead_paired_percent: {100 * overhead / without:.1f}")
    finally:
        sandbox.down(delete_data=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
