"""The node-state controller's decisions: which Slurm nodes a Kubernetes node's state
drains or resumes, and that it never touches anybody else's drain."""

import pytest
from slurm_stack_healthchecks.drain import Action, Owner, decide
from slurm_stack_healthchecks.node_state import (
    KubeNode,
    NodeStateConfig,
    parse_nodes,
    parse_pods,
    wanted_reasons,
)
from slurm_stack_healthchecks.slurm_node import NodeState


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
                {"metadata": {"name": "dev-cpu-0"}, "spec": {"nodeName": "a"}},
                {"metadata": {"name": "dev-cpu-1"}, "spec": {}},  # Pending, not scheduled
            ]
        }
    )
    assert pods == {"dev-cpu-0": "a"}


def test_each_pod_wants_the_reason_of_its_node() -> None:
    nodes = {
        "a": KubeNode("a", False, True),
        "b": KubeNode("b", True, True),
        "c": KubeNode("c", False, False),
        "d": KubeNode("d", True, False),
    }
    pods = {"w-0": "a", "w-1": "b", "w-2": "c", "w-3": "d", "w-4": "gone"}
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
    with pytest.raises(ValueError, match="NODE_STATE_POD_SELECTOR is not set"):
        NodeStateConfig.from_environ({"NODE_STATE_NAMESPACE": "slurm"})
    with pytest.raises(ValueError, match="positive"):
        NodeStateConfig.from_environ({**environ, "NODE_STATE_INTERVAL_SECONDS": "0"})


def test_the_probes_watch_the_file_the_loop_touches() -> None:
    from slurm_stack_healthchecks import node_state

    from slurm_stack.k8s import node_state as rendered

    assert rendered.HEARTBEAT_FILE == node_state.HEARTBEAT_FILE
