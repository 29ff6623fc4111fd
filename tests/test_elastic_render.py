"""What the program creates for an elastic pool (tests/cluster/Pulumi.elastic.yaml), run under
the mock engine: the StatefulSet whose live size `pulumi up` leaves alone, the scaler's Role
and token, and the power-saving settings in slurm.conf. The behaviour on real Slurm is
tests/cluster/test_elastic.py's."""

import json
from pathlib import Path

import pytest

from slurm_stack.offline import ProgramRun
from slurm_stack.offline.render import run_stack
from slurm_stack.render import render_elastic_config, slurm_config_files
from slurm_stack.spec import load_spec

STACK = Path(__file__).resolve().parent / "cluster" / "Pulumi.elastic.yaml"
STATEFULSET = "kubernetes:apps/v1:StatefulSet"


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return run_stack(STACK)


def statefulset(run: ProgramRun, name: str):  # type: ignore[no-untyped-def]
    found = [r for r in run.of_type(STATEFULSET) if r.inputs["metadata"]["name"] == name]
    assert len(found) == 1
    return found[0]


def test_an_elastic_pools_live_size_is_left_alone_by_an_update(run: ProgramRun) -> None:
    elastic, fixed = statefulset(run, "elastic-cpu"), statefulset(run, "elastic-base")
    assert elastic.ignore_changes == ("spec.replicas",)
    assert fixed.ignore_changes == ()
    assert elastic.inputs["spec"]["replicas"] == 0  # minReplicas: no pod at creation
    annotations = elastic.inputs["metadata"]["annotations"]
    assert annotations["slurm-stack.io/scaled-by"] == "slurm-power-saving"
    assert "slurm-stack.io/scaled-by" not in fixed.inputs["metadata"]["annotations"]


def test_the_scalers_role_is_the_scale_of_its_pools_and_their_pods_by_name(
    run: ProgramRun,
) -> None:
    (role,) = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
    assert role.inputs["metadata"]["name"] == "elastic-elastic-scaler"
    assert role.inputs["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["statefulsets/scale"],
            "resourceNames": ["elastic-cpu"],
            "verbs": ["get", "patch"],
        },
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "resourceNames": ["elastic-cpu-0", "elastic-cpu-1", "elastic-cpu-2"],
            "verbs": ["delete"],
        },
    ]
    (binding,) = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert binding.inputs["roleRef"]["name"] == "elastic-elastic-scaler"
    assert binding.inputs["subjects"] == [
        {"kind": "ServiceAccount", "name": "elastic-controller", "namespace": "slurm-elastic"}
    ]


def test_the_token_is_mounted_in_the_slurmctld_container_alone(run: ProgramRun) -> None:
    pod = statefulset(run, "elastic-controller").inputs["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "elastic-controller"
    volume = next(v for v in pod["volumes"] if v["name"] == "kube-api-access")
    sources = volume["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    mounting = [
        c["name"]
        for c in containers
        if any(m["name"] == "kube-api-access" for m in c.get("volumeMounts", []))
    ]
    assert mounting == ["slurmctld"]
    for other in run.of_type(STATEFULSET):
        if other.inputs["metadata"]["name"] != "elastic-controller":
            volumes = other.inputs["spec"]["template"]["spec"].get("volumes", [])
            assert not [v for v in volumes if v["name"] == "kube-api-access"]


def spec_with(**elastic: int):  # type: ignore[no-untyped-def]
    import yaml

    raw = yaml.safe_load(STACK.read_text())["config"]["slurm-stack:cluster"]
    pool = next(p for p in raw["workerPools"] if p["name"] == "cpu")
    pool["elastic"].update(elastic)
    return load_spec(raw)


def test_slurm_conf_powers_down_the_elastic_pool_alone() -> None:
    conf = slurm_config_files(spec_with(minReplicas=2))["slurm.conf"]
    lines = conf.splitlines()
    assert "ResumeProgram=/usr/lib/slurm-stack/elastic-resume" in lines
    assert "SuspendProgram=/usr/lib/slurm-stack/elastic-suspend" in lines
    assert "ResumeFailProgram=/usr/lib/slurm-stack/elastic-resume-fail" in lines
    assert "SuspendExcNodes=elastic-cpu-[0-1]" in lines
    assert (
        "SlurmctldParameters=enable_configless,idle_on_node_suspend,power_save_interval=1"
    ) in lines
    assert (
        "PartitionName=elastic-cpu Nodes=cpu Hidden=YES State=INACTIVE Default=NO "
        "SuspendTime=5 ResumeTimeout=30"
    ) in lines
    # The global SuspendTime stays INFINITE: the fixed pool's nodes never power down.
    assert not [line for line in lines if line.startswith("SuspendTime=")]


def test_a_cluster_without_elastic_pools_has_no_power_saving() -> None:
    import yaml

    raw = yaml.safe_load(STACK.read_text())["config"]["slurm-stack:cluster"]
    for pool in raw["workerPools"]:
        pool.pop("elastic", None)
    files = slurm_config_files(load_spec(raw))
    assert "elastic.json" not in files
    for key in ("ResumeProgram=", "SuspendProgram=", "ResumeFailProgram=", "SuspendExcNodes=",
                "SuspendTime=", "PartitionName=elastic-cpu", "idle_on_node_suspend"):  # fmt: skip
        assert f"\n{key}" not in files["slurm.conf"] and f",{key}" not in files["slurm.conf"]
    assert "SlurmctldParameters=enable_configless\n" in files["slurm.conf"]


def test_the_scalers_config_names_each_pool_and_its_node_settings() -> None:
    config = json.loads(render_elastic_config(spec_with(minReplicas=1)))
    assert config == {
        "namespace": "slurm-elastic",
        "pools": [
            {
                "name": "cpu",
                "statefulSet": "elastic-cpu",
                "minReplicas": 1,
                "maxReplicas": 3,
                "nodeConf": "Feature=cpu Weight=1 RealMemory=486 CPUs=1",
                "startTimeoutSeconds": 30,
            }
        ],
    }
