"""Elastic StatefulSets in the sandbox (slurm_stack/sandbox/statefulsets.py and
statefulset_controller.py): the size an `up` runs them at (Pulumi's ignoreChanges on
spec.replicas), what a size change starts and stops, the ServiceAccount volume slurmctld
mounts, and, on real podman, the StatefulSet controller stand-in following the stand-in API's
scale subresource and pod deletes as Kubernetes' controller does."""

import copy
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_stack.sandbox import session
from slurm_stack.sandbox.kube_api import PORT, SERVICE_ACCOUNT_DIR, service_account_dir
from slurm_stack.sandbox.plan import plan
from slurm_stack.sandbox.podman import Podman
from slurm_stack.sandbox.session import Sandbox
from slurm_stack.sandbox.stack import SandboxStack
from slurm_stack.sandbox.state import SandboxState
from slurm_stack.sandbox.statefulsets import (
    POWER_SAVING,
    SCALED_BY_ANNOTATION,
    SizeChange,
    controller_pid,
    deletions,
    forget_statefulsets,
    kept_addresses,
    live_sizes,
    lost_pods,
    pending,
    planned_sizes,
    record_sizes,
    save_lost,
    save_observed,
    settled,
    size_change,
    size_file,
)
from slurm_stack.spec import load_spec
from slurm_stack.spec.models import IMAGE_REVISION
from tests.conftest import DEV_STACK
from tests.test_sandbox_kube_api import ACCESS_VOLUME, rbac_objects

NS = "ns"


def statefulset(
    name: str,
    replicas: int,
    *,
    elastic: bool = True,
    component: str = "worker",
    policy: str = "Parallel",
    **pod: Any,
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": component, "app.kubernetes.io/instance": name}
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if elastic:
        meta["annotations"] = {SCALED_BY_ANNOTATION: POWER_SAVING}
    spec = {
        "serviceAccountName": name,
        "automountServiceAccountToken": False,
        "containers": [{"name": "main", "image": "img"}],
        **pod,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


# -- the size an `up` runs a StatefulSet at ------------------------------------------------------


def test_an_up_takes_the_manifests_size_at_creation_and_the_live_one_after() -> None:
    objects = [statefulset("c-cpu", 1), statefulset("c-base", 2, elastic=False)]
    assert planned_sizes(objects, {}) == {"c-cpu": 1, "c-base": 2}  # created now
    # The scaler grew c-cpu, someone patched c-base: the elastic one keeps its live size.
    assert planned_sizes(objects, {"c-cpu": 3, "c-base": 5}) == {"c-cpu": 3, "c-base": 2}
    # The stack's replicas change: ignored for the elastic one (ignoreChanges), taken else.
    changed = [statefulset("c-cpu", 0), statefulset("c-base", 1, elastic=False)]
    assert planned_sizes(changed, {"c-cpu": 3, "c-base": 2}) == {"c-cpu": 3, "c-base": 1}
    # Elastic to fixed: the manifest's replicas again; fixed to elastic: the live size stays.
    swapped = [statefulset("c-cpu", 2, elastic=False), statefulset("c-base", 4)]
    assert planned_sizes(swapped, {"c-cpu": 3, "c-base": 2}) == {"c-cpu": 2, "c-base": 2}


@pytest.mark.parametrize(
    ("size", "existing", "lost", "expected"),
    [
        (3, ["c-cpu-0"], [], SizeChange(start=("c-cpu-1", "c-cpu-2"))),
        (1, ["c-cpu-0", "c-cpu-1", "c-cpu-2"], [], SizeChange(stop=("c-cpu-2", "c-cpu-1"))),
        (0, ["c-cpu-0"], [], SizeChange(stop=("c-cpu-0",))),
        (2, ["c-cpu-0", "c-cpu-1"], [], SizeChange()),
        # A pod missing below the size is started, lowest ordinal first.
        (3, ["c-cpu-2"], [], SizeChange(start=("c-cpu-0", "c-cpu-1"))),
        # Ordinals sort as numbers; other StatefulSets' pods are not this one's.
        (9, [f"c-cpu-{i}" for i in range(11)] + ["c-cpu-big-0", "c-gpu-3", "login-0"], [],
         SizeChange(stop=("c-cpu-10", "c-cpu-9"))),
        (0, ["c-cpu-big-0"], [], SizeChange()),
        # A lost pod's object stays: not started again; forgotten once beyond the size.
        (3, ["c-cpu-0"], ["c-cpu-1"], SizeChange(start=("c-cpu-2",))),
        (1, ["c-cpu-0"], ["c-cpu-1", "c-cpu-3"], SizeChange(forget=("c-cpu-1", "c-cpu-3"))),
    ],
)  # fmt: skip
def test_a_size_change_starts_missing_ordinals_and_stops_from_the_highest(
    size: int, existing: list[str], lost: list[str], expected: SizeChange
) -> None:
    assert size_change("c-cpu", size, existing, lost) == expected


def test_elastic_pods_keep_their_addresses_whatever_their_size() -> None:
    objects = [statefulset("c-cpu", 1), statefulset("c-base", 1, elastic=False)]
    ips = {"c-cpu-0": "a", "c-cpu-7": "b", "c-base-3": "c", "c-cpu-x": "d", "login-0": "e"}
    assert kept_addresses(ips, objects) == {"c-cpu-0": "a", "c-cpu-7": "b"}
    # A pod planned now never takes an address kept for one that may come back.
    planned = plan(objects, "/state", ips={"c-cpu-5": "10.89.7.10", "c-base-0": "10.89.7.11"})
    assert {p.name: p.ip for p in planned.pods} == {
        "c-base-0": "10.89.7.11",
        "c-cpu-0": "10.89.7.12",
    }


# -- the live sizes, and what is left to do ------------------------------------------------------


def test_live_sizes_follow_an_up_and_what_the_api_writes(tmp_path: Path) -> None:
    state = SandboxState(tmp_path)
    objects = [statefulset("c-cpu", 1), statefulset("c-gpu", 0)]
    record_sizes(state, objects, {"c-cpu": 1, "c-gpu": 0})
    save_observed(state, {"c-cpu": 1, "c-gpu": 0})
    assert live_sizes(state) == {"c-cpu": 1, "c-gpu": 0}
    assert settled(state)
    size_file(state, NS, "c-gpu").write_text('{"replicas": 2}')  # a PATCH
    (state.kube_api_live_dir / "deletions" / NS / "c-cpu-0").write_text("{}")  # a DELETE
    assert pending(state) == ["c-gpu", "ns/c-cpu-0"] and not settled(state)
    assert deletions(state) == [(NS, "c-cpu-0")]
    # The next `up`: the live size stays, a StatefulSet gone from the stack is deleted.
    record_sizes(state, [objects[1]], planned_sizes([objects[1]], live_sizes(state)))
    assert live_sizes(state) == {"c-gpu": 2}
    save_lost(state, {"c-gpu-1"})
    forget_statefulsets(state)  # `down`
    assert live_sizes(state) == {} and deletions(state) == [] and lost_pods(state) == set()
    assert settled(state)


# -- the ServiceAccount volume and the API's address ---------------------------------------------


def controller_statefulset(volume: dict[str, Any] = ACCESS_VOLUME) -> dict[str, Any]:
    mount = {"name": volume["name"], "readOnly": True, "mountPath": SERVICE_ACCOUNT_DIR}
    return statefulset(
        "c-controller", 1, elastic=False, component="controller", volumes=[volume],
        containers=[{"name": "slurmctld", "image": "img", "volumeMounts": [mount]},
                    {"name": "munge", "image": "img"}],
    )  # fmt: skip


def test_the_projected_token_volume_is_the_accounts_and_mounted_where_the_pod_says() -> None:
    [pod] = plan([controller_statefulset()], "/state", "10.89.7.0/24").pods
    slurmctld, munge = pod.containers
    account = service_account_dir("/state", NS, "c-controller")
    assert [(m.source, m.target, m.read_only) for m in slurmctld.mounts] == [
        (account, SERVICE_ACCOUNT_DIR, True)
    ]
    assert munge.mounts == ()
    for container in (slurmctld, munge):  # the kubelet sets them in every container
        assert dict(container.env) == {
            "KUBERNETES_SERVICE_HOST": "10.89.7.8",
            "KUBERNETES_SERVICE_PORT": str(PORT),
        }
    assert account not in pod.fs_group_dirs  # shared by the account's pods


def test_an_automounted_token_is_its_accounts_in_every_container() -> None:
    node_state = statefulset(
        "c-node-state", 1, elastic=False, component="node-state",
        automountServiceAccountToken=True,
        containers=[{"name": "a", "image": "img"}, {"name": "b", "image": "img"}],
    )  # fmt: skip
    [pod] = plan([node_state], "/state").pods
    for container in pod.containers:
        [mount] = container.mounts
        assert (mount.source, mount.target) == (
            service_account_dir("/state", NS, "c-node-state"),
            SERVICE_ACCOUNT_DIR,
        )


@pytest.mark.parametrize(
    "source",
    [
        {"serviceAccountToken": {"path": "other-token"}},
        {"configMap": {"name": "site-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "x", "path": "x"}]}},
        {"downwardAPI": {"items": [{"path": "pod", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"secret": {"name": "s"}},
    ],
)
def test_a_projected_volume_of_another_shape_is_refused(source: dict[str, Any]) -> None:
    volume = copy.deepcopy(ACCESS_VOLUME)
    volume["projected"]["sources"].append(source)
    with pytest.raises(ValueError, match="projects a ServiceAccount token volume"):
        plan([controller_statefulset(volume)], "/state")


# -- `up` keeps the live size (the plan of a sandbox) --------------------------------------------


def stack_objects(cpu_replicas: int = 1, *, cpu_elastic: bool = True) -> list[dict[str, Any]]:
    return [
        controller_statefulset(),
        statefulset("c-cpu", cpu_replicas, elastic=cpu_elastic),
        statefulset("c-gpu", 0),
        *rbac_objects(),
    ]


class Rendered:
    """Stands in for the stack program: `Sandbox.render` gets ``objects``."""

    def __init__(self, objects: list[dict[str, Any]], name: str = "c") -> None:
        cluster = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
        self.spec = load_spec({**cluster, "name": name})
        self.objects = objects

    def __call__(self, *_: object) -> SandboxStack:
        return SandboxStack(self.spec, copy.deepcopy(self.objects), {})


def sandbox_of(tmp_path: Path, name: str = "c") -> Sandbox:
    stack_file = tmp_path / "stacks" / f"Pulumi.{name}.yaml"
    stack_file.parent.mkdir(parents=True, exist_ok=True)
    stack_file.write_text(yaml.safe_dump({"config": {"slurm-stack:cluster": {"name": name}}}))
    return Sandbox(stack_file, state_base=tmp_path / "state", log=lambda _: None)


def pod_names(sandbox: Sandbox, workload: str) -> list[str]:
    return [p.name for p in sandbox.current_plan.pods if p.statefulset == workload]


def test_a_sandbox_plans_elastic_pools_at_their_live_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = Rendered(stack_objects())
    monkeypatch.setattr(session, "render_for_sandbox", rendered)
    first = sandbox_of(tmp_path)
    first.render()
    assert pod_names(first, "c-cpu") == ["c-cpu-0"] and pod_names(first, "c-gpu") == []
    record_sizes(first.state, rendered.objects, first._sizes)  # what `up` records
    # The scaler grows c-cpu and c-gpu: a sandbox that had planned sees them (re-planned).
    size_file(first.state, NS, "c-cpu").write_text('{"replicas": 3}')
    size_file(first.state, NS, "c-gpu").write_text('{"replicas": 1}')
    assert pod_names(first, "c-cpu") == ["c-cpu-0", "c-cpu-1", "c-cpu-2"]
    assert first.node_container("c-gpu-0") == "c-gpu-0--main"
    # A new render with the stack's replicas changed plans the same pods (ignoreChanges).
    rendered.objects = stack_objects(cpu_replicas=2)
    again = sandbox_of(tmp_path)
    again.render()
    assert pod_names(again, "c-cpu") == ["c-cpu-0", "c-cpu-1", "c-cpu-2"]
    addresses = {p.name: p.ip for p in again.current_plan.pods}
    # Scaled down, c-cpu-2 keeps its address for when it comes back.
    size_file(first.state, NS, "c-cpu").write_text('{"replicas": 1}')
    assert pod_names(again, "c-cpu") == ["c-cpu-0"]
    assert again.state.load_ips()["c-cpu-2"] == addresses["c-cpu-2"]
    # Elastic no more: the stack's replicas.
    rendered.objects = stack_objects(cpu_replicas=2, cpu_elastic=False)
    fixed = sandbox_of(tmp_path)
    fixed.render()
    assert pod_names(fixed, "c-cpu") == ["c-cpu-0", "c-cpu-1"]
    # After `down` (the StatefulSets deleted), the next `up` creates them at the stack's size.
    rendered.objects = stack_objects()
    forget_statefulsets(fixed.state)
    fresh = sandbox_of(tmp_path)
    fresh.render()
    assert pod_names(fresh, "c-cpu") == ["c-cpu-0"] and pod_names(fresh, "c-gpu") == []


# -- the controller on real podman ---------------------------------------------------------------

E2E = "sctest"  # its pods and network are named after it; subnet_for gives it 10.89.190.0/24
BASE_IMAGE = f"localhost/slurm-stack/base:26.05-{IMAGE_REVISION}"
API_IMAGE = f"localhost/slurm-stack/controller:26.05-{IMAGE_REVISION}"  # has python3
# A worker that notes its start, its preStop hook and its SIGTERM in a file named after it.
WORKER = (
    "m=/marks/$(hostname); echo start >>$m; trap 'echo term >>$m; exit 0' TERM; "
    "while :; do sleep 60 & wait $!; done"
)


def e2e_objects() -> list[dict[str, Any]]:
    controller = controller_statefulset()
    controller["metadata"]["name"] = "sctest-controller"
    pod = controller["spec"]["template"]["spec"]
    pod["serviceAccountName"] = "sctest-controller"
    pod["terminationGracePeriodSeconds"] = 1
    for container in pod["containers"]:
        container.update(image=API_IMAGE, command=["sh", "-c", "exec sleep infinity"])
    marks = {"name": "marks", "mountPath": "/marks"}
    worker = statefulset(
        "sctest-cpu", 1, terminationGracePeriodSeconds=3,
        volumes=[{"name": "marks", "hostPath": {"path": "/marks"}}],
        containers=[{
            "name": "main", "image": BASE_IMAGE, "command": ["sh", "-c", WORKER],
            "volumeMounts": [marks],
            "lifecycle": {"preStop": {"exec": {"command": [
                "sh", "-c", "echo prestop >>/marks/$(hostname)"]}}},
        }],
    )  # fmt: skip
    scaler = {
        "kind": "Role",
        "metadata": {"name": "sctest-scaler", "namespace": NS},
        "rules": [
            {"apiGroups": ["apps"], "resources": ["statefulsets/scale"],
             "resourceNames": ["sctest-cpu"], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["pods"],
             "resourceNames": [f"sctest-cpu-{i}" for i in range(4)], "verbs": ["delete"]},
        ],
    }  # fmt: skip
    binding = {
        "kind": "RoleBinding",
        "metadata": {"name": "sctest-scaler", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "sctest-scaler"},
        "subjects": [{"kind": "ServiceAccount", "name": "sctest-controller", "namespace": NS}],
    }  # fmt: skip
    return [controller, worker, scaler, binding]


class Scaler:
    """The elastic scaler's side: the controller's token, over HTTPS to the stand-in."""

    def __init__(self, sandbox: Sandbox) -> None:
        account = Path(service_account_dir(str(sandbox.state.root), NS, "sctest-controller"))
        self.token = (account / "token").read_text()
        self.context = ssl.create_default_context(cafile=account / "ca.crt")
        self.url = f"https://{sandbox.kube_api().address}:{PORT}"

    def call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/merge-patch+json"
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        with urllib.request.urlopen(request, context=self.context, timeout=10) as answer:
            return dict(json.load(answer))

    def scale(self, replicas: int) -> dict[str, Any]:
        path = f"/apis/apps/v1/namespaces/{NS}/statefulsets/sctest-cpu/scale"
        return self.call("PATCH", path, {"spec": {"replicas": replicas}})


def wait_until(what: str, check: Callable[[], object], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def e2e(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    for image in (BASE_IMAGE, API_IMAGE):
        if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
            pytest.skip(f"{image} is not built here (images/build.sh)")
    monkeypatch.setattr(session, "render_for_sandbox", Rendered(e2e_objects(), E2E))
    sandbox = sandbox_of(tmp_path, E2E)
    sandbox.down(delete_data=True)  # a run that was killed may have left its pods
    try:
        yield sandbox_of(tmp_path, E2E)
    finally:
        sandbox_of(tmp_path, E2E).down(delete_data=True)


def test_the_controller_follows_the_scale_subresource_and_pod_deletes(e2e: Sandbox) -> None:
    podman = Podman()
    marks = e2e.state.root / "hostpath" / "marks"

    def pods() -> list[str]:
        listed = podman.labelled("pod", f"slurm-stack.io/sandbox={E2E}")
        return sorted(str(p["Name"]) for p in listed if str(p["Name"]).startswith("sctest-cpu"))

    def lines(pod: str) -> list[str]:
        path = marks / pod
        return path.read_text().split() if path.exists() else []

    report = e2e.up(build=False)
    assert report.created == ("sctest-controller-0", "sctest-cpu-0")
    assert controller_pid(e2e.state) is not None
    scaler = Scaler(e2e)

    # Grown by the scaler: both new pods start, as `up` starts pods (a re-run keeps them).
    assert scaler.scale(3)["spec"] == {"replicas": 3}
    wait_until("the pool grown", lambda: settled(e2e.state) and len(pods()) == 3)
    assert pods() == ["sctest-cpu-0", "sctest-cpu-1", "sctest-cpu-2"]
    wait_until("the new pods running", lambda: lines("sctest-cpu-2") == ["start"])
    path = f"/apis/apps/v1/namespaces/{NS}/statefulsets/sctest-cpu/scale"
    assert scaler.call("GET", path)["status"]["replicas"] == 3
    again = e2e.up(build=False)
    assert (again.created, again.removed) == ((), ())
    assert "sctest-cpu-2" in again.kept
    assert e2e.node_container("sctest-cpu-2") == "sctest-cpu-2--main"

    # Shrunk: highest ordinal first, each after its preStop hook and SIGTERM.
    scaler.scale(1)
    wait_until("the pool shrunk", lambda: settled(e2e.state) and pods() == ["sctest-cpu-0"])
    assert lines("sctest-cpu-2") == lines("sctest-cpu-1") == ["start", "prestop", "term"]
    log = e2e.state.controller_log.read_text()
    assert log.index("sctest-cpu-2: preStop") < log.index("sctest-cpu-1: preStop")
    assert "StatefulSet sctest-cpu: size 3 -> 1; stopping sctest-cpu-2, sctest-cpu-1" in log

    # A pod deleted through the API is stopped as the apply stops it, then started again.
    scaler.call("DELETE", f"/api/v1/namespaces/{NS}/pods/sctest-cpu-0")
    wait_until("the pod back", lambda: settled(e2e.state) and len(lines("sctest-cpu-0")) == 4)
    assert lines("sctest-cpu-0") == ["start", "prestop", "term", "start"]
    with pytest.raises(urllib.error.HTTPError, match="403"):
        scaler.call("DELETE", f"/api/v1/namespaces/{NS}/pods/sctest-controller-0")

    # A pod killed to stay gone (a lost node) is not started by a size change; `restore` does.
    e2e.kill_pod("sctest-cpu-0", come_back=False)
    scaler.scale(2)
    wait_until("the pool grown", lambda: settled(e2e.state) and pods() == ["sctest-cpu-1"])
    assert e2e.restore().created == ("sctest-cpu-0",)
    assert pods() == ["sctest-cpu-0", "sctest-cpu-1"]

    e2e.down()
    assert controller_pid(e2e.state) is None and live_sizes(e2e.state) == {}
