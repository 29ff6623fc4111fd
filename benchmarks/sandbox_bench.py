"""Sandbox numbers on real Slurm: cold start, dynamic node join, srun latency.

    .venv/bin/python benchmarks/sandbox_bench.py [--stack-file FILE]

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
- the jail plugin's figures, on steps (`srun --overlap true`) in one allocation held on a node,
  timed in one login session, the plugin line of plugstack.conf switched on that node and the
  login node from the host between runs (checked: a task then sees the pod's own root, not
  the jail):
  - srun_plugin_overhead_paired_ms / _percent: median of (with - without) over 300 pairs run
    back to back, the order alternating, so that the host's drift cancels within a pair
    (percent of the without-plugin median);
  - srun_true_median_ms_with_plugin / _without_plugin: the medians of those runs;
  - step_cpu_ms_with_plugin / _without_plugin and plugin_cpu_overhead_ms: CPU time per step
    of srun, slurmstepd, the task and the daemons' threads serving them, from the kernel's
    scheduler accounting (tracefs), 100 steps each in alternating blocks of 20: the plugin's
    own work without the noise of waiting;
  - jail_entry_paired_ms / _percent and srun_true_median_ms_no_jail: the same pairing of
    `srun true` against `srun --no-jail true` (plugin loaded, jail not entered; the
    benchmark's copy of the stack sets jail.allowOptOut), 200 pairs.
Runs as root; uses its own state directory and removes it at the end.
"""

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
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
    """sinfo's node states, asked through nsenter (milliseconds): polled every 0.1 s, a podman
    exec (a quarter of a CPU second) would load the machine whose start it measures."""
    controller = sandbox.pod_of("controller")
    out = sandbox.exec_quick(controller, ["sinfo", "-N", "-h", "-o", "%N %t"]).stdout
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


class LoginShell:
    """One login session as the sandbox user, kept open: commands are timed inside it, so
    neither ssh's start nor the host's side of the pair is in a figure."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.process = subprocess.Popen(
            [*sandbox.ssh_command(), "bash"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def run(self, command: str) -> str:
        """The command's last output line (stderr discarded); raises if it failed."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(f"out=$({command} 2>/dev/null); echo \"$? ${{out##*$'\\n'}}\"\n")
        self.process.stdin.flush()
        status, _, last = self.process.stdout.readline().rstrip("\n").partition(" ")
        if status != "0":
            raise RuntimeError(f"{command!r} failed in the login session ({status})")
        return last

    def timed_ms(self, command: str) -> float:
        """Wall time of one run of ``command``, measured in the session."""
        return (
            float(
                self.run(f"s=$(date +%s%N); {command} >/dev/null; e=$(date +%s%N); echo $((e - s))")
            )
            / 1e6
        )

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=30)


WHERE_TASKS_RUN = "sh -c 'test -e /.slurm-stack-populated && echo jail || echo pod'"
PLUGSTACK_COPIES = ("/var/spool/slurmd/conf-cache/plugstack.conf", "/run/slurm/conf/plugstack.conf")


class PlugstackSwitch:
    """The plugin line of the cached plugstack.conf in some pods, commented in or out from the
    host through /proc/PID/root. srun and each slurmstepd read the file afresh, so the next
    step sees the switch; a podman exec per switch would take a few hundred milliseconds and
    load the machine between the two runs of a pair."""

    def __init__(self, sandbox: Sandbox, pods: list[str]) -> None:
        self.files: dict[Path, str] = {}
        for pod in pods:
            pid = sandbox.podman.run(
                ["inspect", "--format", "{{.State.Pid}}", sandbox.node_container(pod)]
            ).stdout.strip()
            for copy in PLUGSTACK_COPIES:
                path = Path(f"/proc/{pid}/root{copy}")
                if path.exists():
                    self.files[path] = path.read_text()
        if not self.files:
            raise RuntimeError(f"no plugstack.conf found in {pods}")

    def set(self, enabled: bool) -> None:
        for path, original in self.files.items():
            path.write_text(original if enabled else original.replace("\nrequired", "\n#required"))


class Allocation:
    """One node held by a job of the sandbox user, for steps timed in ``shell``."""

    def __init__(self, shell: LoginShell, node: str) -> None:
        self.shell = shell
        granted = "sed -n 's/.*allocation \\([0-9]*\\).*/\\1/p'"
        self.job = shell.run(f"salloc -N1 -w {node} --no-shell --time=60 2>&1 | {granted}")
        if not self.job.isdigit():
            raise RuntimeError(f"salloc on {node} gave no job id")

    def step(self, options: str = "", command: str = "true") -> str:
        return f"srun --jobid {self.job} --overlap {options} {command}".replace("  ", " ")

    def release(self) -> None:
        self.shell.run(f"scancel {self.job}")


def paired_ms(
    shell: LoginShell, pairs: int, first: Callable[[], str], second: Callable[[], str]
) -> tuple[float, list[float], list[float]]:
    """Median of (time of first - time of second) over back-to-back pairs, the order
    alternating; each callable readies its run (a switch, say) and gives the command. Drift
    in the host's load cancels within a pair, so a small difference shows through the noise."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for pair in range(pairs):
        for which in (0, 1) if pair % 2 == 0 else (1, 0):
            times[which].append(shell.timed_ms((first, second)[which]()))
    differences = [a - b for a, b in zip(times[0], times[1], strict=True)]
    return statistics.median(differences), times[0], times[1]


TRACING = Path("/sys/kernel/tracing")
# srun, slurmstepd and the task by name; their threads (and slurmd's, sackd's) by the names
# Slurm gives them.
STEP_PROCESSES = " || ".join(
    [
        'comm == "srun"',
        'comm == "slurmstepd"',
        'comm == "true"',
        'comm ~ "worker*"',
        'comm ~ "acctg*"',
        'comm == "watch"',
    ]
)


def step_cpu_ms(shell: LoginShell, command: str, runs: int) -> float:
    """CPU time per run of ``command`` spent by srun, slurmstepd, the task and the daemons'
    threads that serve them (STEP_PROCESSES), from the
    kernel's scheduler accounting (sched_stat_runtime): unlike wall time, waiting on the
    network or on other work of the host is not in it."""
    if not (TRACING / "trace").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACING)], check=True)
    event = TRACING / "events/sched/sched_stat_runtime"
    (event / "filter").write_text(STEP_PROCESSES)
    (TRACING / "trace").write_text("")
    was_on = (TRACING / "tracing_on").read_text().strip()
    buffer_kb = (TRACING / "buffer_size_kb").read_text().split()[0]
    (TRACING / "buffer_size_kb").write_text("16384")  # per CPU; none of a block is dropped
    (TRACING / "tracing_on").write_text("1")
    (event / "enable").write_text("1")
    try:
        for _ in range(runs):
            shell.run(f"{command} >/dev/null")
    finally:
        (event / "enable").write_text("0")
        (event / "filter").write_text("0")
        (TRACING / "tracing_on").write_text(was_on)
    overruns = sum(
        int(line.split()[1])
        for stats in (TRACING / "per_cpu").glob("cpu*/stats")
        for line in stats.read_text().splitlines()
        if line.startswith("overrun:")
    )
    (TRACING / "buffer_size_kb").write_text(buffer_kb)
    runtime_ns = sum(
        int(match) for match in re.findall(r"runtime=(\d+)", (TRACING / "trace").read_text())
    )
    (TRACING / "trace").write_text("")
    if runtime_ns == 0 or overruns:
        raise RuntimeError(f"the kernel's trace lost events ({overruns}) or recorded none")
    return runtime_ns / 1e6 / runs


def plugin_figures(sandbox: Sandbox, node: str) -> dict[str, float]:
    """What the jail plugin adds to a step, on steps in an allocation held on ``node`` (the
    plugin runs once per step; a new job per run would add the scheduler's noise and no
    plugin work)."""
    switch = PlugstackSwitch(sandbox, [sandbox.pod_of("login"), node])
    shell = LoginShell(sandbox)
    allocation = Allocation(shell, node)
    figures: dict[str, float] = {}
    try:
        switch.set(False)
        if shell.run(allocation.step(command=WHERE_TASKS_RUN)) != "pod":
            raise RuntimeError("with the plugin line commented out, a task still sees the jail")
        switch.set(True)
        if shell.run(allocation.step(command=WHERE_TASKS_RUN)) != "jail":
            raise RuntimeError("tasks do not enter the jail: the plugin is not active")
        for _ in range(5):  # warm caches on both sides
            shell.run(allocation.step())

        def with_plugin() -> str:
            switch.set(True)
            return allocation.step()

        def without_plugin() -> str:
            switch.set(False)
            return allocation.step()

        overhead, with_times, without_times = paired_ms(shell, 300, with_plugin, without_plugin)
        without = statistics.median(without_times)
        figures["srun_true_median_ms_with_plugin"] = statistics.median(with_times)
        figures["srun_true_median_ms_without_plugin"] = without
        figures["srun_plugin_overhead_paired_ms"] = overhead
        figures["srun_plugin_overhead_paired_percent"] = 100 * overhead / without

        cpu = {True: 0.0, False: 0.0}
        for block in range(10):  # alternating blocks of 20 steps
            enabled = block % 2 == 0
            switch.set(enabled)
            cpu[enabled] += step_cpu_ms(shell, allocation.step(), 20) / 5
        figures["step_cpu_ms_with_plugin"] = cpu[True]
        figures["step_cpu_ms_without_plugin"] = cpu[False]
        figures["plugin_cpu_overhead_ms"] = cpu[True] - cpu[False]

        switch.set(True)
        entry, _, no_jail_times = paired_ms(
            shell, 200, allocation.step, lambda: allocation.step("--no-jail")
        )
        figures["srun_true_median_ms_no_jail"] = statistics.median(no_jail_times)
        figures["jail_entry_paired_ms"] = entry
        figures["jail_entry_paired_percent"] = 100 * entry / statistics.median(no_jail_times)
    finally:
        switch.set(True)
        allocation.release()
        shell.close()
    return figures


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

        for name, value in plugin_figures(sandbox, workers[0]).items():
            print(f"{name}: {value:.{0 if name.startswith('srun_true') else 1}f}")
    finally:
        sandbox.down(delete_data=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
