"""Exec probes through nsenter (slurm_stack/sandbox/exec_probes.py), on real processes."""

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_stack.sandbox.exec_probes import ExecProbes, container_environment, nsenter_command

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="nsenter into a process needs root")


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for a container's main process, with an environment of its own."""
    child = subprocess.Popen(
        ["sleep", "300"], env={"PATH": "/usr/bin:/bin", "PROBE_MARK": "from-the-container"}
    )
    # Until the child has exec'd sleep, /proc shows the forked test process's environment.
    cmdline = Path(f"/proc/{child.pid}/cmdline")
    deadline = time.monotonic() + 10
    while not cmdline.read_bytes().startswith(b"sleep\0"):
        assert time.monotonic() < deadline, "the stand-in process did not start"
        time.sleep(0.01)
    yield child
    child.kill()
    child.wait()


def test_the_probe_gets_the_containers_environment(process: subprocess.Popen[bytes]) -> None:
    assert container_environment(process.pid)[b"PROBE_MARK"] == b"from-the-container"
    probes = ExecProbes(lambda name: process.pid)
    assert probes.passes("c", ["sh", "-c", 'test "$PROBE_MARK" = from-the-container'])
    assert not probes.passes("c", ["sh", "-c", 'test -n "$PYTEST_CURRENT_TEST"'])


def test_the_exit_status_decides_and_the_user_is_the_containers(
    process: subprocess.Popen[bytes],
) -> None:
    probes = ExecProbes(lambda name: process.pid)
    assert probes.passes("c", ["true"])
    assert not probes.passes("c", ["false"])
    assert not probes.passes("c", ["no-such-command"])
    assert probes.passes(
        "c", ["sh", "-c", "test $(id -u):$(id -g) = 65534:65534"], user=65534, group=65534
    )
    assert not probes.passes("c", ["sh", "-c", "test $(id -u) = 0"], user=65534, group=65534)


def test_a_restarted_container_is_asked_for_its_new_process() -> None:
    first = subprocess.Popen(["sleep", "300"])
    second = subprocess.Popen(["sleep", "300"])
    asked: list[str] = []
    current = [first]

    def main_pid(name: str) -> int | None:
        asked.append(name)
        return current[0].pid

    probes = ExecProbes(main_pid)
    try:
        assert probes.passes("c", ["true"]) and probes.passes("c", ["true"])
        assert asked == ["c"]  # one question while the process lives
        first.kill()
        first.wait()
        current[0] = second
        assert probes.passes("c", ["true"])
        assert asked == ["c", "c"]
    finally:
        second.kill()
        second.wait()


def test_a_container_that_does_not_run_fails_its_probe() -> None:
    assert not ExecProbes(lambda name: None).passes("c", ["true"])


def test_the_command_enters_every_namespace_with_root_and_working_directory() -> None:
    argv = nsenter_command(42, ["probe", "--x"], user=999, group=998)
    assert argv[1:] == [
        "--target=42",
        "--mount",
        "--uts",
        "--ipc",
        "--net",
        "--pid",
        "--cgroup",
        "--root",
        "--wd",
        "--setgid=998",
        "--setuid=999",
        "--",
        "probe",
        "--x",
    ]
