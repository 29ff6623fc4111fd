"""Shared fixtures: the stack programs run once per session under the mock engine."""

import os
import random
import sys
import time
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

from slurm_stack.offline import ProgramRun
from slurm_stack.offline.render import run_stack

ROOT = Path(__file__).resolve().parent.parent
DEV_STACK = ROOT / "Pulumi.dev.yaml"
PROD_STACK = ROOT / "examples" / "production" / "Pulumi.prod.yaml"


@pytest.fixture(scope="session")
def dev_run() -> ProgramRun:
    """`__main__.py` with Pulumi.dev.yaml."""
    return run_stack(DEV_STACK)


@pytest.fixture(scope="session")
def prod_run() -> ProgramRun:
    """`__main__.py` with the production example stack file."""
    return run_stack(PROD_STACK)


def _say(config: pytest.Config, message: str) -> None:
    """A line on the terminal as it happens, past pytest's output capture (on stderr: an
    xdist worker's stdout is its channel to the controller, its stderr the terminal's)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[real Slurm] {message}", file=sys.stderr, flush=True)


# The tier's fixtures that take no time: not reported.
QUICK = ("slurm_version",)


class _FixtureTimes:
    """The real-Slurm tier's module and session fixtures (the test stacks' boots among them,
    each named after its stack) as they start, are ready and are torn down, with the time
    each took. A plugin of its own: a conftest's hook would not see session fixtures, which
    belong to the root."""

    def __init__(self) -> None:
        self._teardown_started: dict[object, float] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def,type-arg]
        real_slurm = fixturedef.baseid.startswith("tests/cluster")
        if fixturedef.scope == "function" or not real_slurm or fixturedef.argname in QUICK:
            yield
            return
        _say(request.config, f"fixture {fixturedef.argname}: setting up")
        started = time.monotonic()
        yield
        took = time.monotonic() - started
        _say(request.config, f"fixture {fixturedef.argname}: ready in {took:.0f}s")

        # Finalizers run last-in first-out: this one marks when the fixture's teardown starts.
        def mark_teardown() -> None:
            self._teardown_started[fixturedef] = time.monotonic()

        fixturedef.addfinalizer(mark_teardown)

    @pytest.hookimpl
    def pytest_fixture_post_finalizer(
        self,
        fixturedef: pytest.FixtureDef,  # type: ignore[type-arg]
        request: pytest.FixtureRequest,
    ) -> None:
        started = self._teardown_started.pop(fixturedef, None)
        if started is not None:
            took = time.monotonic() - started
            _say(request.config, f"fixture {fixturedef.argname}: torn down in {took:.0f}s")


REAL_SLURM_TIER = "tests/cluster/"
# The real-Slurm tier in three shares, each run in order by one worker while the others run
# theirs, each beside its share of the other tests; they take about as long (the tier mostly
# waits on Slurm). Two stacks that run at once need sandbox subnets of their own
# (tests/test_suite_scheduling.py checks the names). Files whose stacks are module fixtures
# of their own (no session fixture: not the itest `cluster`, not the registries):
BESIDE_THE_TIER = (
    "test_controller_ha.py",
    "test_directory.py",
    "test_elastic.py",
    "test_external_database.py",
    "test_updates.py",
    "test_upgrade.py",
)
# The version matrix (tests/cluster/conftest.py): files whose tests also run at Slurm 24.11.
# A file's two versions boot the same stack names, so one worker runs both, one after the
# other.
VERSION_MATRIX_SHARE = (
    "test_auth_slurm.py",
    "test_drain.py",
    "test_site_scripts.py",
)


class RealSlurmTierTogether(LoadScopeScheduling):
    """xdist's scheduling for scripts/test.sh (`-n 3`): the real-Slurm tier in three shares
    (`main`, `beside`, `version-matrix`), each run in order by one worker (its stacks being
    module and session fixtures booted one at a time), the other tests shared file by file: a
    file's module fixtures (a podman network of a fixed name, a plugin built in the tree)
    exist once. (xdist's own `xdist_group` marks do not group on pytest 9.2, whose node IDs
    no longer read the suffix xdist adds.)"""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        if nodeid.startswith(REAL_SLURM_TIER):
            name = path.removeprefix(REAL_SLURM_TIER)
            if name in VERSION_MATRIX_SHARE:
                return f"{REAL_SLURM_TIER}version-matrix"
            return f"{REAL_SLURM_TIER}{'beside' if name in BESIDE_THE_TIER else 'main'}"
        return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> RealSlurmTierTogether:
    return RealSlurmTierTogether(config, log)


_IN_XDIST_WORKER = False


# The real-Slurm tier runs its modules in a random order (tests/cluster/conftest.py), from
# this seed: drawn once per run unless given.
ORDER_SEED_VARIABLE = "SLURM_STACK_TEST_ORDER_SEED"


def pytest_configure(config: pytest.Config) -> None:
    global _IN_XDIST_WORKER
    _IN_XDIST_WORKER = hasattr(config, "workerinput")
    config.pluginmanager.register(_FixtureTimes(), "slurm-stack-fixture-times")
    # Drawn where the run starts: xdist's workers inherit it, so each collects the same order.
    if not _IN_XDIST_WORKER and not os.environ.get(ORDER_SEED_VARIABLE):
        os.environ[ORDER_SEED_VARIABLE] = str(random.randrange(10_000))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The seed, said once (by xdist's controller) and also under `-q`, which hides the
    report header."""
    if not _IN_XDIST_WORKER:
        seed = os.environ.get(ORDER_SEED_VARIABLE)
        _say(session.config, f"modules in a random order: {ORDER_SEED_VARIABLE}={seed} repeats it")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each real-Slurm test's name, outcome and time as it ends (they take minutes in all);
    under xdist, said once, by the controller, which receives every worker's reports."""
    if _IN_XDIST_WORKER:
        return
    if report.when == "call" and "cluster" in report.keywords:
        print(
            f"\n[real Slurm] {report.nodeid}: {report.outcome} in {report.duration:.0f}s",
            file=sys.__stderr__,
            flush=True,
        )
