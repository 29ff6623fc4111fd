"""The liveness prober of one sandbox: a background process that probes containers as the
kubelet does, and kills those whose probe keeps failing so that they restart in place.

`python -m slurm_stack.sandbox.liveness_server STATE_DIR` (started by `liveness.start_prober`).
It holds the sandbox's prober lock for its life (one prober per sandbox) and follows the
targets file (`liveness.update_targets`), looked at once a second; it exits on SIGTERM, or
once the targets file is gone (`sandbox down`).

For each target, as the kubelet's probe workers do (pkg/kubelet/prober/worker.go): nothing
while the container does not run; after each (re)start of the container, its startupProbe
(if any) every startup period until it passes, then, once `initialDelaySeconds` have passed
since the container started, the livenessProbe every period. `failureThreshold` failures in a
row of either kill the container as pkg/kubelet/kuberuntime's killContainer does: its preStop
hook, SIGTERM, SIGKILL once the pod's termination grace period (hook included, at least 2 s)
is over. The container then restarts in place (podman's `--restart always`, which counts it
in RestartCount). Each failure and kill is an event: a line in `events.log` under the state
directory and on this process's stderr.

Probing costs no podman call: the container's main PID comes from the PID file podman writes
at each start (`pids/`), checked against the container's cgroup; exec probes go through
nsenter (exec_probes.py), TCP probes are a connect. Podman is asked only for what a kill
needs (a frozen container is thawed after its SIGKILL, as cgroup v2 lets SIGKILL through the
freezer and this host's v1 does not) and for the ID of a container the apply did not know.
"""

import datetime
import os
import signal
import sys
import threading
import time
from pathlib import Path

from slurm_stack.sandbox.daemon import serve, wait_gone
from slurm_stack.sandbox.exec_probes import NsenterExec, ProbeResult, is_frozen
from slurm_stack.sandbox.liveness import PROBER, Target, load_targets, tcp_probe
from slurm_stack.sandbox.plan import Probe
from slurm_stack.sandbox.podman import Podman, pid_of_container
from slurm_stack.sandbox.state import SandboxState

RELOAD_PERIOD = 1.0  # how often the targets file is looked at
MIN_GRACE = 2.0  # minimumGracePeriodInSeconds, pkg/kubelet/kuberuntime
EXIT_WAIT = 30.0  # for a SIGKILLed main process to be gone
ASK_PODMAN_EVERY = 10.0  # at most, for the ID of a container the apply did not know


class Events:
    """The prober's events, as `kubectl get events` lists the kubelet's: a line each in the
    events file and on stderr."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def emit(self, kind: str, reason: str, target: Target, message: str) -> None:
        """Record one event of ``target``'s container (``kind``: Normal or Warning)."""
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = f"{now} {kind} {reason} pod/{target.pod} {target.container}: {message}\n"
        with self._lock:
            with open(self.path, "a") as log:
                log.write(line)
            sys.stderr.write(line)
            sys.stderr.flush()


def started_seconds_ago(pid: int) -> float:
    """How long ago process ``pid`` started (/proc's start time, in clock ticks since boot)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    start_ticks = int(stat.rpartition(")")[2].split()[19])  # field 22, starttime
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")


class ContainerProber:
    """The probe worker of one target, in a thread of its own: startup, then liveness
    probes, and the kill."""

    def __init__(self, target: Target, prober: "Prober") -> None:
        self.target = target
        self._prober = prober
        self._halt = threading.Event()
        self._instance: int | None = None  # the main PID the counts below are about
        self._killed: int | None = None  # a main PID this worker killed
        self._started = True  # whether the instance's startup probe has passed
        self._failures = 0

    def start(self) -> None:
        threading.Thread(
            target=self._run_loop, name=f"probe {self.target.name}", daemon=True
        ).start()

    def stop(self) -> None:
        """Stop probing (the target left the file); a kill under way is finished."""
        self._halt.set()

    def _run_loop(self) -> None:
        while not self._halt.is_set():
            began = time.monotonic()
            period = self.step()
            self._halt.wait(max(period - (time.monotonic() - began), 0))

    def step(self) -> float:
        """One tick: probe the current instance if it is due; returns the next tick's wait."""
        target = self.target
        pid = self._prober.execs.pid(target.name)
        if pid is None or pid == self._killed:
            return self._current().period
        if pid != self._instance:
            if self._instance is not None:  # restarted, after a kill or on its own
                self._prober.events.emit(
                    "Normal", "Started", target, f"Started container {target.container}"
                )
            self._instance, self._killed, self._failures = pid, None, 0
            self._started = target.startup is None
        probe, kind = self._current(), "Liveness" if self._started else "Startup"
        try:
            if started_seconds_ago(pid) < probe.initial_delay:
                return probe.period
        except (OSError, ValueError, IndexError):
            return probe.period  # gone since
        result = self._run(probe)
        if result.passed:
            self._failures = 0
            if not self._started:
                self._started = True
                return target.liveness.period
            return probe.period
        if self._halt.is_set():
            return probe.period  # a target that left has no say
        self._failures += 1
        self._prober.events.emit(
            "Warning", "Unhealthy", target, f"{kind} probe failed: {result.output}"
        )
        if self._failures >= probe.failures and self._prober.still_watched(target):
            self._failures = 0
            self._killed = pid
            self._prober.kill(target, pid, kind.lower())
        return probe.period

    def _current(self) -> Probe:
        startup = self.target.startup
        return startup if startup is not None and not self._started else self.target.liveness

    def _run(self, probe: Probe) -> ProbeResult:
        target = self.target
        if probe.port is not None:
            return tcp_probe(target.ip, probe.port, probe.timeout)
        return self._prober.execs.probe(
            target.name, probe.command, user=target.user, group=target.group, timeout=probe.timeout
        )


class Prober:
    """The prober of one sandbox: a worker per target, following the targets file."""

    def __init__(self, state: SandboxState, podman: Podman | None = None) -> None:
        self.state = state
        self.podman = podman or Podman()
        self.events = Events(state.liveness_events_file)
        self.execs = NsenterExec(self._main_pid)
        self._targets: dict[str, Target] = {}
        self._workers: dict[str, ContainerProber] = {}
        self._ids: dict[str, str] = {}  # learnt from podman, for targets without one
        self._asked: dict[str, float] = {}
        self._stop = threading.Event()
        self._seen: tuple[int, int, int] | None = None

    def stop(self) -> None:
        """End `run` (SIGTERM's handler)."""
        self._stop.set()

    def run(self) -> None:
        """Follow the targets file until it is gone or `stop` is called."""
        while not self._stop.is_set():
            if not self.reload():
                break
            self._stop.wait(RELOAD_PERIOD)
        for worker in self._workers.values():
            worker.stop()

    def reload(self) -> bool:
        """Take the targets file's changes: a worker for each new or changed target, none for
        one that left. False once the file is gone."""
        try:
            info = self.state.liveness_targets_file.stat()
        except FileNotFoundError:
            return False
        seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        if seen == self._seen:
            return True
        self._seen = seen
        targets = load_targets(self.state.liveness_targets_file)
        if targets is None:
            return False
        self._targets = targets
        for name, worker in list(self._workers.items()):
            if targets.get(name) != worker.target:
                worker.stop()
                del self._workers[name]
        for name, target in targets.items():
            if name not in self._workers:
                self._workers[name] = ContainerProber(target, self)
                self._workers[name].start()
        return True

    def still_watched(self, target: Target) -> bool:
        """Whether ``target`` is in the targets file as it is now (read again before a kill:
        the apply takes a pod out before it stops it)."""
        current = load_targets(self.state.liveness_targets_file) or {}
        return current.get(target.name) == target

    def _main_pid(self, name: str) -> int | None:
        target = self._targets.get(name)
        container_id = (target.container_id if target else "") or self._ids.get(name, "")
        if not container_id and time.monotonic() - self._asked.get(name, -1e9) > ASK_PODMAN_EVERY:
            self._asked[name] = time.monotonic()
            out = self.podman.run(["inspect", "--format", "{{.Id}}", name], check=False)
            container_id = self._ids[name] = out.stdout.strip() if out.returncode == 0 else ""
        return pid_of_container(self.state.pid_dir / name, container_id) if container_id else None

    def kill(self, target: Target, pid: int, probe: str) -> None:
        """Kill a container that failed its probe, as the kubelet does: preStop hook,
        SIGTERM, SIGKILL once the grace period is over; its restart policy restarts it."""
        self.events.emit(
            "Normal",
            "Killing",
            target,
            f"Container {target.container} failed {probe} probe, will be restarted",
        )
        try:
            handle = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            began = time.monotonic()
            if target.pre_stop:
                hook = self.execs.probe(
                    target.name, target.pre_stop, user=target.user, group=target.group,
                    timeout=target.grace,
                )  # fmt: skip
                if not hook.passed:
                    self.events.emit(
                        "Warning", "FailedPreStopHook", target, f"PreStopHook failed: {hook.output}"
                    )
            grace = max(target.grace - (time.monotonic() - began), MIN_GRACE)
            signal.pidfd_send_signal(handle, signal.SIGTERM)
            if wait_gone(handle, grace):
                return
            frozen = is_frozen(pid)
            signal.pidfd_send_signal(handle, signal.SIGKILL)
            if frozen:
                self.podman.run(["unpause", target.name], check=False)
            if not wait_gone(handle, EXIT_WAIT):
                self.events.emit("Warning", "FailedKillPod", target, "error killing container")
        except (ProcessLookupError, OSError):
            pass  # gone on its own meanwhile
        finally:
            os.close(handle)


def main(argv: list[str]) -> int:
    """Run the prober of the sandbox whose state directory is ``argv[0]``; ``argv[1]``, where
    given, is a descriptor holding its lock (`liveness.start_prober`), else it takes it."""
    return serve(PROBER, argv, Prober, title="liveness prober")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
