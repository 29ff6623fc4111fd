"""The sandbox's stand-in Kubernetes API: the stand-in nodes (what a test or `sandbox
kube-node` sets is what it lists, in the shape of a real NodeList), a token per ServiceAccount,
and the server's answers over TLS as the API server gives them: RBAC's 401 and 403, the scale
subresource, pod deletes."""

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slurm_stack.cli import _node_labels
from slurm_stack.sandbox.kube_api import (
    RBAC_MODULE,
    SERVER_SCRIPT,
    SandboxKubeApi,
    service_account_dir,
)
from slurm_stack.sandbox.kube_api_server import node_list, serve
from slurm_stack.sandbox.statefulsets import (
    POWER_SAVING,
    SCALED_BY_ANNOTATION,
    deletions,
    live_sizes,
    pending,
    record_sizes,
    save_observed,
)


def stand_in(tmp_path: Path) -> SandboxKubeApi:
    api = SandboxKubeApi("t", "t-net", "10.89.0.0/24", tmp_path, None)  # type: ignore[arg-type]
    api.dir.mkdir(parents=True, exist_ok=True)
    api._write_nodes({"node-a": {"unschedulable": False, "ready": True}})
    return api


def test_labels_are_set_removed_and_listed_like_a_node_lists_them(tmp_path: Path) -> None:
    api = stand_in(tmp_path)
    api.set_node("node-a", labels={"example.com/leaf": "leaf-a", "zone": "z1"})
    api.set_node("node-a", labels={"zone": None}, unschedulable=True)
    [item] = node_list(api.nodes())["items"]
    assert item["metadata"] == {"name": "node-a", "labels": {"example.com/leaf": "leaf-a"}}
    assert item["spec"] == {"unschedulable": True}
    with pytest.raises(KeyError, match="no stand-in node node-b"):
        api.set_node("node-b", ready=False)


def test_kube_node_labels_read_like_kubectl_label() -> None:
    assert _node_labels(["a=1", "example.com/b=", "c-"]) == {
        "a": "1",
        "example.com/b": "",
        "c": None,
    }
    with pytest.raises(KeyError, match="want KEY=VALUE"):
        _node_labels(["a"])


# -- the stand-in API server, over TLS on this host ---------------------------------------------

NS = "ns"
ACCESS_VOLUME = {
    "name": "kube-api-access",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ]
    },
}


def workload(kind: str, name: str, component: str, replicas: int = 1, **pod: Any) -> dict[str, Any]:
    """A StatefulSet or Deployment of one container, its pods run as ServiceAccount ``name``."""
    labels = {"app.kubernetes.io/component": component, "app.kubernetes.io/instance": "c"}
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if component == "worker":
        meta["annotations"] = {SCALED_BY_ANNOTATION: POWER_SAVING}
    spec = {
        "serviceAccountName": name,
        "automountServiceAccountToken": False,
        "containers": [{"name": "main", "image": "img"}],
        **pod,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def rbac_objects() -> list[dict[str, Any]]:
    """The scaler's Role (c-cpu's scale and pods, not c-gpu's) and the node-state
    controller's ClusterRole and Role, each bound to its account."""

    def bound(kind: str, name: str, account: str, **meta: str) -> dict[str, Any]:
        return {
            "kind": f"{kind}Binding",
            "metadata": {"name": name, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NS}],
        }

    scale = {"apiGroups": ["apps"], "resources": ["statefulsets/scale"],
             "resourceNames": ["c-cpu"], "verbs": ["get", "patch"]}  # fmt: skip
    pods = {"apiGroups": [""], "resources": ["pods"],
            "resourceNames": ["c-cpu-0", "c-cpu-1", "c-cpu-2"], "verbs": ["delete"]}  # fmt: skip
    nodes = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}
    list_pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    return [
        {"kind": "Role", "metadata": {"name": "c-scaler", "namespace": NS}, "rules": [scale, pods]},
        bound("Role", "c-scaler", "c-controller", namespace=NS),
        {"kind": "ClusterRole", "metadata": {"name": "c-node-state"}, "rules": [nodes]},
        bound("ClusterRole", "c-node-state", "c-node-state"),
        {"kind": "Role", "metadata": {"name": "c-node-state", "namespace": NS},
         "rules": [list_pods]},
        bound("Role", "c-node-state", "c-node-state", namespace=NS),
    ]  # fmt: skip


def stack_objects() -> list[dict[str, Any]]:
    controller = workload(
        "StatefulSet", "c-controller", "controller", volumes=[ACCESS_VOLUME],
        containers=[
            {"name": "slurmctld", "image": "img", "volumeMounts": [
                {"name": "kube-api-access", "readOnly": True,
                 "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]},
            {"name": "munge", "image": "img"},
        ],
    )  # fmt: skip
    return [
        controller,
        workload("StatefulSet", "c-cpu", "worker", 1),
        workload("StatefulSet", "c-gpu", "worker", 0),
        workload("Deployment", "c-node-state", "node-state", automountServiceAccountToken=True),
        *rbac_objects(),
    ]


@dataclass
class Served:
    """The stand-in API served from a test's state, with each account's token."""

    api: SandboxKubeApi
    url: str
    tokens: dict[str, str]

    def call(
        self,
        method: str,
        path: str,
        account: str | None = "c-controller",
        body: object = None,
        content_type: str = "application/merge-patch+json",
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Accept": "application/json"}
        if account is not None:
            headers["Authorization"] = f"Bearer {self.tokens.get(account, 'not-a-token')}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        context = ssl.create_default_context(cafile=self.api.dir / "ca.crt")
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)


SCALE = f"/apis/apps/v1/namespaces/{NS}/statefulsets/%s/scale"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl for the stand-in's certificates")
    # The loopback /8: the stand-in's address (.8 of the subnet) is this host's.
    api = SandboxKubeApi("c", "c-net", "127.0.0.0/24", tmp_path, None)  # type: ignore[arg-type]
    api.prepare(stack_objects(), {"c-cpu": 1})
    sizes = {"c-controller": 1, "c-cpu": 1, "c-gpu": 0}
    record_sizes(api.state, stack_objects(), sizes)
    save_observed(api.state, sizes)  # as `up` leaves them
    server = serve(api.dir, api.address, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    tokens = {
        account["name"]: token
        for token, account in json.loads((api.dir / "tokens.json").read_text()).items()
    }
    try:
        yield Served(api, f"https://{api.address}:{server.server_address[1]}", tokens)
    finally:
        server.shutdown()
        server.server_close()


def test_each_account_that_mounts_a_token_gets_its_own(served: Served, tmp_path: Path) -> None:
    # The controller's projected volume and node-state's automount; the workers mount none.
    assert sorted(served.tokens) == ["c-controller", "c-node-state"]
    assert len(set(served.tokens.values())) == 2
    volume = Path(service_account_dir(str(tmp_path), NS, "c-controller"))
    assert (volume / "token").read_text() == served.tokens["c-controller"]
    assert (volume / "namespace").read_text() == NS
    assert (volume / "ca.crt").read_bytes() == (served.api.dir / "ca.crt").read_bytes()
    served.api.prepare(stack_objects())  # kept across runs
    assert json.loads((served.api.dir / "tokens.json").read_text()) == {
        token: {"namespace": NS, "name": name} for name, token in served.tokens.items()
    }


def test_no_token_or_an_unknown_one_is_unauthorized(served: Served) -> None:
    for account in (None, "c-cpu"):
        code, body = served.call("GET", SCALE % "c-cpu", account)
        assert (code, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")


def test_the_node_state_controller_reads_nodes_and_pods_and_nothing_else(served: Served) -> None:
    code, nodes = served.call("GET", "/api/v1/nodes", "c-node-state")
    assert code == 200
    assert [n["metadata"]["name"] for n in nodes["items"]] == [
        "node-c-controller-0",
        "node-c-cpu-0",
        "node-c-node-state-0",
    ]
    code, pods = served.call(
        "GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=app.kubernetes.io/component%3Dworker",
        "c-node-state",
    )  # fmt: skip
    assert code == 200
    assert [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods["items"]] == [
        ("c-cpu-0", "node-c-cpu-0")
    ]
    code, body = served.call("GET", f"/api/v1/namespaces/{NS}/secrets", "c-node-state")
    assert (code, body["message"]) == (
        403,
        'secrets is forbidden: User "system:serviceaccount:ns:c-node-state" cannot list '
        'resource "secrets" in API group "" in the namespace "ns"',
    )
    # Allowed (get nodes), then not served: the API server authorizes before it routes.
    code, body = served.call("GET", "/api/v1/nodes/node-c-cpu-0", "c-node-state")
    assert (code, body["reason"]) == (404, "NotFound")
    code, body = served.call("GET", "/api/v1/nodes", "c-controller")
    assert code == 403 and body["message"].endswith("at the cluster scope")


def test_the_scale_subresource_is_read_and_patched(served: Served) -> None:
    code, scale = served.call("GET", SCALE % "c-cpu")
    assert (code, scale) == (
        200,
        {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": "c-cpu", "namespace": NS},
            "spec": {"replicas": 1},
            "status": {
                "replicas": 1,
                "selector": "app.kubernetes.io/component=worker,app.kubernetes.io/instance=c",
            },
        },
    )
    code, scale = served.call("PATCH", SCALE % "c-cpu", body={"spec": {"replicas": 3}})
    # Desired at once; the pods that exist are the controller's to change.
    assert (code, scale["spec"], scale["status"]["replicas"]) == (200, {"replicas": 3}, 1)
    assert live_sizes(served.api.state)["c-cpu"] == 3
    code, scale = served.call(
        "PATCH", SCALE % "c-cpu", body={"spec": {"replicas": 0}, "status": {"replicas": 9}},
        content_type="application/strategic-merge-patch+json; charset=utf-8",
    )  # fmt: skip
    assert (code, scale["spec"], scale["status"]["replicas"]) == (200, {}, 1)  # 0 is omitted
    assert served.call("GET", SCALE % "c-cpu")[1]["spec"] == {}
    assert pending(served.api.state) == ["c-cpu"]  # its controller has yet to act


def test_another_pools_scale_is_forbidden_with_the_api_servers_message(served: Served) -> None:
    code, body = served.call("PATCH", SCALE % "c-gpu", body={"spec": {"replicas": 1}})
    assert code == 403
    assert body["message"] == (
        'statefulsets.apps "c-gpu" is forbidden: User "system:serviceaccount:ns:c-controller" '
        'cannot patch resource "statefulsets/scale" in API group "apps" in the namespace "ns"'
    )
    assert body["details"] == {"name": "c-gpu", "group": "apps", "kind": "statefulsets"}
    assert live_sizes(served.api.state)["c-gpu"] == 0


@pytest.mark.parametrize(
    ("body", "content_type", "code", "message"),
    [
        ({"spec": {"replicas": -1}}, "application/merge-patch+json", 422,
         'Scale.autoscaling "c-cpu" is invalid: spec.replicas: Invalid value: -1: must be '
         "greater than or equal to 0"),
        ({"spec": {"replicas": "2"}}, "application/merge-patch+json", 400,
         'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal string '
         "into Go struct field ScaleSpec.spec.replicas of type int32"),
        ({"spec": {"replicas": 2.5}}, "application/merge-patch+json", 400,
         'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal number '
         "2.5 into Go struct field ScaleSpec.spec.replicas of type int32"),
        ({"spec": {"replicas": True}}, "application/merge-patch+json", 400,
         'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal bool '
         "into Go struct field ScaleSpec.spec.replicas of type int32"),
        ({"spec": 2}, "application/merge-patch+json", 400,
         'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal number 2 '
         "into Go struct field Scale.spec of type v1.ScaleSpec"),
        ({"metadata": {"name": "c-gpu"}}, "application/merge-patch+json", 400,
         "the name of the object (c-gpu) does not match the name on the URL (c-cpu)"),
        (b"{not json", "application/merge-patch+json", 400, None),
        ([{"op": "replace", "path": "/spec/replicas", "value": 2}], "application/json-patch+json",
         415, None),
        ({"spec": {"replicas": 2}}, "application/json", 415, None),
    ],
)  # fmt: skip
def test_a_bad_patch_is_refused_and_changes_nothing(
    served: Served, body: object, content_type: str, code: int, message: str | None
) -> None:
    answered, status = served.call("PATCH", SCALE % "c-cpu", body=body, content_type=content_type)
    assert (answered, status["kind"], status["code"]) == (code, "Status", code)
    if message is not None:
        assert status["message"] == message
    assert live_sizes(served.api.state)["c-cpu"] == 1


def test_a_pod_delete_is_handed_to_the_statefulset_controller(served: Served) -> None:
    code, pod = served.call("DELETE", f"/api/v1/namespaces/{NS}/pods/c-cpu-0")
    assert code == 200
    assert (pod["kind"], pod["metadata"]["name"], pod["spec"]["nodeName"]) == (
        "Pod", "c-cpu-0", "node-c-cpu-0",
    )  # fmt: skip
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert deletions(served.api.state) == [(NS, "c-cpu-0")]
    assert served.call("DELETE", f"/api/v1/namespaces/{NS}/pods/c-cpu-0")[0] == 200  # again
    code, status = served.call("DELETE", f"/api/v1/namespaces/{NS}/pods/c-cpu-2")
    assert (code, status["message"], status["details"]) == (
        404, 'pods "c-cpu-2" not found', {"name": "c-cpu-2", "kind": "pods"},
    )  # fmt: skip
    code, status = served.call("DELETE", f"/api/v1/namespaces/{NS}/pods/c-controller-0")
    assert code == 403 and deletions(served.api.state) == [(NS, "c-cpu-0")]


def test_the_server_runs_with_its_rbac_module_beside_it(served: Served, tmp_path: Path) -> None:
    """As in its container: a bare python3, the script and kube_rbac.py in one directory."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3")
    srv = tmp_path / "srv"
    srv.mkdir()
    for source in (SERVER_SCRIPT, RBAC_MODULE):
        shutil.copy(source, srv / source.name)
    with socket.socket() as free:
        free.bind((served.api.address, 0))
        port = free.getsockname()[1]
    server = subprocess.Popen(
        [python, str(srv / SERVER_SCRIPT.name), str(served.api.dir), str(port)],
        cwd="/", env={"PATH": "/usr/bin:/bin"}, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        # It listens on all addresses; the certificate names the stand-in's.
        other = Served(served.api, f"https://{served.api.address}:{port}", served.tokens)
        deadline = time.monotonic() + 20
        while True:
            try:
                code, _ = other.call("GET", SCALE % "c-cpu")
                break
            except urllib.error.URLError:
                assert server.poll() is None, server.communicate()[1]
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert code == 200
        assert other.call("PATCH", SCALE % "c-gpu", body={"spec": {"replicas": 1}})[0] == 403
    finally:
        server.terminate()
        server.wait()
