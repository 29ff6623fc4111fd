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


def _run_without_outputs(version: str, deployed_flag: str | None):
    """A backend that cannot answer readStackOutputs; `deployedSlurmVersion` as given."""
    from slurm_stack.offline.mocks import UNREADABLE_OUTPUTS

    config = {"slurm-stack:cluster": json.dumps(_dev_config(version))}
    if deployed_flag is not None:
        config["slurm-stack:deployedSlurmVersion"] = deployed_flag
    return run_program(run, config=config, previous_outputs=UNREADABLE_OUTPUTS)


def test_without_the_last_outputs_the_deployed_version_must_be_stated() -> None:
    with pytest.raises(StackConfigError) as info:
        _run_without_outputs("24.11", None)
    message = str(info.value)
    assert "slurm-stack:deployedSlurmVersion: this stack's backend cannot give its last" in message
    assert "this backend keeps no stack outputs" in message
    assert "pulumi config set deployedSlurmVersion <version>" in message


def test_the_stated_version_is_checked_as_the_outputs_would_be() -> None:
    with pytest.raises(StackConfigError, match=r"going back to 24\.11 is not supported"):
        _run_without_outputs("24.11", "26.05")
    assert _run_without_outputs("26.05", "24.11").outputs["slurmVersion"] == "26.05"
    assert _run_without_outputs("24.11", "none").outputs["slurmVersion"] == "24.11"
    with pytest.raises(StackConfigError, match="'latest' is no Slurm version"):
        _run_without_outputs("26.05", "latest")


def test_the_stated_version_is_ignored_where_the_backend_answers() -> None:
    config = {
        "slurm-stack:cluster": json.dumps(_dev_config("24.11")),
        "slurm-stack:deployedSlurmVersion": "24.11",
    }
    with pytest.raises(StackConfigError, match=r"going back to 24\.11 is not supported"):
        run_program(run, config=config, previous_outputs={"slurmVersion": "26.05"})
