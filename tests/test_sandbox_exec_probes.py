"""Commands through nsenter (slurm_stack/sandbox/exec_probes.py): exec probes and the quick
exec, on real processes; and what the sandbox asks podman for, and what it takes from
elsewhere (PID files, the images asked for while an `up` renders)."""

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_stack.sandbox.apply import Applier
from slurm_stack.sandbox.exec_probes import NsenterExec, container_environment, nsenter_command
from slurm_stack.sandbox.plan import Container, Plan, Pod
from slurm_stack.sandbox.podman import Podman, pid_of_container
from slurm_stack.sandbox.state import SandboxState
from slurm_stack.spec.models import IMAGE_REVISION

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
    probes = NsenterExec(lambda name: process.pid)
    assert probes.passes("c", ["sh", "-c", 'test "$PROBE_MARK" = from-the-container'])
    assert not probes.passes("c", ["sh", "-c", 'test -n "$PYTEST_CURRENT_TEST"'])


def test_the_exit_status_decides_and_the_user_is_the_containers(
    process: subprocess.Popen[bytes],
) -> None:
    probes = NsenterExec(lambda name: process.pid)
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

    probes = NsenterExec(main_pid)
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
    assert not NsenterExec(lambda name: None).passes("c", ["true"])


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


def _sleeper(**ids: object) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(["sleep", "300"], **ids)  # type: ignore[call-overload]
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/status").read_text().count("\nUid:\t0\t") and ids:
        assert time.monotonic() < deadline, "the stand-in process did not change its user"
        time.sleep(0.01)
    return child


@pytest.mark.parametrize(
    ("ids", "quick"),
    [
        ({"user": 65534, "group": 65534, "extra_groups": []}, True),
        ({"user": 65534, "group": 65534, "extra_groups": [65534, 100]}, False),
        ({}, False),  # root: podman exec gives the container's capabilities, nsenter would not
    ],
)
def test_a_quick_exec_runs_only_as_an_unprivileged_main_user(ids: dict, quick: bool) -> None:  # type: ignore[type-arg]
    child = _sleeper(**ids)
    try:
        result = NsenterExec(lambda name: child.pid).run_as_main_user(
            "c", ["sh", "-c", "id -u; id -G; grep CapEff /proc/self/status; exit 3"], timeout=10
        )
        if not quick:
            assert result is None
            return
        assert result is not None and result.returncode == 3
        user, groups, capabilities = result.stdout.splitlines()
        assert (user, groups) == ("65534", "65534")
        assert capabilities.split() == ["CapEff:", "0000000000000000"]
    finally:
        child.kill()
        child.wait()


def test_a_quick_exec_of_a_container_that_does_not_run_is_left_to_podman() -> None:
    assert NsenterExec(lambda name: None).run_as_main_user("c", ["true"], timeout=5) is None


def test_a_pid_file_counts_only_while_its_process_is_in_the_container(
    tmp_path: Path, process: subprocess.Popen[bytes]
) -> None:
    """The sandbox reads a container's main PID from the file podman wrote at its start, and
    trusts it only while that process runs in the container's cgroup (`libpod-<id>`): a PID
    of another process, or of none, sends it back to asking podman."""
    pid_file = tmp_path / "pid"
    assert pid_of_container(pid_file, "0" * 64) is None  # no file yet
    pid_file.write_text("not a pid\n")
    assert pid_of_container(pid_file, "0" * 64) is None
    pid_file.write_text(f"{process.pid}\n")
    assert pid_of_container(pid_file, "0" * 64) is None  # runs, but in no such container
    assert pid_of_container(pid_file, "") is None


def test_the_pid_file_of_a_running_container_names_its_main_process(tmp_path: Path) -> None:
    image = f"localhost/slurm-stack/base:26.05-{IMAGE_REVISION}"  # images/build.sh's first
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        pytest.skip(f"{image} is not built here (images/build.sh)")
    pid_file = tmp_path / "pid"
    started = subprocess.run(
        ["podman", "run", "--detach", "--rm", "--pidfile", str(pid_file),
         "--entrypoint", "sleep", image, "60"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    container = started.stdout.strip()
    try:
        pid = pid_of_container(pid_file, container)
        assert pid is not None and Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x0060\x00"
        assert pid_of_container(pid_file, "0" * 64) is None
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "0", container], capture_output=True)
    assert pid_of_container(pid_file, container) is None  # gone with its container


class CountingPodman(Podman):
    """The real podman, each call counted."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def run(self, args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(list(args))
        return super().run(args, **kwargs)


def test_a_tracked_container_is_seen_running_without_asking_podman(tmp_path: Path) -> None:
    """The stand-in API and Prometheus are started with a PID file: an `up` sees them running
    from /proc alone; once their process is gone, podman is asked."""
    image = f"localhost/slurm-stack/base:26.05-{IMAGE_REVISION}"
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        pytest.skip(f"{image} is not built here (images/build.sh)")
    podman, pid_file, name = CountingPodman(), tmp_path / "pids" / "tracked", "tracked-sleeper"
    subprocess.run(["podman", "rm", "--force", "--time", "0", name], capture_output=True)
    try:
        podman.run_tracked(["--name", name, "--entrypoint", "sleep", image, "60"], pid_file)
        podman.calls.clear()
        assert podman.runs(name, pid_file) and podman.calls == []
        pid_file.write_text(f"{os.getpid()}\n")  # a process, but not the container's
        assert podman.runs(name, pid_file) and podman.calls[0][:2] == ["container", "inspect"]
        subprocess.run(["podman", "stop", "--time", "0", name], capture_output=True, check=True)
        assert not podman.runs(name, pid_file)
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "0", name], capture_output=True)


def test_an_up_asks_for_its_images_while_it_renders_and_only_once(tmp_path: Path) -> None:
    """`up` starts asking podman for the IDs of the last apply's images before it renders;
    the apply takes that answer when its plan has the same images, and asks anew otherwise."""
    image = f"localhost/slurm-stack/base:26.05-{IMAGE_REVISION}"
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        pytest.skip(f"{image} is not built here (images/build.sh)")
    state, podman = SandboxState(tmp_path), CountingPodman()
    applier = Applier("prefetch", state, podman, lambda message: None)
    pod = Pod("p-0", "10.0.0.2", "login", 0, False, (Container("c", image, "main"),))
    plan = Plan("10.0.0.0/24", (pod,), {})

    applier._cache_image_ids(plan)  # no prefetch: asked, and the images recorded
    [asked] = podman.calls
    assert asked[:2] == ["image", "inspect"] and state.load_plan_images() == [image]
    image_id = applier._image_ids(pod)
    assert len(image_id) == 1 and len(image_id[0]) == 64

    podman.calls.clear()
    applier.prefetch_image_ids(state.load_plan_images())
    applier._image_id_cache.clear()
    applier._cache_image_ids(plan)
    assert len(podman.calls) == 1 and applier._image_ids(pod) == image_id  # the prefetch's

    podman.calls.clear()
    applier.prefetch_image_ids(["localhost/slurm-stack/none:0"])  # another plan's images
    applier._image_id_cache.clear()
    applier._cache_image_ids(plan)
    assert len(podman.calls) == 2 and applier._image_ids(pod) == image_id  # asked anew
