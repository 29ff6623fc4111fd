"""Liveness probes as the kubelet runs them (slurm_stack/sandbox/liveness.py and
liveness_server.py): parsing, the targets file the apply keeps, one probe's outcome, and the
background prober on real podman containers, each killed and restarted in place as a node's
kubelet would (SIGTERM after its preStop hook, SIGKILL once the grace period is over)."""

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from slurm_stack.sandbox.apply import Applier, fingerprint
from slurm_stack.sandbox.exec_probes import NsenterExec
from slurm_stack.sandbox.liveness import (
    load_targets,
    prober_pid,
    start_prober,
    stop_prober,
    targets_of,
    tcp_probe,
    update_targets,
)
from slurm_stack.sandbox.plan import Container, Mount, Plan, Pod, Probe, plan
from slurm_stack.sandbox.podman import Podman
from slurm_stack.sandbox.state import SandboxState
from slurm_stack.spec.models import IMAGE_REVISION

IMAGE = f"localhost/slurm-stack/base:26.05-{IMAGE_REVISION}"  # images/build.sh's first


# -- parsing ------------------------------------------------------------------------------------


def statefulset(container: dict[str, Any]) -> dict[str, Any]:
    """A one-pod StatefulSet around ``container``."""
    return {
        "kind": "StatefulSet",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/component": "login"}},
                "spec": {"containers": [container]},
            },
        },
    }


def planned_container(container: dict[str, Any]) -> Container:
    [pod] = plan([statefulset(container)], "/state").pods
    [planned] = pod.containers
    return planned


def test_a_liveness_probe_takes_kubernetes_defaults() -> None:
    container = planned_container(
        {"name": "c", "image": "i", "livenessProbe": {"exec": {"command": ["check", "-q"]}}}
    )
    assert container.liveness == Probe(
        command=("check", "-q"), period=10, failures=3, timeout=1, initial_delay=0
    )
    assert container.startup is None and container.probe is None  # `up` waits on none


def test_a_liveness_probe_keeps_its_timing_and_its_named_port() -> None:
    container = planned_container(
        {
            "name": "c",
            "image": "i",
            "ports": [{"name": "ctld", "containerPort": 6817}],
            "startupProbe": {"tcpSocket": {"port": "ctld"}, "periodSeconds": 2},
            "livenessProbe": {
                "tcpSocket": {"port": "ctld"},
                "periodSeconds": 30,
                "timeoutSeconds": 10,
                "failureThreshold": 4,
                "initialDelaySeconds": 15,
            },
        }
    )
    assert container.liveness == Probe(
        port=6817, period=30, failures=4, timeout=10, initial_delay=15
    )
    assert container.startup == Probe(port=6817, period=2)


@pytest.mark.parametrize("kind", ["httpGet", "grpc"])
def test_probes_the_sandbox_cannot_run_are_refused_by_name(kind: str) -> None:
    with pytest.raises(ValueError, match=f"runs exec and tcpSocket probes, not {kind}"):
        planned_container({"name": "c", "image": "i", "livenessProbe": {kind: {"port": 80}}})


def test_a_liveness_change_changes_the_fingerprint_and_old_pods_keep_theirs() -> None:
    plain = Pod("p-0", "10.0.0.2", "login", 0, False, (Container("c", "i", "main"),))
    probed = replace(
        plain, containers=(replace(plain.containers[0], liveness=Probe(command=("true",))),)
    )
    slower = replace(
        probed,
        containers=(replace(probed.containers[0], liveness=Probe(command=("true",), period=30)),),
    )
    assert len({fingerprint(plain, []), fingerprint(probed, []), fingerprint(slower, [])}) == 3
    # A pod the sandbox started before it counted probes (the same fingerprint, less them)
    # is kept by the next `up`, not restarted once.
    assert fingerprint(plain, []) == fingerprint(plain, [], before_liveness=True)
    assert fingerprint(probed, [], before_liveness=True) == fingerprint(plain, [])


# -- what the apply hands the prober ------------------------------------------------------------


def probed_pod(name: str, *, job: bool = False) -> Pod:
    check = Probe(command=("true",), period=1)
    return Pod(
        name,
        "10.0.0.2",
        "login",
        0,
        job,
        (
            Container("munge", "i", "sidecar", liveness=check, startup=Probe(command=("s",))),
            Container("wait", "i", "init", liveness=check),
            Container("app", "i", "main", user=7, group=8, liveness=check, pre_stop=("stop",)),
            Container("plain", "i", "main"),
        ),
        grace_seconds=12,
    )


def test_targets_are_the_probed_containers_of_long_running_pods() -> None:
    targets = targets_of(probed_pod("p-0"), {"p-0--app": "abc"})
    assert [(t.name, t.container_id) for t in targets] == [("p-0--munge", ""), ("p-0--app", "abc")]
    app = targets[1]
    assert (app.user, app.group, app.grace, app.pre_stop, app.ip) == (
        7,
        8,
        12,
        ("stop",),
        "10.0.0.2",
    )
    assert targets[0].startup == Probe(command=("s",))
    assert targets_of(probed_pod("j", job=True), {}) == []


def test_the_targets_file_follows_pods_as_they_come_and_go(tmp_path: Path) -> None:
    state = SandboxState(tmp_path)
    update_targets(state, remove_pods={"p-0"})
    assert not state.liveness_targets_file.exists()  # removing alone writes nothing
    update_targets(state, add=targets_of(probed_pod("p-0"), {}))
    update_targets(state, add=targets_of(probed_pod("q-0"), {}))
    loaded = load_targets(state.liveness_targets_file)
    assert loaded is not None and set(loaded) == {
        "p-0--munge", "p-0--app", "q-0--munge", "q-0--app"
    }  # fmt: skip
    assert loaded["p-0--app"] == targets_of(probed_pod("p-0"), {})[1]  # round trip
    update_targets(state, remove_pods={"p-0"})
    assert set(load_targets(state.liveness_targets_file) or {}) == {"q-0--munge", "q-0--app"}
    update_targets(state, keep_pods={"r-0"})
    assert load_targets(state.liveness_targets_file) == {}


# -- one probe ----------------------------------------------------------------------------------


def test_a_tcp_probe_passes_on_a_listener_and_fails_as_the_kubelet_words_it() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert tcp_probe("127.0.0.1", port, timeout=1).passed
    refused = tcp_probe("127.0.0.1", port, timeout=1)
    assert not refused.passed
    assert refused.output == f"dial tcp 127.0.0.1:{port}: connect: connection refused"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="nsenter into a process needs root")


@needs_root
def test_an_exec_probe_reports_its_output_and_its_timeout() -> None:
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        probes = NsenterExec(lambda name: sleeper.pid)
        assert probes.probe("c", ["true"], user=None, group=None, timeout=5).passed
        failed = probes.probe(
            "c", ["sh", "-c", "echo broken; exit 1"], user=None, group=None, timeout=5
        )
        assert (failed.passed, failed.output, failed.timed_out) == (False, "broken", False)
        began = time.monotonic()
        slow = probes.probe("c", ["sleep", "5"], user=None, group=None, timeout=0.5)
        assert time.monotonic() - began < 3
        assert (slow.passed, slow.output, slow.timed_out) == (
            False,
            'command "sleep 5" timed out',
            True,
        )
    finally:
        sleeper.kill()
        sleeper.wait()


# -- the prober on real containers --------------------------------------------------------------

SANDBOX = "lvtest"
SUBNET = "10.89.251.0/24"
FAST = {"period": 1, "timeout": 1, "failures": 2}
# A main process that notes its start, and notes SIGTERM before it exits.
TRAPPING = (
    "echo start >>/v/starts; trap 'echo term >>/v/terms; exit 0' TERM; "
    "while :; do sleep 60 & wait $!; done"
)


@dataclass
class Running:
    """The test's sandbox: its state, the pods' volume directories, and podman."""

    state: SandboxState
    applier: Applier
    volumes: dict[str, Path]

    def restarts(self, pod: str) -> int:
        out = self.applier.podman.run(
            ["inspect", "--format", "{{.RestartCount}} {{.State.Status}}", f"{pod}--app"]
        ).stdout.split()
        return int(out[0]) if out[1] == "running" else -1

    def events(self, pod: str) -> list[str]:
        path = self.state.liveness_events_file
        lines = path.read_text().splitlines() if path.exists() else []
        return [line for line in lines if f" pod/{pod} " in line]


def wait_until(what: str, check: Callable[[], object], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def make_pod(state: SandboxState, name: str, ip: str, script: str, **probes: Any) -> Pod:
    volume = state.root / "volumes" / name
    container = Container(
        "app", IMAGE, "main", command=("sh", "-c", script), mounts=(Mount(str(volume), "/v"),),
        **probes,
    )  # fmt: skip
    return Pod(name, ip, "liveness-test", 0, False, (container,), volume_dirs=(str(volume),),
               grace_seconds=2)  # fmt: skip


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """Pods whose probes pass, fail, time out or wait on a startup probe, started by the
    apply after the prober, which must take them from the targets file."""
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        pytest.skip(f"{IMAGE} is not built here (images/build.sh)")
    state = SandboxState(tmp_path_factory.mktemp("liveness"))
    applier = Applier(SANDBOX, state, Podman(), lambda message: None)
    applier.down(graceful=False)  # a run that was killed may have left its pods
    sick = Probe(command=("sh", "-c", "test ! -e /v/sick"), **FAST)
    counted = Probe(command=("sh", "-c", "echo >>/v/probed"), **FAST)
    pods = (
        # Sick once: its next start is healthy again.
        make_pod(state, "lv-sick-0", "10.89.251.10", "rm -f /v/sick; " + TRAPPING, liveness=sick,
                 pre_stop=("sh", "-c", "echo prestop >>/v/terms")),
        make_pod(state, "lv-healthy-0", "10.89.251.11", TRAPPING, liveness=counted),
        make_pod(state, "lv-tcp-0", "10.89.251.12", "exec sleep infinity",
                 liveness=Probe(port=7777, **FAST)),
        make_pod(state, "lv-frozen-0", "10.89.251.13", TRAPPING,
                 liveness=Probe(command=("true",), **FAST)),
        make_pod(state, "lv-gated-0", "10.89.251.14", TRAPPING,
                 liveness=Probe(command=("false",), **FAST),
                 startup=Probe(command=("test", "-e", "/v/started"), period=1, failures=1000)),
    )  # fmt: skip
    assert start_prober(state) and not start_prober(state)  # one prober per sandbox
    try:
        applier.apply(Plan(SUBNET, pods, {}))
        yield Running(state, applier, {pod.name: Path(pod.volume_dirs[0]) for pod in pods})
    finally:
        stop_prober(state)
        applier.down(graceful=False)


def test_the_prober_runs_in_the_background_and_follows_the_apply(running: Running) -> None:
    pid = prober_pid(running.state)
    assert pid is not None and os.getsid(pid) == pid  # a session of its own: outlives `up`
    targets = load_targets(running.state.liveness_targets_file) or {}
    assert sorted(targets) == [
        f"{pod}--app"
        for pod in ("lv-frozen-0", "lv-gated-0", "lv-healthy-0", "lv-sick-0", "lv-tcp-0")
    ]
    assert all(len(t.container_id) == 64 for t in targets.values())  # no podman call needed


def test_a_failing_exec_probe_kills_the_container_after_its_prestop_hook(
    running: Running,
) -> None:
    volume = running.volumes["lv-sick-0"]
    wait_until("the container to start", lambda: (volume / "starts").exists())
    (volume / "sick").touch()
    wait_until("a restart", lambda: (volume / "starts").read_text().count("start") == 2)
    # The hook, then SIGTERM (the trap), as the kubelet kills it; podman restarted it in place.
    assert (volume / "terms").read_text().splitlines() == ["prestop", "term"]
    assert running.restarts("lv-sick-0") == 1
    events = running.events("lv-sick-0")
    killed = next(i for i, e in enumerate(events) if " Normal Killing " in e)
    assert events[killed].endswith("app: Container app failed liveness probe, will be restarted")
    assert [e.split(" ", 1)[1] for e in events[:killed]] == [
        "Warning Unhealthy pod/lv-sick-0 app: Liveness probe failed: "
    ] * 2  # failureThreshold failures in a row


def test_a_failing_tcp_probe_kills_a_process_deaf_to_sigterm_with_sigkill(running: Running) -> None:
    # `sleep` as the container's PID 1 ignores SIGTERM: SIGKILL once the grace period is over.
    wait_until("a restart", lambda: running.restarts("lv-tcp-0") >= 1)
    events = running.events("lv-tcp-0")
    assert any(
        e.endswith("Liveness probe failed: dial tcp 10.89.251.12:7777: connect: connection refused")
        for e in events
    ), events
    running.applier.remove_pod("lv-tcp-0", grace=0)  # no more restarts
    assert "lv-tcp-0--app" not in (load_targets(running.state.liveness_targets_file) or {})


def test_a_paused_containers_probe_times_out_and_it_is_killed(running: Running) -> None:
    volume = running.volumes["lv-frozen-0"]
    wait_until("the container to start", lambda: (volume / "starts").exists())
    running.applier.podman.run(["pause", "lv-frozen-0--app"])
    wait_until("a restart", lambda: running.restarts("lv-frozen-0") == 1, timeout=40)
    events = running.events("lv-frozen-0")
    assert any(e.endswith('Liveness probe failed: command "true" timed out') for e in events)
    # Frozen, it could not run its SIGTERM trap: SIGKILL ended it after the grace period.
    assert not (volume / "terms").exists()
    assert (volume / "starts").read_text().count("start") == 2


def test_liveness_waits_for_the_startup_probe(running: Running) -> None:
    volume = running.volumes["lv-gated-0"]
    events = running.events("lv-gated-0")
    assert any("Startup probe failed" in e for e in events), events
    assert not any("Liveness probe" in e for e in events)
    assert running.restarts("lv-gated-0") == 0
    (volume / "started").touch()
    wait_until("a restart", lambda: running.restarts("lv-gated-0") >= 1)
    assert any("failed liveness probe" in e for e in running.events("lv-gated-0"))


def test_a_passing_probe_leaves_its_container_alone(running: Running) -> None:
    probed = running.volumes["lv-healthy-0"] / "probed"
    wait_until("three probes", lambda: probed.exists() and len(probed.read_text()) >= 3)
    assert running.restarts("lv-healthy-0") == 0
    assert running.events("lv-healthy-0") == []


def test_down_stops_the_prober(running: Running) -> None:
    pid = prober_pid(running.state)
    assert pid is not None
    stop_prober(running.state)
    assert prober_pid(running.state) is None
    assert not Path(f"/proc/{pid}").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not running.state.liveness_targets_file.exists()
