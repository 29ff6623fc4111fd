"""How scripts/test.sh's three pytest workers share the suite (tests/conftest.py)."""

import pytest

from tests.conftest import RealSlurmTierTogether


@pytest.fixture
def scheduler() -> RealSlurmTierTogether:
    # Only the scope rule is asked: no workers (xdist's constructor wants their specs).
    return object.__new__(RealSlurmTierTogether)


def test_the_real_slurm_tier_is_three_shares(scheduler: RealSlurmTierTogether) -> None:
    main = [
        "tests/cluster/test_boot.py::test_a_fresh_stack_logs_no_error",
        "tests/cluster/test_lifecycle.py::test_y",
        "tests/cluster/test_cgroups.py::test_v",
    ]
    beside = [
        "tests/cluster/test_controller_ha.py::test_z",
        "tests/cluster/test_updates.py::test_x[slurmdbd]",
        "tests/cluster/test_upgrade.py::test_q",
        "tests/cluster/test_elastic.py::test_w",
        "tests/cluster/test_directory.py::test_u",
        "tests/cluster/test_external_database.py::test_t",
    ]
    version_matrix = [
        "tests/cluster/test_drain.py::test_root_jobs_are_refused_unless_the_stack_allows_them[26.05]",
        "tests/cluster/test_drain.py::test_cancel_policy_cancels_with_a_reason_and_wait_policy_waits[24.11]",
        "tests/cluster/test_auth_slurm.py::test_s[24.11]",
        "tests/cluster/test_site_scripts.py::test_r[26.05]",
    ]
    assert {scheduler._split_scope(nodeid) for nodeid in main} == {"tests/cluster/main"}
    assert {scheduler._split_scope(nodeid) for nodeid in beside} == {"tests/cluster/beside"}
    assert {scheduler._split_scope(nodeid) for nodeid in version_matrix} == {
        "tests/cluster/version-matrix"
    }


def test_the_files_beside_the_tier_use_no_session_stack() -> None:
    """Their stacks are module fixtures of their own: no worker boots the itest stack or the
    registries twice."""
    import re
    from pathlib import Path

    from tests.conftest import BESIDE_THE_TIER, VERSION_MATRIX_SHARE

    session_fixture = re.compile(r"def test_\w+\([^)]*\b(cluster|image_registry)\b")
    for name in (*BESIDE_THE_TIER, *VERSION_MATRIX_SHARE):
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


# The sandboxes each share boots, by name (a stack file's `name`, or the name a test gives
# it), and the unit tests' own sandboxes, which run beside all three.
MAIN_SANDBOXES = ("itest", "gpus", "labels", "hybrid", "cgroups", "dev")
BESIDE_SANDBOXES = ("ha", "ldapdir", "elastic", "extdb", "updates", "upgrade")
VERSION_MATRIX_SANDBOXES = ("authslurm", "site", "drain")
UNIT_SANDBOXES = ("lvtest", "sctest")


def test_sandboxes_that_run_at_once_have_subnets_of_their_own() -> None:
    """Two sandboxes on one /24 cannot both create their network (a real run failed so)."""
    from itertools import combinations

    from slurm_stack.sandbox.session import subnet_for

    groups = (MAIN_SANDBOXES, BESIDE_SANDBOXES, VERSION_MATRIX_SANDBOXES, UNIT_SANDBOXES)
    for group, other_group in combinations(groups, 2):
        for one in group:
            for other in other_group:
                assert subnet_for(one) != subnet_for(other), (one, other)


def test_every_test_stack_file_is_in_a_half() -> None:
    from pathlib import Path

    import yaml

    for stack in (Path(__file__).parent / "cluster").glob("Pulumi.*.yaml"):
        name = yaml.safe_load(stack.read_text())["config"]["slurm-stack:cluster"]["name"]
        assert name in (*MAIN_SANDBOXES, *BESIDE_SANDBOXES, *VERSION_MATRIX_SANDBOXES), stack.name


def test_the_tier_runs_its_modules_in_an_order_the_seed_gives() -> None:
    """Modules shuffled as wholes, each module's tests in their own order, the other tests
    where they were; one seed, one order."""
    from dataclasses import dataclass
    from pathlib import Path

    from tests.cluster.conftest import HERE, in_random_module_order

    @dataclass
    class Item:
        fspath: Path
        name: str

    other = Path(__file__)
    items = [Item(other, "unit")] + [
        Item(HERE / f"test_{module}.py", f"{module}{test}")
        for module in "abcdefgh"
        for test in (1, 2)
    ]
    orders = {
        seed: [item.name for item in in_random_module_order(items, seed)]  # type: ignore[arg-type]
        for seed in range(20)
    }
    for names in orders.values():
        assert names[0] == "unit"
        assert sorted(names) == sorted(item.name for item in items)
        modules = [name[0] for name in names[1::2]]
        assert names[1:] == [f"{module}{test}" for module in modules for test in (1, 2)]
    assert len({tuple(names) for names in orders.values()}) > 1
    assert [item.name for item in in_random_module_order(items, 7)] == orders[7]  # type: ignore[arg-type]


def test_the_modules_about_a_fresh_stack_run_first_on_it_in_every_order() -> None:
    from dataclasses import dataclass
    from pathlib import Path

    from tests.cluster.conftest import FRESH_STACK_MODULES, HERE, in_random_module_order

    @dataclass
    class Item:
        fspath: Path

    names = ["test_x.py", "test_y.py", *FRESH_STACK_MODULES, "test_z.py"]
    items = [Item(HERE / name) for name in names]
    for seed in range(20):
        order = [item.fspath.name for item in in_random_module_order(items, seed)]  # type: ignore[arg-type]
        assert order[: len(FRESH_STACK_MODULES)] == list(FRESH_STACK_MODULES)
