"""How scripts/test.sh's two pytest workers share the suite (tests/conftest.py)."""

import pytest

from tests.conftest import RealSlurmTierTogether


@pytest.fixture
def scheduler() -> RealSlurmTierTogether:
    # Only the scope rule is asked: no workers (xdist's constructor wants their specs).
    return object.__new__(RealSlurmTierTogether)


def test_the_real_slurm_tier_is_two_units_of_work(scheduler: RealSlurmTierTogether) -> None:
    main = [
        "tests/cluster/test_boot.py::test_a_fresh_stack_logs_no_error",
        "tests/cluster/test_updates.py::test_x[slurmdbd]",
        "tests/cluster/test_lifecycle.py::test_y",
    ]
    beside = [
        "tests/cluster/test_drain.py::test_root_jobs_are_refused_unless_the_stack_allows_them",
        "tests/cluster/test_controller_ha.py::test_z",
        "tests/cluster/test_elastic.py::test_w",
        "tests/cluster/test_cgroups.py::test_v",
        "tests/cluster/test_directory.py::test_u",
        "tests/cluster/test_external_database.py::test_t",
    ]
    assert {scheduler._split_scope(nodeid) for nodeid in main} == {"tests/cluster/main"}
    assert {scheduler._split_scope(nodeid) for nodeid in beside} == {"tests/cluster/beside"}


def test_the_files_beside_the_tier_use_no_session_stack() -> None:
    """Their stacks are module fixtures of their own: no worker boots the itest stack or the
    registries twice."""
    import re
    from pathlib import Path

    from tests.conftest import BESIDE_THE_TIER

    session_fixture = re.compile(r"def test_\w+\([^)]*\b(cluster|image_registry)\b")
    for name in BESIDE_THE_TIER:
        text = (Path(__file__).parent / "cluster" / name).read_text()
        assert not session_fixture.search(text), name
    itest = (Path(__file__).parent / "cluster" / "test_boot.py").read_text()
    assert session_fixture.search(itest)  # the pattern finds one where there is one


def test_every_other_file_is_a_unit_of_its_own(scheduler: RealSlurmTierTogether) -> None:
    nodeids = [
        "tests/test_spec.py::test_a",
        "tests/test_spec.py::test_b[x]",
        "tests/test_cli.py::c",
    ]
    assert [scheduler._split_scope(nodeid) for nodeid in nodeids] == [
        "tests/test_spec.py",
        "tests/test_spec.py",
        "tests/test_cli.py",
    ]


# The sandboxes each half boots, by name (a stack file's `name`, or the name a test gives it),
# and the unit tests' own sandboxes, which run beside both halves.
MAIN_HALF_SANDBOXES = (
    "itest",
    "authslurm",
    "gpus",
    "labels",
    "site",
    "updates",
    "upgrade",
    "hybrid",
    "dev",
)
BESIDE_SANDBOXES = ("cg", "ha", "ldapdir", "drain", "elastic", "extdb")
UNIT_SANDBOXES = ("lvtest", "sctest")


def test_sandboxes_that_run_at_once_have_subnets_of_their_own() -> None:
    """Two sandboxes on one /24 cannot both create their network (a real run failed so)."""
    from slurm_stack.sandbox.session import subnet_for

    for one in BESIDE_SANDBOXES:
        for other in (*MAIN_HALF_SANDBOXES, *UNIT_SANDBOXES):
            assert subnet_for(one) != subnet_for(other), (one, other)
    for one in UNIT_SANDBOXES:
        for other in MAIN_HALF_SANDBOXES:
            assert subnet_for(one) != subnet_for(other), (one, other)


def test_every_test_stack_file_is_in_a_half() -> None:
    from pathlib import Path

    import yaml

    for stack in (Path(__file__).parent / "cluster").glob("Pulumi.*.yaml"):
        name = yaml.safe_load(stack.read_text())["config"]["slurm-stack:cluster"]["name"]
        assert name in (*MAIN_HALF_SANDBOXES, *BESIDE_SANDBOXES), stack.name
