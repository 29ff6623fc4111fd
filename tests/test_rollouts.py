"""How updates roll, as rendered: every StatefulSet recovers from a broken template on its
own, and a worker pool's update Job marks its nodes before the pods take a new template.
The sandbox rolls the same way (highest ordinal first, one pod at a time) and is stuck where
Kubernetes is stuck; tests/cluster/test_updates.py runs both on real Slurm."""

import json
from dataclasses import replace
from typing import Any

import pytest
import yaml

from slurm_stack.offline import ProgramRun, run_program
from slurm_stack.program import run
from slurm_stack.sandbox.apply import update_action
from slurm_stack.sandbox.plan import Pod
from tests.conftest import DEV_STACK
from tests.helpers import by_content, by_name, containers, kube

ITEST_STACK = DEV_STACK.parent / "tests" / "cluster" / "Pulumi.itest.yaml"


def run_with(change: Any = None, stack=DEV_STACK) -> ProgramRun:  # type: ignore[no-untyped-def]
    config = yaml.safe_load(stack.read_text())["config"]["slurm-stack:cluster"]
    if change:
        change(config)
    return run_program(run, config={"slurm-stack:cluster": json.dumps(config)})


@pytest.mark.parametrize("stack", [DEV_STACK, ITEST_STACK], ids=["dev", "itest"])
def test_every_statefulset_replaces_a_pod_that_never_became_ready(stack) -> None:  # type: ignore[no-untyped-def]
    statefulsets = kube(run_with(stack=stack), "apps/v1:StatefulSet")
    names = {s.inputs["metadata"]["name"].split("-", 1)[1] for s in statefulsets}
    assert {"controller", "mariadb", "login", "cpu"} <= names
    for statefulset in statefulsets:
        spec = statefulset.inputs["spec"]
        assert spec["podManagementPolicy"] == "Parallel", statefulset.urn
        # No maxUnavailable: with the MaxUnavailableStatefulSet gate on it stops Parallel
        # from replacing such a pod (kubernetes/kubernetes#137409).
        assert spec["updateStrategy"] == {"type": "RollingUpdate"}, statefulset.urn


def slurmd_env(run: ProgramRun, pool: str) -> dict[str, str]:
    slurmd = containers(by_name(run, "apps/v1:StatefulSet", pool))["slurmd"]
    return {e["name"]: e["value"] for e in slurmd["env"]}


def test_the_update_job_runs_once_per_template_before_the_pool_takes_it(
    dev_run: ProgramRun,
) -> None:
    template = slurmd_env(dev_run, "dev-cpu")["POD_TEMPLATE_HASH"]
    job = by_content(dev_run, "kubernetes:batch/v1:Job", "dev-cpu-update")
    assert job.inputs["metadata"]["name"] == f"dev-pool-update-{template}"
    assert len(job.inputs["metadata"]["name"]) <= 63
    [client] = job.inputs["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in client["env"]}
    assert env["TEMPLATE_HASH"] == template
    assert (env["POOL_NODE_PREFIX"], env["POOL_REPLICAS"]) == ("dev-cpu-", "2")
    assert client["command"][-1] == "mark-pool-update"
    statefulset = by_name(dev_run, "apps/v1:StatefulSet", "dev-cpu")
    assert job.urn in statefulset.dependencies


def test_the_template_hash_follows_the_template_not_the_replicas(dev_run: ProgramRun) -> None:
    template = slurmd_env(dev_run, "dev-cpu")["POD_TEMPLATE_HASH"]

    def pool(**fields: Any):  # type: ignore[no-untyped-def]
        return lambda c: c["workerPools"][0].update(fields)

    scaled = run_with(pool(replicas=5))
    assert slurmd_env(scaled, "dev-cpu")["POD_TEMPLATE_HASH"] == template
    assert slurmd_env(scaled, "dev-cpu")["UPDATE_POLICY"] == "wait"
    resized = run_with(pool(resources={"limits": {"cpu": "1", "memory": "2Gi"}}))
    assert slurmd_env(resized, "dev-cpu")["POD_TEMPLATE_HASH"] != template
    waits = run_with(pool(update={"policy": "cancel", "waitSeconds": 10}))
    assert slurmd_env(waits, "dev-cpu")["POD_TEMPLATE_HASH"] != template


POD = Pod("x-cpu-1", "10.0.0.2", "worker", 4, False, (), statefulset="x-cpu")


@pytest.mark.parametrize(
    ("pod", "running", "healthy", "action"),
    [
        (POD, None, False, "replace"),  # a new pod
        (POD, "print", True, "keep"),
        (POD, "print", False, "replace"),  # crashed: the kubelet restarts it
        (POD, "other", True, "roll"),
        (POD, "other", False, "roll"),  # Parallel: a pod that never became ready goes
        (replace(POD, ordered_ready=True), "other", True, "roll"),
        # OrderedReady: Kubernetes' controller waits for it forever ("forced rollback").
        (replace(POD, ordered_ready=True), "other", False, "stuck"),
        (replace(POD, statefulset=""), "other", False, "replace"),  # a Deployment's pod
    ],
)
def test_the_sandbox_rolls_as_the_statefulset_controller_does(
    pod: Pod, running: str | None, healthy: bool, action: str
) -> None:
    assert update_action(pod, "print", running, lambda _: healthy) == action
