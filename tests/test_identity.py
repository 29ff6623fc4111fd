"""ServiceAccounts: every pod of every shipped stack names its component's own account, none
but the node-state controller's mounts an API token, and nothing but its account is bound to
a Role: one that lists nodes and one that lists the cluster's pods."""

import json
import runpy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from slurm_stack.offline import ProgramRun, manifests, run_program, validate_manifests
from slurm_stack.offline.render import run_stack
from slurm_stack.program import run
from tests.conftest import DEV_STACK, PROD_STACK, ROOT

ITEST_STACK = ROOT / "tests" / "cluster" / "Pulumi.itest.yaml"
HOST_PROGRAM = ROOT / "examples" / "host-program" / "__main__.py"
ACCOUNT = "kubernetes:core/v1:ServiceAccount"
RBAC = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
COMPONENT = "app.kubernetes.io/component"


def dev_with(change: Any) -> ProgramRun:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    change(config)
    return run_program(run, config={"slurm-stack:cluster": json.dumps(config)})


def host_program() -> ProgramRun:
    return run_program(
        lambda: runpy.run_path(str(HOST_PROGRAM), run_name="__main__"),
        project="gpu-platform",
        stack="example",
        config={"gpu-platform:kubeconfig": "~/.kube/config"},
    )


RUNS = {
    "dev": lambda: run_stack(DEV_STACK),
    "production": lambda: run_stack(PROD_STACK),
    "itest": lambda: run_stack(ITEST_STACK),
    "host-program": host_program,
    "dev-auth-slurm-mariadb-operator": lambda: dev_with(
        lambda c: (c.update(auth="slurm"), c["accounting"].update(mode="mariadb-operator"))
    ),
    "dev-without-accounting": lambda: dev_with(lambda c: c["accounting"].update(enabled=False)),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def stack(request: pytest.FixtureRequest) -> ProgramRun:
    return RUNS[request.param]()


def pod_specs(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every PodSpec inside a manifest, whatever its kind (a dict with `containers`)."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            yield path, value
        for key, item in value.items():
            yield from pod_specs(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from pod_specs(item, f"{path}[{i}]")


def workloads(run: ProgramRun) -> list[tuple[Any, dict[str, Any]]]:
    """(resource, its one PodSpec) for every object of the run that runs pods."""
    found = []
    for resource in run.resources:
        if not resource.type.startswith("kubernetes:") or not resource.custom:
            continue
        specs = list(pod_specs(resource.inputs))
        assert len(specs) <= 1, resource.urn
        if specs:
            found.append((resource, specs[0][1]))
    return found


def test_no_pod_mounts_a_token_and_each_names_an_account_the_stack_creates(
    stack: ProgramRun,
) -> None:
    accounts = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r
        for r in stack.resources
        if r.type == ACCOUNT
    }
    assert accounts
    for account in accounts.values():
        assert account.inputs["automountServiceAccountToken"] is False, account.urn
    pods = workloads(stack)
    kinds = {r.type.split(":")[-1] for r, _ in pods}
    assert {"StatefulSet", "Job"} <= kinds
    for resource, pod in pods:
        reads_the_api = resource.inputs["metadata"]["labels"][COMPONENT] == "node-state"
        assert pod["automountServiceAccountToken"] is reads_the_api, resource.urn
        namespace = resource.inputs["metadata"]["namespace"]
        assert (namespace, pod["serviceAccountName"]) in accounts, resource.urn


def test_one_account_per_component_and_none_unused(stack: ProgramRun) -> None:
    users: dict[str, set[tuple[str, str]]] = {}
    for resource, pod in workloads(stack):
        labels = resource.inputs["metadata"]["labels"]
        owner = (labels["app.kubernetes.io/component"], labels.get("slurm-stack.io/pool", ""))
        users.setdefault(pod["serviceAccountName"], set()).add(owner)
    names = {r.inputs["metadata"]["name"] for r in stack.resources if r.type == ACCOUNT}
    assert set(users) == names  # every account is some component's, and only its
    for name, owners in users.items():
        assert len(owners) == 1, (name, owners)


def test_only_the_node_state_account_is_bound_and_only_to_read(stack: ProgramRun) -> None:
    """Besides the elastic scaler's Role (tests/test_elastic_render.py pins it), bound to the
    controller's account where a pool is elastic."""
    documents = manifests(stack.resources)
    rbac = {
        (d["kind"], d["metadata"]["name"]): d
        for d in documents
        if d["kind"] in RBAC and not d["metadata"]["name"].endswith("-elastic-scaler")
    }
    accounts = [d for d in documents if d["kind"] == "ServiceAccount"]
    assert validate_manifests(accounts + list(rbac.values())) == []  # strict, every minor
    node_state = [a for a in accounts if a["metadata"]["labels"][COMPONENT] == "node-state"]
    if not node_state:
        assert rbac == {}
        return
    [account] = node_state
    namespace, name = account["metadata"]["namespace"], account["metadata"]["name"]
    cluster_wide = f"{namespace}-{name}"
    assert set(rbac) == {
        ("ClusterRole", cluster_wide),
        ("ClusterRoleBinding", cluster_wide),
        ("Role", name),
        ("RoleBinding", name),
    }
    assert rbac[("ClusterRole", cluster_wide)]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}
    ]
    assert rbac[("Role", name)]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    ]
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    assert rbac[("ClusterRoleBinding", cluster_wide)]["subjects"] == subject
    assert rbac[("RoleBinding", name)]["subjects"] == subject
    assert "namespace" not in rbac[("ClusterRole", cluster_wide)]["metadata"]


def test_each_account_belongs_to_its_workloads_component_and_comes_first(
    stack: ProgramRun,
) -> None:
    accounts = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r
        for r in stack.resources
        if r.type == ACCOUNT
    }
    for resource, pod in workloads(stack):
        namespace = resource.inputs["metadata"]["namespace"]
        account = accounts[(namespace, pod["serviceAccountName"])]
        assert account.parent == resource.parent, (account.urn, resource.urn)
        # A pod naming an account that does not exist yet is refused at admission.
        assert account.urn in resource.dependencies, resource.urn


def test_dev_accounts_by_component(dev_run: ProgramRun) -> None:
    def component_of(urn: str) -> str:
        return urn.split("::")[-2].split("$")[-1].removeprefix("slurm-stack:index:")

    accounts = {
        r.inputs["metadata"]["name"]: (
            r.inputs["metadata"]["labels"]["app.kubernetes.io/component"],
            component_of(r.parent or ""),
        )
        for r in dev_run.resources
        if r.type == ACCOUNT
    }
    assert accounts == {
        "dev-controller": ("controller", "Controller"),
        "dev-accounting": ("accounting", "Accounting"),
        "dev-mariadb": ("database", "Accounting"),
        "dev-login": ("login", "LoginPool"),
        "dev-cpu": ("worker", "WorkerPool"),  # each pool its own
        "dev-populate-jail": ("jail", "Jail"),
        "dev-users": ("users", "Users"),
        "dev-reconfigure": ("reconfigure", "SlurmCluster"),
        "dev-pool-update": ("pool-update", "SlurmCluster"),
        "dev-exporter": ("exporter", "Metrics"),
    }
