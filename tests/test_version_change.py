"""A change of slurmVersion on a deployed stack: upgrades the way Slurm allows, nothing else.

The program reads its own last `slurmVersion` output (the engine's readStackOutputs, which the
mock engine answers from `previous_outputs`) and refuses a downgrade before any resource."""

import json

import pytest
import yaml

from slurm_stack.offline import run_program
from slurm_stack.program import StackConfigError, run
from slurm_stack.render import slurm_config_files
from slurm_stack.spec import load_spec
from slurm_stack.spec.slurm_options import SLURM_CONF, parse_line, table
from slurm_stack.version_change import version_change_issue
from tests.conftest import DEV_STACK


def _dev_config(version: str) -> dict:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    return {**config, "slurmVersion": version}


def _run(version: str, deployed: str | None):
    return run_program(
        run,
        config={"slurm-stack:cluster": json.dumps(_dev_config(version))},
        previous_outputs={"slurmVersion": deployed} if deployed else None,
    )


@pytest.mark.parametrize(
    ("deployed", "wanted", "fragment"),
    [
        (None, "24.11", None),  # the first `up`
        ("26.05", "26.05", None),
        ("24.11", "26.05", None),  # within Slurm's window: 26.05 converts 24.11's state
        ("26.05", "24.11", "going back to 24.11 is not supported"),
        ("23.11", "26.05", "upgrade in steps, first to 24.11"),
    ],
)
def test_a_version_change_follows_slurms_upgrade_rules(deployed, wanted, fragment):
    issue = version_change_issue(deployed, wanted)
    if fragment is None:
        assert issue is None
    else:
        assert issue is not None and issue.path == "slurmVersion"
        assert fragment in issue.message


def test_a_downgrade_is_refused_before_any_resource():
    with pytest.raises(StackConfigError) as info:
        _run("24.11", deployed="26.05")
    message = str(info.value)
    assert "slurm-stack:cluster.slurmVersion: this stack runs Slurm 26.05" in message
    assert "Keep slurmVersion '26.05'" in message


def test_an_upgrade_and_a_first_up_render():
    upgraded = _run("26.05", deployed="24.11")
    assert upgraded.outputs["slurmVersion"] == "26.05"
    assert _run("24.11", deployed=None).outputs["slurmVersion"] == "24.11"


def test_the_default_26_05_config_parses_on_24_11():
    # While a version change rolls, 24.11 slurmds, sackds and clients still run beside the
    # 26.05 controller (each keeps the config it has, but one that restarts fetches the new
    # one): what we render by default must not hold a key 24.11 cannot parse.
    files = slurm_config_files(load_spec(_dev_config("26.05")))
    known = table("24.11", SLURM_CONF)
    unknown = [
        pair.key
        for line in files["slurm.conf"].splitlines()
        if line.strip() and not line.lstrip().startswith("#")
        for pair in parse_line(line)[:1]
        if known.get(pair.key) is None
    ]
    assert unknown == []


def test_slurmdbd_may_convert_its_database_for_as_long_as_up_waits():
    # slurmdbd listens only after its storage plugin converted the database (a Slurm
    # upgrade); its startup probe must not kill it first, and `up` waits as long.
    from slurm_stack.components.timeouts import TIMEOUTS
    from slurm_stack.k8s.accounting import slurmdbd_deployment

    spec = load_spec(_dev_config("26.05"))
    containers = slurmdbd_deployment(spec, "config")["spec"]["template"]["spec"]["containers"]
    [probe] = [c["startupProbe"] for c in containers if c["name"] == "slurmdbd"]
    budget = probe["periodSeconds"] * probe["failureThreshold"]
    assert budget == 3600
    assert TIMEOUTS["slurmdbd"] == TIMEOUTS["slurmdbd-service"] == f"{budget // 60}m"
