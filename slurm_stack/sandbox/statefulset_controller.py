"""The StatefulSet controller stand-in of one sandbox: a background process that brings a
StatefulSet's pods to the size the stand-in API was given (its scale subresource), and starts
again a pod deleted through the API.

`python -m slurm_stack.sandbox.statefulset_controller STATE_DIR [LOCK_FD]` (started by
`statefulsets.start_controller`, from `sandbox up` when a StatefulSet is elastic). It holds
the controller lock for its life (one per sandbox), looks twice a second for a StatefulSet
whose live size differs from the size its pods were last brought to and for pod deletions
(`statefulsets.pending`), and exits on SIGTERM or once its inputs are gone (`sandbox down`).

Each pass holds the sandbox's pods lock (`state.hold_pods`, which `up` and the other
commands that start or stop pods hold too), plans the pods from the last `up`'s objects at
the live sizes (`statefulsets.planned_sizes`, as `up` would plan them) and then does what
Kubernetes' StatefulSet controller does, with the apply's own code (`Applier`), so that its
pods are like those `up` starts: surplus pods stopped highest ordinal first, each with its
preStop hook and grace period; a deleted pod stopped the same way; missing pods (neither
running nor lost) started lowest ordinal first, side by side with `podManagementPolicy:
Parallel`, one after another once ready with `OrderedReady`. Before the pods start, the
stand-in API lists them, the hosts file names them and their addresses are saved. A pass that
fails for a StatefulSet is tried again after 10 s, then ever later up to 5 minutes, as the
controller backs off. Each action is a line of `statefulset-controller/controller.log`.
"""

import datetime
import fcntl
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from slurm_stack.sandbox.apply import (
    Applier,
    PodmanError,
    SandboxError,
    install_fake_gpu_tools,
    network_name,
    write_hosts,
)
from slurm_stack.sandbox.daemon import serve
from slurm_stack.sandbox.kube_api import SandboxKubeApi, api_pods
from slurm_stack.sandbox.plan import Plan, Pod, plan
from slurm_stack.sandbox.podman import Podman
from slurm_stack.sandbox.state import SandboxState, hold_ips
from slurm_stack.sandbox.statefulsets import (
    CONTROLLER,
    ControllerInputs,
    deletions,
    drop_deletion,
    inputs_file,
    kept_addresses,
    live_sizes,
    load_inputs,
    lost_pods,
    observed_sizes,
    ordinal_of,
    planned_sizes,
    save_lost,
    save_observed,
    size_change,
)

POLL = 0.5  # how often the sizes and deletions are looked at
LOCK_POLL = 0.2  # how often the pods lock is tried while a command holds it
FIRST_RETRY = 10.0
LAST_RETRY = 300.0


class Controller:
    """The controller of one sandbox."""

    def __init__(
        self,
        state: SandboxState,
        podman: Podman | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state
        self.podman = podman or Podman()
        self.log = log or self._log_line
        self._stop = threading.Event()
        self._log_lock = threading.Lock()
        self._retry: dict[str, tuple[float, float]] = {}  # by StatefulSet: when, last delay

    def _log_line(self, message: str) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._log_lock, open(self.state.controller_log, "a") as log:
            log.write(f"{now} {message}\n")

    def stop(self) -> None:
        """End `run` (SIGTERM's handler); a pass under way finishes its pod."""
        self._stop.set()

    def run(self) -> None:
        """Act on each size change and deletion until stopped or the inputs are gone."""
        backoff = 0.0  # after a pass that failed as a whole (its plan, say)
        while not self._stop.is_set() and inputs_file(self.state).exists():
            if self._due():
                lock = self._take_pods_lock()
                if lock is None:
                    break
                try:
                    self.sync()
                    backoff = 0.0
                except Exception as error:
                    backoff = min(max(backoff * 2, FIRST_RETRY), LAST_RETRY)
                    self.log(f"pass failed: {error}; the next in {backoff:g}s")
                finally:
                    os.close(lock)
            self._stop.wait(backoff or POLL)

    def _due(self) -> bool:
        """Whether a deletion waits, or a resized StatefulSet not waiting out a backoff."""
        if deletions(self.state):
            return True
        observed = observed_sizes(self.state)
        now = time.monotonic()
        return any(
            observed.get(name) != size and self._retry.get(name, (0.0, 0.0))[0] <= now
            for name, size in live_sizes(self.state).items()
        )

    def _take_pods_lock(self) -> int | None:
        """A descriptor holding the pods lock, tried until it is free; None if stopped
        meanwhile."""
        path = self.state.pods_lock_file
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if not said:
                    self.log("waiting for the pods: a sandbox command acts on them")
                    said = True
            if self._stop.wait(LOCK_POLL):
                os.close(fd)
                return None

    def sync(self) -> None:
        """One pass, with the pods lock held: bring each resized StatefulSet's pods to its
        size, stop and start again each deleted pod."""
        inputs = load_inputs(self.state)
        if inputs is None:
            return
        live, observed = live_sizes(self.state), observed_sizes(self.state)
        now = time.monotonic()
        resized = sorted(
            name
            for name, size in live.items()
            if observed.get(name) != size and self._retry.get(name, (0.0, 0.0))[0] <= now
        )
        deleted = deletions(self.state)
        if not resized and not deleted:
            return
        sizes = planned_sizes(inputs.manifests, live)
        gone = [name for name in resized if name not in sizes]  # left the stack: no pods
        resized = [name for name in resized if name in sizes]
        current = self._plan(inputs, sizes)
        applier = Applier(inputs.sandbox, self.state, self.podman, self.log)
        running = applier.running_pods()
        lost = lost_pods(self.state)
        planned = {pod.name: pod for pod in current.pods}

        restart: list[str] = []
        for _, pod in deleted:
            if pod in running:
                self.log(f"pod {pod}: deleted through the API; stopping it")
                applier.remove_pod(pod)
                del running[pod]
            lost.discard(pod)
            if pod in planned:
                restart.append(pod)
        changes = {}
        for name in resized:
            change = size_change(name, sizes[name], running, lost)
            changes[name] = change
            if change.start or change.stop or change.forget:
                self.log(
                    f"StatefulSet {name}: size {observed.get(name, '-')} -> {sizes[name]}"
                    + (f"; stopping {', '.join(change.stop)}" if change.stop else "")
                    + (f"; starting {', '.join(change.start)}" if change.start else "")
                    + (f"; forgetting lost {', '.join(change.forget)}" if change.forget else "")
                )
            for pod in change.stop:  # highest ordinal first, as the apply scales down
                applier.remove_pod(pod)
                del running[pod]
            lost.difference_update(change.forget)
        save_lost(self.state, lost)

        starting = sorted(
            {*restart, *(pod for change in changes.values() for pod in change.start)},
            key=lambda pod: (
                planned[pod].statefulset,
                ordinal_of(pod, planned[pod].statefulset) or 0,
                pod,
            ),
        )
        self._publish(inputs, current, sizes)
        failed = self._start(applier, current, [planned[pod] for pod in starting])

        for namespace, pod in deleted:
            drop_deletion(self.state, namespace, pod)
        observed = observed_sizes(self.state)
        for name in resized:
            if name in failed:
                delay = min(self._retry.get(name, (0.0, FIRST_RETRY / 2))[1] * 2, LAST_RETRY)
                self._retry[name] = (time.monotonic() + delay, delay)
                self.log(f"StatefulSet {name}: tried again in {delay:g}s")
                observed.pop(name, None)
            else:
                self._retry.pop(name, None)
                observed[name] = live[name]
        for name in gone:
            observed[name] = live[name]
        for name in failed - set(resized):  # a deleted pod that did not start again
            observed.pop(name, None)
        save_observed(self.state, observed)

    def _plan(self, inputs: ControllerInputs, sizes: dict[str, int]) -> Plan:
        """The pods at ``sizes``, planned as `up` plans them; new pods' addresses saved."""
        with hold_ips(self.state):
            known = self.state.load_ips()
            current = plan(
                inputs.manifests,
                str(self.state.root),
                inputs.subnet,
                ips=known,
                image_tag=inputs.image_tag,
                gpu_devices=self.state.load_gpu_devices(),
                sizes=sizes,
            )
            kept = kept_addresses(known, inputs.manifests)
            self.state.save_ips({**known, **kept, **{pod.name: pod.ip for pod in current.pods}})
        return current

    def _publish(self, inputs: ControllerInputs, current: Plan, sizes: dict[str, int]) -> None:
        """What the pods about to start need from the sandbox, before they start: their
        names in the hosts file, their objects and nodes in the stand-in API, the fake GPU
        devices and their claims."""
        write_hosts(current, self.state)
        if (self.state.kube_api_dir / "pods.json").exists():
            api = SandboxKubeApi(
                inputs.sandbox,
                network_name(inputs.sandbox),
                inputs.subnet,
                self.state.root,
                self.podman,
            )
            api.publish_pods(api_pods(inputs.manifests, sizes))
        install_fake_gpu_tools(self.state, current)

    def _start(self, applier: Applier, current: Plan, pods: list[Pod]) -> set[str]:
        """Start ``pods`` (in ordinal order): a StatefulSet's side by side under Parallel,
        one after another under OrderedReady. Returns the StatefulSets of those that
        failed."""
        if not pods:
            return set()
        applier.ensure_network(current)
        applier.prepare_directories(current)
        ordered: dict[str, list[Pod]] = {}
        parallel: list[Pod] = []
        for pod in pods:
            if pod.ordered_ready:
                ordered.setdefault(pod.statefulset, []).append(pod)
            else:
                parallel.append(pod)
        failed: set[str] = set()

        def start(pod: Pod) -> bool:
            self.log(f"pod {pod.name}: starting ({pod.component})")
            try:
                applier.start_pod(current, pod, applier.fingerprint_of(current, pod))
            except (SandboxError, PodmanError, OSError, ValueError) as error:
                self.log(f"pod {pod.name}: did not start: {error}")
                failed.add(pod.statefulset)
                return False
            self.log(f"pod {pod.name}: ready")
            return True

        def start_in_order(group: list[Pod]) -> None:
            for pod in group:
                if not start(pod):
                    return  # OrderedReady: none after a pod that is not ready

        with ThreadPoolExecutor(max_workers=8) as pool:
            for group in ordered.values():
                pool.submit(start_in_order, group)
            for pod in parallel:
                pool.submit(start, pod)
        return failed


def main(argv: list[str]) -> int:
    """Run the controller of the sandbox whose state directory is ``argv[0]``; ``argv[1]``,
    where given, is a descriptor holding its lock (`statefulsets.start_controller`), else it
    takes it."""
    return serve(
        CONTROLLER,
        argv,
        Controller,
        title="StatefulSet controller",
        announce=lambda controller, line: controller.log(line),
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
