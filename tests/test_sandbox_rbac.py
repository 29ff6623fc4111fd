"""RBAC in the sandbox's stand-in API (slurm_stack/sandbox/kube_rbac.py): a request's
attributes read from its path as the API server reads them, and the decision the stack's
Roles, ClusterRoles and bindings make, with the API server's 403 message."""

import json
from typing import Any

import pytest
import yaml

from slurm_stack.offline import manifests, run_program
from slurm_stack.program import run
from slurm_stack.sandbox.kube_rbac import (
    Authorizer,
    Request,
    User,
    forbidden_message,
    forbidden_status,
    parse_request,
    rule_allows,
    service_account_user,
)
from tests.conftest import DEV_STACK

NS = "ns"
CONTROLLER = service_account_user(NS, "c-controller")


def role(name: str, *rules: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return {"kind": "Role", "metadata": {"name": name, "namespace": namespace}, "rules": rules}


def cluster_role(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}


def binding(
    kind: str, name: str, role_kind: str, subjects: list[dict[str, str]], namespace: str = NS
) -> dict[str, Any]:
    meta = (
        {"name": name} if kind == "ClusterRoleBinding" else {"name": name, "namespace": namespace}
    )
    return {
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subjects,
    }


def account(name: str, namespace: str | None = NS) -> dict[str, str]:
    subject = {"kind": "ServiceAccount", "name": name}
    return {**subject, "namespace": namespace} if namespace else subject


SCALER = [
    role(
        "c-elastic-scaler",
        {
            "apiGroups": ["apps"],
            "resources": ["statefulsets/scale"],
            "resourceNames": ["c-cpu"],
            "verbs": ["get", "patch"],
        },
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "resourceNames": ["c-cpu-0", "c-cpu-1"],
            "verbs": ["delete"],
        },
    ),
    binding("RoleBinding", "c-elastic-scaler", "Role", [account("c-controller")]),
]


# -- what a request is ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes", {}, Request("list", "/api/v1/nodes", True, "", "", "nodes")),
        ("GET", "/api/v1/nodes/n1", {}, Request("get", "/api/v1/nodes/n1", True, "", "", "nodes",
                                                name="n1")),
        ("GET", "/api/v1/namespaces/ns/pods", {"labelSelector": ["a=b"]},
         Request("list", "/api/v1/namespaces/ns/pods", True, "", "ns", "pods")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": ["true"]},
         Request("watch", "/api/v1/namespaces/ns/pods", True, "", "ns", "pods")),
        ("DELETE", "/api/v1/namespaces/ns/pods/p-0", {},
         Request("delete", "/api/v1/namespaces/ns/pods/p-0", True, "", "ns", "pods", name="p-0")),
        ("DELETE", "/api/v1/namespaces/ns/pods", {},
         Request("deletecollection", "/api/v1/namespaces/ns/pods", True, "", "ns", "pods")),
        ("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/s/scale", {},
         Request("patch", "/apis/apps/v1/namespaces/ns/statefulsets/s/scale", True, "apps", "ns",
                 "statefulsets", "scale", "s")),
        ("GET", "/api/v1/namespaces/ns", {},
         Request("get", "/api/v1/namespaces/ns", True, "", "ns", "namespaces", name="ns")),
        ("GET", "/api/v1/watch/namespaces/ns/pods", {},
         Request("watch", "/api/v1/watch/namespaces/ns/pods", True, "", "ns", "pods")),
        ("GET", "/version", {}, Request("get", "/version")),
        ("GET", "/apis/apps/v1", {}, Request("get", "/apis/apps/v1")),
        ("POST", "/api/v1/namespaces/ns/pods", {},
         Request("create", "/api/v1/namespaces/ns/pods", True, "", "ns", "pods")),
    ],
)  # fmt: skip
def test_a_request_is_read_from_its_path_as_the_api_server_reads_it(
    method: str, path: str, query: dict[str, list[str]], expected: Request
) -> None:
    assert parse_request(method, path, query) == expected


# -- one rule ---------------------------------------------------------------------------------

PATCH_SCALE = parse_request("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/c-cpu/scale")


@pytest.mark.parametrize(
    ("rule", "allowed"),
    [
        ({"apiGroups": ["apps"], "resources": ["statefulsets/scale"], "verbs": ["patch"]}, True),
        ({"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["patch"]}, False),
        ({"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["patch"]}, True),
        ({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}, True),
        ({"apiGroups": ["*"], "resources": ["statefulsets/scale"], "verbs": ["patch"]}, True),
        ({"apiGroups": [""], "resources": ["statefulsets/scale"], "verbs": ["patch"]}, False),
        ({"apiGroups": ["apps"], "resources": ["statefulsets/scale"], "verbs": ["get"]}, False),
        ({"apiGroups": ["apps"], "resources": ["statefulsets/*"], "verbs": ["patch"]}, False),
        ({"apiGroups": ["apps"], "resources": ["statefulsets/scale"], "verbs": ["patch"],
          "resourceNames": ["c-cpu"]}, True),
        ({"apiGroups": ["apps"], "resources": ["statefulsets/scale"], "verbs": ["patch"],
          "resourceNames": ["c-gpu"]}, False),
        ({"nonResourceURLs": ["*"], "verbs": ["*"]}, False),
    ],
)  # fmt: skip
def test_a_rule_matches_verbs_groups_resources_and_names_as_kubernetes_does(
    rule: dict[str, Any], allowed: bool
) -> None:
    assert rule_allows(rule, PATCH_SCALE) is allowed


def test_a_rule_with_resource_names_allows_no_list() -> None:
    named = {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["p-0"], "verbs": ["*"]}
    assert not rule_allows(named, parse_request("GET", "/api/v1/namespaces/ns/pods"))
    assert rule_allows(named, parse_request("GET", "/api/v1/namespaces/ns/pods/p-0"))


def test_non_resource_urls_are_refused_even_to_a_wildcard_rule() -> None:
    everything = Authorizer(
        [cluster_role("all", {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}),
         binding("ClusterRoleBinding", "all", "ClusterRole", [account("c-controller")])]
    )  # fmt: skip
    assert everything.allows(CONTROLLER, parse_request("GET", "/api/v1/nodes"))
    version = parse_request("GET", "/version")
    assert not everything.allows(CONTROLLER, version)
    assert forbidden_message(CONTROLLER, version) == (
        'forbidden: User "system:serviceaccount:ns:c-controller" cannot get path "/version"'
    )


# -- bindings ---------------------------------------------------------------------------------


def test_the_scalers_role_allows_its_pools_scale_and_pods_and_nothing_else() -> None:
    rbac = Authorizer(SCALER)
    allowed = [
        ("GET", "/apis/apps/v1/namespaces/ns/statefulsets/c-cpu/scale"),
        ("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/c-cpu/scale"),
        ("DELETE", "/api/v1/namespaces/ns/pods/c-cpu-1"),
    ]
    refused = [
        ("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/c-gpu/scale"),
        ("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/c-cpu"),
        ("PUT", "/apis/apps/v1/namespaces/ns/statefulsets/c-cpu/scale"),
        ("DELETE", "/api/v1/namespaces/ns/pods/c-cpu-2"),
        ("DELETE", "/api/v1/namespaces/ns/pods/c-controller-0"),
        ("GET", "/api/v1/namespaces/ns/pods"),
        ("GET", "/api/v1/namespaces/ns/secrets"),
        ("GET", "/apis/apps/v1/namespaces/other/statefulsets/c-cpu/scale"),
    ]
    for method, path in allowed:
        assert rbac.allows(CONTROLLER, parse_request(method, path)), (method, path)
    for method, path in refused:
        assert not rbac.allows(CONTROLLER, parse_request(method, path)), (method, path)
    # Another account of the namespace gets nothing from the binding.
    other = service_account_user(NS, "c-cpu")
    assert not rbac.allows(other, parse_request(*allowed[0]))


def test_a_role_binding_grants_in_its_namespace_a_cluster_binding_everywhere() -> None:
    reader = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    lists_pods = parse_request("GET", "/api/v1/namespaces/ns/pods")
    elsewhere = parse_request("GET", "/api/v1/namespaces/other/pods")
    in_namespace = Authorizer(
        [cluster_role("reader", reader),
         binding("RoleBinding", "reader", "ClusterRole", [account("c-controller")])]
    )  # fmt: skip
    assert in_namespace.allows(CONTROLLER, lists_pods)
    assert not in_namespace.allows(CONTROLLER, elsewhere)
    everywhere = Authorizer(
        [cluster_role("reader", reader),
         binding("ClusterRoleBinding", "reader", "ClusterRole", [account("c-controller")])]
    )  # fmt: skip
    assert everywhere.allows(CONTROLLER, elsewhere)
    # A ClusterRoleBinding cannot bind a Role; a Role of another namespace grants nothing.
    assert not Authorizer(
        [role("reader", reader),
         binding("ClusterRoleBinding", "reader", "Role", [account("c-controller")])]
    ).allows(CONTROLLER, lists_pods)  # fmt: skip
    assert not Authorizer(
        [role("reader", reader, namespace="other"),
         binding("RoleBinding", "reader", "Role", [account("c-controller")])]
    ).allows(CONTROLLER, lists_pods)  # fmt: skip


def test_subjects_are_accounts_users_and_groups() -> None:
    reader = role("reader", {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]})
    lists_pods = parse_request("GET", "/api/v1/namespaces/ns/pods")
    for subject in (
        account("c-controller", None),  # in the binding's namespace
        {"kind": "Group", "name": "system:serviceaccounts:ns"},
        {"kind": "Group", "name": "system:authenticated"},
        {"kind": "User", "name": "system:serviceaccount:ns:c-controller"},
    ):
        rbac = Authorizer([reader, binding("RoleBinding", "reader", "Role", [subject])])
        assert rbac.allows(CONTROLLER, lists_pods), subject
    stranger = Authorizer(
        [reader, binding("RoleBinding", "reader", "Role", [account("c-controller", "other")])]
    )
    assert not stranger.allows(CONTROLLER, lists_pods)
    assert not Authorizer([reader]).allows(CONTROLLER, lists_pods)  # no binding
    assert not Authorizer(SCALER).allows(User("admin"), lists_pods)


def test_the_node_state_controllers_rendered_roles_keep_working() -> None:
    """The dev stack with the node-state controller: its ClusterRole reads nodes, its Role
    lists the namespace's pods; nothing more."""
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config["nodeState"] = {"enabled": True}
    rendered = manifests(
        run_program(run, config={"slurm-stack:cluster": json.dumps(config)}).resources
    )
    [deployment] = [
        m for m in rendered if m["kind"] == "Deployment" and m["metadata"]["name"].endswith("state")
    ]
    namespace = deployment["metadata"]["namespace"]
    user = service_account_user(
        namespace, deployment["spec"]["template"]["spec"]["serviceAccountName"]
    )
    rbac = Authorizer(rendered)
    assert rbac.allows(user, parse_request("GET", "/api/v1/nodes"))
    assert rbac.allows(user, parse_request("GET", "/api/v1/nodes/node-a"))
    assert rbac.allows(user, parse_request("GET", f"/api/v1/namespaces/{namespace}/pods"))
    for method, path in [
        ("GET", f"/api/v1/namespaces/{namespace}/secrets"),
        ("GET", "/api/v1/namespaces/other/pods"),
        ("PATCH", "/api/v1/nodes/node-a"),
        ("DELETE", f"/api/v1/namespaces/{namespace}/pods/x"),
    ]:
        assert not rbac.allows(user, parse_request(method, path)), (method, path)


# -- the answer to a refused request ---------------------------------------------------------


def test_a_refused_request_reads_as_the_api_servers_403() -> None:
    patch = parse_request("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/c-gpu/scale")
    assert forbidden_message(CONTROLLER, patch) == (
        'statefulsets.apps "c-gpu" is forbidden: User "system:serviceaccount:ns:c-controller" '
        'cannot patch resource "statefulsets/scale" in API group "apps" in the namespace "ns"'
    )
    secrets = parse_request("GET", "/api/v1/namespaces/ns/secrets")
    assert forbidden_status(CONTROLLER, secrets) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'secrets is forbidden: User "system:serviceaccount:ns:c-controller" cannot '
        'list resource "secrets" in API group "" in the namespace "ns"',
        "reason": "Forbidden",
        "details": {"kind": "secrets"},
        "code": 403,
    }
    nodes = parse_request("GET", "/api/v1/nodes")
    assert forbidden_message(CONTROLLER, nodes) == (
        'nodes is forbidden: User "system:serviceaccount:ns:c-controller" cannot list '
        'resource "nodes" in API group "" at the cluster scope'
    )
