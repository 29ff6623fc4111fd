"""What a stopping worker pod and a Kubernetes node drain are told: grace periods, the preStop
drain's settings and PodDisruptionBudgets, as the program renders them (strict schemas)."""

import json
from typing import Any

import pytest
import yaml

from slurm_stack.offline import ProgramRun, manifests, run_program, validate_manifests
from slurm_stack.program import run
from tests.conftest import DEV_STACK
from tests.helpers import by_name, containers, kube

BUDGET = "policy/v1:PodDisruptionBudget"
YEAR = 365 * 86400


def run_dev(change: Any = None) -> ProgramRun:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    if change:
        change(config)
    return run_program(run, config={"slurm-stack:cluster": json.dumps(config)})


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions with In) against labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def pod_labels(run: ProgramRun) -> dict[str, dict[str, str]]:
    """Pod template labels of every workload, by workload name."""
    workloads = [*kube(run, "apps/v1:StatefulSet"), *kube(run, "apps/v1:Deployment")]
    return {
        w.inputs["metadata"]["name"]: w.inputs["spec"]["template"]["metadata"]["labels"]
        for w in workloads
    }


def selected(run: ProgramRun, budget: str) -> set[str]:
    spec = by_name(run, BUDGET, budget).inputs["spec"]
    return {name for name, labels in pod_labels(run).items() if selects(spec["selector"], labels)}


def two_pools(config: dict[str, Any]) -> None:
    pool = config["workerPools"][0]
    pool["drain"] = {"policy": "cancel", "waitSeconds": 120, "maxUnavailable": "25%"}
    pool["update"] = {"policy": "requeue", "waitSeconds": 60}
    config["workerPools"].append({"name": "big", "replicas": 4, "drain": {"policy": "wait"}})


@pytest.fixture(scope="module")
def pools_run() -> ProgramRun:
    return run_dev(two_pools)


def test_each_budget_selects_exactly_its_pods(pools_run: ProgramRun) -> None:
    budgets = {r.inputs["metadata"]["name"] for r in kube(pools_run, BUDGET)}
    assert budgets == {"dev-cpu", "dev-big", "dev-login", "dev-services"}
    assert selected(pools_run, "dev-cpu") == {"dev-cpu"}
    assert selected(pools_run, "dev-big") == {"dev-big"}
    assert selected(pools_run, "dev-login") == {"dev-login"}
    # slurmctld, slurmdbd and MariaDB: one budget, so a node drain takes them one at a time.
    assert selected(pools_run, "dev-services") == {
        "dev-controller",
        "dev-accounting",
        "dev-mariadb",
    }


def test_budgets_take_the_pools_max_unavailable_and_let_unready_pods_go(
    pools_run: ProgramRun,
) -> None:
    specs = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in kube(pools_run, BUDGET)}
    assert specs["dev-cpu"]["maxUnavailable"] == "25%"
    assert specs["dev-big"]["maxUnavailable"] == 1  # the default
    assert specs["dev-services"]["maxUnavailable"] == specs["dev-login"]["maxUnavailable"] == 1
    assert {spec["unhealthyPodEvictionPolicy"] for spec in specs.values()} == {"AlwaysAllow"}
    budgets = [d for d in manifests(pools_run.resources) if d["kind"] == "PodDisruptionBudget"]
    assert len(budgets) == 4
    assert validate_manifests(budgets) == []  # strict schemas, every supported minor


def drain_of(run: ProgramRun, pool: str) -> tuple[int, dict[str, str], list[str]]:
    """A pool's grace period, its slurmd's drain settings and its preStop command."""
    statefulset = by_name(run, "apps/v1:StatefulSet", pool)
    slurmd = containers(statefulset)["slurmd"]
    env = {
        e["name"]: e["value"] for e in slurmd["env"] if e["name"].startswith(("DRAIN_", "UPDATE_"))
    }
    grace = statefulset.inputs["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    return grace, env, slurmd["lifecycle"]["preStop"]["exec"]["command"]


def test_grace_covers_the_wait_and_the_clean_up_after_it(pools_run: ProgramRun) -> None:
    grace, env, pre_stop = drain_of(pools_run, "dev-cpu")
    assert env == {
        "DRAIN_POLICY": "cancel",
        "DRAIN_WAIT_SECONDS": "120",
        "DRAIN_CLEANUP_SECONDS": "50",
        "UPDATE_POLICY": "requeue",
        "UPDATE_WAIT_SECONDS": "60",
    }
    # The longer wait (a stop's, an update's), then the clean-up the hook may take, then
    # 10 s for slurmd to stop.
    assert grace == 120 + 50 + 10
    assert pre_stop == ["/usr/lib/slurm-stack/entrypoint", "drain-node"]
    # `wait` has no deadline; Kubernetes needs a number, so a year.
    grace, env, _ = drain_of(pools_run, "dev-big")
    assert (grace, env["DRAIN_POLICY"], env["DRAIN_WAIT_SECONDS"]) == (YEAR, "wait", "")


def test_the_default_is_requeue_after_five_minutes_and_updates_wait_for_jobs() -> None:
    grace, env, _ = drain_of(run_dev(), "dev-cpu")
    assert (env["DRAIN_POLICY"], env["DRAIN_WAIT_SECONDS"]) == ("requeue", "300")
    # An update waits for running jobs however long they run: Kubernetes needs a number.
    assert (env["UPDATE_POLICY"], env["UPDATE_WAIT_SECONDS"], grace) == ("wait", "", YEAR)
    grace, env, _ = drain_of(
        run_dev(lambda c: c["workerPools"][0].update(update={"policy": "requeue"})), "dev-cpu"
    )
    assert (env["UPDATE_POLICY"], env["UPDATE_WAIT_SECONDS"], grace) == ("requeue", "300", 360)


def test_the_production_example_gives_h100_jobs_an_hour(prod_run: ProgramRun) -> None:
    grace, env, _ = drain_of(prod_run, "prod-h100")
    assert (env["DRAIN_POLICY"], env["DRAIN_WAIT_SECONDS"]) == ("requeue", "3600")
    # An image update requeues what still runs a day after the node began to drain.
    assert (env["UPDATE_POLICY"], env["UPDATE_WAIT_SECONDS"]) == ("requeue", "86400")
    assert grace == 86400 + 60
    budget = by_name(prod_run, BUDGET, "prod-h100").inputs["spec"]
    assert budget["maxUnavailable"] == 2
