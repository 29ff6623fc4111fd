"""`controller.replicas` on a deployed stack: a primary and a backup share a ReadWriteMany
state claim, one controller has a ReadWriteOnce one, and a claim's access mode is fixed; so a
change of the count is refused before any resource, read from the stack's last outputs."""

import json

import pytest
import yaml

from slurm_stack.controller_change import (
    REPLICAS_OUTPUT,
    controller_replicas_issue,
    deployed_controller_replicas,
)
from slurm_stack.offline import run_program
from slurm_stack.program import StackConfigError, run
from tests.conftest import DEV_STACK


def _run(replicas: int, previous: dict | None):
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config["controller"] = {
        **config.get("controller", {}),
        "replicas": replicas,
        "stateVolume": {"size": "1Gi", "storageClass": "cephfs"},
    }
    return run_program(
        run,
        config={"slurm-stack:cluster": json.dumps(config)},
        previous_outputs=previous,
    )


@pytest.mark.parametrize(
    ("outputs", "replicas"),
    [
        ({}, None),  # the first `up`
        ({"slurmVersion": "26.05"}, 1),  # deployed before the output existed: one controller
        ({"slurmVersion": "26.05", REPLICAS_OUTPUT: 2.0}, 2),  # the wire has no integers
    ],
)
def test_the_deployed_count_comes_from_the_last_outputs(outputs, replicas):
    assert deployed_controller_replicas(outputs) == replicas


def test_only_a_change_of_the_count_is_an_issue():
    assert controller_replicas_issue(None, 2) is None
    assert controller_replicas_issue(2, 2) is None
    issue = controller_replicas_issue(1, 2)
    assert issue is not None and issue.path == "controller.replicas"
    assert "Keep replicas: 1" in issue.message


def test_turning_a_backup_on_in_a_deployed_stack_is_refused_before_any_resource():
    with pytest.raises(StackConfigError) as info:
        _run(2, {"slurmVersion": "26.05"})
    assert "slurm-stack:cluster.controller.replicas: this stack runs 1 slurmctld pod;" in str(
        info.value
    )
    with pytest.raises(StackConfigError, match="this stack runs 2 slurmctld pods"):
        _run(1, {"slurmVersion": "26.05", REPLICAS_OUTPUT: 2})


def test_a_first_up_with_a_backup_exports_its_count():
    assert _run(2, None).outputs[REPLICAS_OUTPUT] == 2
    assert _run(2, {"slurmVersion": "26.05", REPLICAS_OUTPUT: 2}).outputs[REPLICAS_OUTPUT] == 2
