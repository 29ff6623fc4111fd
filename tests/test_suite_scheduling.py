"""How scripts/test.sh's two pytest workers share the suite (tests/conftest.py)."""

import pytest

from tests.conftest import RealSlurmTierTogether


@pytest.fixture
def scheduler() -> RealSlurmTierTogether:
    # Only the scope rule is asked: no workers (xdist's constructor wants their specs).
    return object.__new__(RealSlurmTierTogether)


def test_the_real_slurm_tier_is_one_unit_of_work(scheduler: RealSlurmTierTogether) -> None:
    scopes = {
        scheduler._split_scope(nodeid)
        for nodeid in (
            "tests/cluster/test_boot.py::test_a_fresh_stack_logs_no_error",
            "tests/cluster/test_drain.py::test_root_jobs_are_refused_unless_the_stack_allows_them",
            "tests/cluster/test_updates.py::test_x[slurmdbd]",
        )
    }
    assert scopes == {"tests/cluster/"}


def test_every_other_test_is_a_unit_of_its_own(scheduler: RealSlurmTierTogether) -> None:
    nodeids = [
        "tests/test_spec.py::test_a",
        "tests/test_spec.py::test_b[x]",
        "tests/test_cli.py::c",
    ]

    assert [scheduler._split_scope(nodeid) for nodeid in nodeids] == nodeids
