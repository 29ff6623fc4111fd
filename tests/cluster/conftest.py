"""The real-Slurm tier: `tests/cluster/Pulumi.itest.yaml` booted once in the podman sandbox.

Every test here talks to real daemons (slurmctld, slurmd, slurmdbd, MariaDB, munged, sshd) built
from `images/` and started from the rendered manifests. They need root and podman, which
`scripts/test.sh` sets up; elsewhere they skip with the reason.
"""

import contextlib
import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from slurm_stack.sandbox.session import Sandbox
from tests.cluster.registry import running_registries
from tests.conftest import ORDER_SEED_VARIABLE

HERE = Path(__file__).resolve().parent
STACK = HERE / "Pulumi.itest.yaml"
SANDBOX_STATE = Path("/var/lib/slurm-stack/test-sandbox")
T = TypeVar("T")


VERSION_VARIABLE = "SLURM_STACK_TEST_SLURM_VERSION"
# The suite's version matrix: a module whose stack fixture takes `slurm_version` runs at the
# default major, and its tests marked `both_majors` run again at the other one, on a stack of
# that version (unless VERSION_VARIABLE names one version for everything).
DEFAULT_MAJOR, OTHER_MAJOR = "26.05", "24.11"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "slurm_version" in metafunc.fixturenames and not os.environ.get(VERSION_VARIABLE):
        metafunc.parametrize(
            "slurm_version", [DEFAULT_MAJOR, OTHER_MAJOR], indirect=True, scope="module"
        )


@pytest.fixture(scope="module")
def slurm_version(request: pytest.FixtureRequest) -> str | None:
    """The Slurm major a module's stack boots at: the matrix's parameter, else
    VERSION_VARIABLE's (None: the stack file's own)."""
    return getattr(request, "param", None) or os.environ.get(VERSION_VARIABLE)


def at_other_major(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("slurm_version") == OTHER_MAJOR


# Modules about a stack as it is first booted: first on it, whatever the order.
FRESH_STACK_MODULES = ("test_boot.py",)


def in_random_module_order(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """The tier's modules shuffled (each module's tests in their own order), so that a test
    that passes only after another module's tests fails some day, but FRESH_STACK_MODULES
    first; the rest as they were."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(Path(str(item.fspath)), []).append(item)
    tier = [path for path in modules if HERE in path.parents]
    order = random.Random(seed).sample(tier, len(tier))
    order.sort(key=lambda path: path.name not in FRESH_STACK_MODULES)  # stable: stays shuffled
    shuffled = iter(order)
    order = [next(shuffled) if HERE in path.parents else path for path in modules]
    return [item for path in order for item in modules[path]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tier's tests `cluster`, in a random module order; drop the matrix's
    other-major runs of the tests whose behaviour does not depend on the version (not
    marked `both_majors`)."""
    kept, dropped = [], []
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)
        if at_other_major(item) and item.get_closest_marker("both_majors") is None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = in_random_module_order(kept, int(os.environ.get(ORDER_SEED_VARIABLE, "0")))


def wait_for(what: str, probe: Callable[[], T], timeout: float = 60, every: float = 0.5) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")
        time.sleep(every)
        last = probe()
    return last


class Cluster:
    """The running sandbox, with the shell helpers the tests use."""

    def __init__(self, sandbox: Sandbox, stack_file: Path) -> None:
        self.sandbox = sandbox
        self.stack_file = stack_file
        self.name = sandbox.name
        self.controller = sandbox.pod_of("controller")
        self.jail = sandbox.state.root / "claims" / f"{self.name}-jail"

    def ctl(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A shell command in the controller container (Slurm admin tools as SlurmUser)."""
        return self.sandbox.exec_quick(self.controller, ["sh", "-c", command], timeout=timeout)

    def node(self, node: str, command: str) -> subprocess.CompletedProcess[str]:
        """A shell command in a worker's slurmd container (the pod, outside the jail)."""
        return self.sandbox.exec(node, ["sh", "-c", command])

    def login(self, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A shell command over ssh on the login node, as the sandbox user."""
        return self.sandbox.ssh(command, timeout=timeout)

    def login_as(
        self, user: str, key: Path, command: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """A shell command over ssh on the login node, as ``user`` with private key ``key``."""
        argv = self.sandbox.ssh_command(user, identity=key)
        return subprocess.run([*argv, command], capture_output=True, text=True, timeout=timeout)

    def ok_as(self, user: str, key: Path, command: str) -> str:
        """The output of a shell command that must succeed, run over ssh as ``user``."""
        return self.ok(self.login_as(user, key, command))

    def edit_stack(self, change: Callable[[dict], None]) -> None:  # type: ignore[type-arg]
        """Change the stack file's cluster definition in place, as a user edits stack config."""
        document = yaml.safe_load(self.stack_file.read_text())
        change(document["config"]["slurm-stack:cluster"])
        self.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))

    def ok(self, result: subprocess.CompletedProcess[str]) -> str:
        assert result.returncode == 0, f"exit {result.returncode}: {result.stdout}{result.stderr}"
        return result.stdout

    def node_states(self) -> dict[str, str]:
        out = self.ok(self.ctl("sinfo -N -h -o '%N %t'"))
        return dict(line.split() for line in out.splitlines() if line.strip())

    def node_field(self, node: str, field: str) -> str:
        out = self.ok(self.ctl(f"scontrol show node {node}"))
        for token in out.replace("\n", " ").split(" "):
            if token.startswith(f"{field}="):
                return token.split("=", 1)[1]
        return ""

    def node_reason(self, node: str) -> str:
        out = self.ok(self.ctl(f"sinfo -h -n {node} -o '%E'"))
        return out.strip()

    def job_state(self, job_id: str) -> str:
        out = self.ctl(f"scontrol show job {job_id} -o").stdout
        for token in out.split():
            if token.startswith("JobState="):
                return token.split("=", 1)[1]
        return ""

    def wait_job(self, job_id: str, timeout: float = 120) -> str:
        """Poll until the job has finished; return its final state."""
        done = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
        return wait_for(
            f"job {job_id} to finish",
            lambda: (state := self.job_state(job_id)) in done and state,
            timeout,
        )

    def daemons(self) -> dict[str, tuple[str, int]]:
        """Every running container of the sandbox's pods: its start time and restart count
        (Kubernetes' restartCount: the sandbox restarts an exited container in place)."""
        listed = self.sandbox.podman.run(["ps", "--format", "{{.Names}}"], check=False)
        pods = {pod.name for pod in self.sandbox.current_plan.pods}
        # Containers are named `<pod>--<container>` (a pod's infra container is not).
        names = [n for n in self.ok(listed).split() if n.split("--")[0] in pods and "--" in n]
        started = {}
        for name in names:
            out = self.sandbox.podman.run(
                ["inspect", "-f", "{{.State.StartedAt}}|{{.RestartCount}}", name], check=False
            ).stdout.strip()
            if "|" in out:
                when, count = out.rsplit("|", 1)
                started[name] = (when, int(count))
        return started

    @contextlib.contextmanager
    def frozen(self, pod: str) -> Iterator[None]:
        """Every process of ``pod``'s main container stopped (the cgroup freezer, as `podman
        pause` uses it) while the block runs, then continued: a frozen node or a hung
        storage mount, as a real cluster saw them. The pod's address still takes
        connections; nothing answers them."""
        container = self.sandbox.node_container(pod)
        self.sandbox.podman.run(["pause", container])
        try:
            yield
        finally:
            # Not an error when already running: the sandbox's liveness prober, as the
            # kubelet, may have killed and restarted the frozen container meanwhile.
            self.sandbox.podman.run(["unpause", container], check=False)

    def all_idle(self, expected: int) -> bool:
        states = self.node_states()
        return len(states) == expected and all(s == "idle" for s in states.values())


def boot_stack(
    document: dict,  # type: ignore[type-arg]
    directory: Path,
    expected_nodes: int,
    before_up: Callable[[Sandbox], object] | None = None,
    settled: Callable[["Cluster"], bool] | None = None,
    version: str | None = None,
) -> Cluster:
    """Write ``document`` as a stack file in ``directory`` and boot it in a fresh sandbox
    (at Slurm ``version``, else VERSION_VARIABLE's when set, else the document's); wait for
    its nodes (``settled``, else all ``expected_nodes`` idle). ``before_up`` runs once the old
    sandbox is gone, before the first `up`."""
    if os.geteuid() != 0:
        pytest.skip("the real-Slurm tests run podman as root")
    if shutil.which("podman") is None and os.environ.get("CI") != "true":
        pytest.skip("podman is not installed: run `bash scripts/setup-podman.sh` first")
    cluster_config = document["config"]["slurm-stack:cluster"]
    version = version or os.environ.get(VERSION_VARIABLE)
    if version:
        cluster_config["slurmVersion"] = version
        if version == "24.11":  # slurmctld serves no metrics before 25.11: the exporter alone
            cluster_config.get("controller", {}).pop("metrics", None)
            # Dynamic nodes join a switch as they register from 25.05 (the spec refuses it).
            cluster_config.pop("topology", None)
            for pool in cluster_config.get("workerPools", []):
                pool.pop("switch", None)
                pool.pop("switchLabel", None)
    stack_file = directory / f"Pulumi.{cluster_config['name']}.yaml"
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    sandbox = Sandbox(stack_file, state_base=SANDBOX_STATE)
    sandbox.down(delete_data=True)  # a run that was killed may have left one behind
    sandbox = Sandbox(stack_file, state_base=SANDBOX_STATE)
    if before_up is not None:
        before_up(sandbox)
    sandbox.up()
    cluster = Cluster(sandbox, stack_file)
    if settled is not None:
        wait_for("the workers settled", lambda: settled(cluster), timeout=120)
    else:
        wait_for("every worker idle", lambda: cluster.all_idle(expected_nodes), timeout=120)
    return cluster


def tear_down(cluster: Cluster) -> None:
    """Remove a test stack's sandbox and its data, unless KEEP_SANDBOX=1."""
    if os.environ.get("KEEP_SANDBOX") != "1":
        cluster.sandbox.down(delete_data=True)


def running_stack(
    stack_file: Path,
    factory: pytest.TempPathFactory,
    expected_nodes: int,
    version: str | None = None,
) -> Iterator[Cluster]:
    """A fixture's body: ``stack_file`` booted as it is (at ``version`` if given), then torn
    down with its data."""
    document = yaml.safe_load(stack_file.read_text())
    cluster = boot_stack(
        document,
        factory.mktemp(stack_file.stem.removeprefix("Pulumi.")),
        expected_nodes,
        version=version,
    )
    yield cluster
    tear_down(cluster)


@pytest.fixture(scope="session")
def image_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The container tests' registries on the host (tests/cluster/registry.py)."""
    with running_registries(tmp_path_factory.mktemp("registry")):
        yield


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The itest stack running in the sandbox; torn down with its data at the end."""
    yield from running_stack(STACK, tmp_path_factory, 4)


@pytest.fixture(scope="module")
def itest_stack_restored(cluster: Cluster) -> Iterator[None]:
    """For a module that edits the shared itest stack: at its end the stack file is as the
    module found it again, applied, and every node idle, so the modules after it (in any
    order) meet the stack they were written for."""
    found = cluster.stack_file.read_text()
    yield
    if cluster.stack_file.read_text() != found:
        cluster.stack_file.write_text(found)
        cluster.sandbox.up(build=False)
    wait_for("every itest node idle", lambda: cluster.all_idle(4), timeout=180)
