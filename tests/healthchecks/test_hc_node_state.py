"""The node-state controller's decisions: which Slurm nodes a Kubernetes node's state
drains or resumes, and that it never touches anybody else's drain."""

import pytest
from slurm_stack_healthchecks.drain import Action, Owner, decide
from slurm_stack_healthchecks.node_labels import (
    Placement,
    PoolLabels,
    merged_features,
    placement,
)
from slurm_stack_healthchecks.node_state import (
    KubeNode,
    NodeStateConfig,
    PlacedPod,
    parse_nodes,
    parse_pods,
    wanted_reasons,
)
from slurm_stack_healthchecks.slurm_node import NodeState, parse_node_oneliner


def node(name: str, unschedulable: bool | None = None, ready: str = "True") -> dict:
    spec = {} if unschedulable is None else {"unschedulable": unschedulable}
    conditions = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "spec": spec, "status": {"conditions": conditions}}


def test_nodes_are_read_from_a_node_list() -> None:
    listed = parse_nodes(
        {
            "items": [
                node("a"),
                node("b", unschedulable=True),
                node("c", ready="False"),
                node("d", ready="Unknown"),
                {"metadata": {"name": "e"}},  # no status yet: not Ready
            ]
        }
    )
    assert listed == {
        "a": KubeNode("a", False, True),
        "b": KubeNode("b", True, True),
        "c": KubeNode("c", False, False),
        "d": KubeNode("d", False, False),
        "e": KubeNode("e", False, False),
    }


def test_only_scheduled_pods_count() -> None:
    pods = parse_pods(
        {
            "items": [
                {
                    "metadata": {"name": "dev-cpu-0", "labels": {"pool": "cpu"}},
                    "spec": {"nodeName": "a"},
                },
                {"metadata": {"name": "dev-cpu-1"}, "spec": {}},  # Pending, not scheduled
            ]
        },
        "pool",
    )
    assert pods == {"dev-cpu-0": PlacedPod("a", "cpu")}


def test_each_pod_wants_the_reason_of_its_node() -> None:
    nodes = {
        "a": KubeNode("a", False, True),
        "b": KubeNode("b", True, True),
        "c": KubeNode("c", False, False),
        "d": KubeNode("d", True, False),
    }
    pods = {p: PlacedPod(n) for p, n in [("w-0", "a"), ("w-1", "b"), ("w-2", "c")]}
    pods |= {"w-3": PlacedPod("d"), "w-4": PlacedPod("gone")}
    assert wanted_reasons(nodes, pods) == {
        "w-0": None,
        "w-1": "k8s: node b cordoned",
        "w-2": "k8s: node c NotReady",
        "w-3": "k8s: node d cordoned",  # both: cordoned says what an admin did
    }


@pytest.mark.parametrize(
    ("state", "wanted", "action"),
    [
        (NodeState("IDLE", None), "k8s: node b cordoned", Action.DRAIN),
        (NodeState("IDLE+DRAIN", "k8s: node b cordoned"), "k8s: node b cordoned", Action.NONE),
        (NodeState("IDLE+DRAIN", "k8s: node b cordoned"), "k8s: node b NotReady", Action.DRAIN),
        (NodeState("IDLE+DRAIN", "k8s: node b cordoned"), None, Action.RESUME),
        (NodeState("MIXED+DRAIN", "admin: new disks"), "k8s: node b cordoned", Action.NONE),
        (NodeState("MIXED+DRAIN", "admin: new disks"), None, Action.NONE),
        (NodeState("IDLE+DRAIN", "healthcheck: gpu_count 7/8"), None, Action.NONE),
        (NodeState("IDLE", None), None, Action.NONE),
    ],
)
def test_k8s_reasons_are_its_own_and_no_one_elses(
    state: NodeState, wanted: str | None, action: Action
) -> None:
    assert decide(state, wanted, Owner.K8S).action is action


def test_the_health_checks_never_resume_a_k8s_drain() -> None:
    drained = NodeState("IDLE+DRAIN", "k8s: node b cordoned")
    assert decide(drained, None, Owner.QUICK).action is Action.NONE
    assert decide(drained, None, Owner.NCCL).action is Action.NONE


def test_the_config_comes_from_the_environment() -> None:
    environ = {
        "NODE_STATE_NAMESPACE": "slurm",
        "NODE_STATE_POD_SELECTOR": "app=x",
        "NODE_STATE_INTERVAL_SECONDS": "5",
    }
    assert NodeStateConfig.from_environ(environ) == NodeStateConfig("slurm", "app=x", 5.0)
    pools = '{"gpu":{"switchLabel":"sw","rootSwitch":"spine","features":{"k8s-zone-":"z"}}}'
    read = NodeStateConfig.from_environ(
        {**environ, "NODE_STATE_POOLS": pools, "NODE_STATE_POOL_LABEL": "slurm-stack.io/pool"}
    )
    assert read.pools == {"gpu": PoolLabels("sw", "spine", {"k8s-zone-": "z"})}
    assert read.pool_label == "slurm-stack.io/pool"
    with pytest.raises(ValueError, match="NODE_STATE_POOL_LABEL is not set"):
        NodeStateConfig.from_environ({**environ, "NODE_STATE_POOLS": pools})
    with pytest.raises(ValueError, match="NODE_STATE_POOLS is not JSON"):
        NodeStateConfig.from_environ({**environ, "NODE_STATE_POOLS": "{"})
    with pytest.raises(ValueError, match="NODE_STATE_POD_SELECTOR is not set"):
        NodeStateConfig.from_environ({"NODE_STATE_NAMESPACE": "slurm"})
    with pytest.raises(ValueError, match="positive"):
        NodeStateConfig.from_environ({**environ, "NODE_STATE_INTERVAL_SECONDS": "0"})


def test_the_probes_watch_the_file_the_loop_touches() -> None:
    from slurm_stack_healthchecks import node_state

    from slurm_stack.k8s import node_state as rendered

    assert rendered.HEARTBEAT_FILE == node_state.HEARTBEAT_FILE


SWITCHED = PoolLabels("example.com/leaf", "spine", {"k8s-zone-": "topology.kubernetes.io/zone"})


@pytest.mark.parametrize(
    ("labels", "features", "topology", "problem"),
    [
        (
            {"example.com/leaf": "leaf-a", "topology.kubernetes.io/zone": "z1"},
            ("k8s-zone-z1",),
            "default:spine:leaf-a",
            None,
        ),
        ({}, (), None, "k8s: node n1 has no label example.com/leaf"),
        (
            {"example.com/leaf": "spine"},
            (),
            None,
            "k8s: node n1 label example.com/leaf:'spine' is no leaf switch name",
        ),
        (
            {"example.com/leaf": "", "topology.kubernetes.io/zone": ""},
            (),
            None,
            "k8s: node n1 label example.com/leaf:'' is no leaf switch name",
        ),
    ],
)
def test_labels_say_where_a_node_belongs(
    labels: dict, features: tuple, topology: str | None, problem: str | None
) -> None:
    assert placement(SWITCHED, "n1", labels) == Placement(features, topology, problem)


def test_a_label_problem_drains_but_a_cordon_says_so_first() -> None:
    nodes = {
        "a": KubeNode("a", False, True, {"example.com/leaf": "leaf-a"}),
        "b": KubeNode("b", False, True, {}),
        "c": KubeNode("c", True, True, {}),
    }
    pods = {"w-0": PlacedPod("a", "gpu"), "w-1": PlacedPod("b", "gpu")}
    pods |= {"w-2": PlacedPod("c", "gpu"), "x-0": PlacedPod("b", "cpu")}
    assert wanted_reasons(nodes, pods, {"gpu": SWITCHED}) == {
        "w-0": None,
        "w-1": "k8s: node b has no label example.com/leaf",
        "w-2": "k8s: node c cordoned",
        "x-0": None,  # a pool without labels is not drained for missing ones
    }


def test_only_the_k8s_features_are_replaced() -> None:
    assert merged_features(["gpu", "k8s-zone-a", "nvme"], ["k8s-zone-b"]) == [
        "gpu",
        "nvme",
        "k8s-zone-b",
    ]
    assert merged_features(["gpu", "k8s-zone-a"], []) == ["gpu"]


def test_features_and_topology_are_read_from_scontrol() -> None:
    line = (
        "NodeName=w-0 Arch=x86_64 CoresPerSocket=1 AvailableFeatures=gpu,k8s-zone-a "
        "ActiveFeatures=gpu,k8s-zone-a Gres=(null) State=IDLE+DRAIN Topology=default:spine:leaf-a "
        "Reason=k8s: awaiting its switch [slurm@2026-11-27T03:00:00]"
    )
    state = parse_node_oneliner(line)
    assert state.features == ("gpu", "k8s-zone-a")
    assert state.topology == "default:spine:leaf-a"
    assert state.reason == "k8s: awaiting its switch"
    assert parse_node_oneliner("NodeName=x AvailableFeatures=(null) State=IDLE").features == ()


def test_the_controller_and_the_renderer_agree_on_the_feature_prefix() -> None:
    from slurm_stack_healthchecks import node_labels

    from slurm_stack import naming

    assert naming.LABEL_FEATURE_PREFIX == node_labels.LABEL_FEATURE_PREFIX
    assert naming.AWAITING_SWITCH_REASON.startswith("k8s:")
