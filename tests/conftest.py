"""Shared fixtures: the stack programs run once per session under the mock engine."""

import sys
from pathlib import Path

import pytest

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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each real-Slurm test's name, outcome and time as it ends (they take minutes in all)."""
    if report.when == "call" and "cluster" in report.keywords:
        print(
            f"\n[real Slurm] {report.nodeid}: {report.outcome} in {report.duration:.0f}s",
            file=sys.__stderr__,
            flush=True,
        )
