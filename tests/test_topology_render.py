"""Network topology: what `topology` and each pool's `switch` or `switchLabel` render
(topology/tree), and what the node-state controller is told of node labels."""

import json
import shlex
from typing import Any

from slurm_stack.k8s.common import POOL_LABEL
from slurm_stack.k8s.node_state import node_state_deployment
from slurm_stack.k8s.workers import pool_statefulset
from slurm_stack.naming import AWAITING_SWITCH_REASON, UNPLACED_SWITCH
from slurm_stack.render import content_hash, slurm_config_files
from slurm_stack.spec import load_spec


def _raw(**extra: Any) -> dict[str, Any]:
    return {
        "name": "topo",
        "jail": {"storageClass": "cephfs"},
        "workerPools": [
            {"name": "a", "replicas": 2},
            {"name": "b", "replicas": 2},
            {"name": "c", "replicas": 1},
        ],
        "partitions": [{"name": "main", "default": True}],
        **extra,
    }


def _with_topology() -> dict[str, Any]:
    raw = _raw(topology={"rootSwitch": "spine"})
    for pool, switch in zip(raw["workerPools"], ("leaf-1", "leaf-2", "leaf-1"), strict=True):
        pool["switch"] = switch
    return raw


def test_topology_conf_declares_each_leaf_once_under_the_root() -> None:
    files = slurm_config_files(load_spec(_with_topology()))
    lines = [line for line in files["topology.conf"].splitlines() if not line.startswith("#")]
    assert lines == [
        "SwitchName=leaf-1",
        "SwitchName=leaf-2",
        "SwitchName=spine Switches=leaf-1,leaf-2",
    ]
    assert "TopologyPlugin=topology/tree" in files["slurm.conf"].splitlines()


def test_each_node_joins_its_pools_leaf_as_it_registers() -> None:
    spec = load_spec(_with_topology())
    for pool, leaf in zip(spec.worker_pools, ("leaf-1", "leaf-2", "leaf-1"), strict=True):
        slurmd = pool_statefulset(spec, pool)["spec"]["template"]["spec"]["containers"][0]
        conf = next(e["value"] for e in slurmd["env"] if e["name"] == "SLURMD_NODE_CONF")
        assert f"Topology=default:{leaf}" in conf.split(), conf


def test_without_topology_nothing_changes() -> None:
    spec = load_spec(_raw())
    files = slurm_config_files(spec)
    assert "topology.conf" not in files
    assert "Topology" not in files["slurm.conf"]
    slurmd = pool_statefulset(spec, spec.worker_pools[0])["spec"]["template"]["spec"]
    assert "Topology=" not in str(slurmd["containers"][0]["env"])


def test_moving_a_pool_to_another_switch_changes_the_config_hash() -> None:
    before = content_hash(slurm_config_files(load_spec(_with_topology())))
    moved = _with_topology()
    moved["workerPools"][2]["switch"] = "leaf-3"
    after_files = slurm_config_files(load_spec(moved))
    assert "SwitchName=leaf-3" in after_files["topology.conf"]
    assert content_hash(after_files) != before


def _with_label_switches() -> dict[str, Any]:
    raw = _with_topology()
    del raw["workerPools"][1]["switch"]
    raw["workerPools"][1]["switchLabel"] = "example.com/leaf"
    raw["workerPools"][2]["labelFeatures"] = {"zone": "topology.kubernetes.io/zone"}
    raw["nodeState"] = {"enabled": True}
    return raw


def _node_conf(spec: Any, index: int) -> list[str]:
    slurmd = pool_statefulset(spec, spec.worker_pools[index])["spec"]["template"]["spec"]
    env = slurmd["containers"][0]["env"]
    return shlex.split(next(e["value"] for e in env if e["name"] == "SLURMD_NODE_CONF"))


def test_a_node_whose_switch_is_a_label_registers_drained_on_the_waiting_leaf() -> None:
    spec = load_spec(_with_label_switches())
    conf = _node_conf(spec, 1)
    # The k8s: prefix is the node-state controller's: it resumes the node once placed.
    assert f"Reason={AWAITING_SWITCH_REASON}" in conf
    assert AWAITING_SWITCH_REASON.startswith("k8s: ")
    assert "State=DRAIN" in conf
    assert f"Topology=default:{UNPLACED_SWITCH}" in conf
    lines = slurm_config_files(spec)["topology.conf"].splitlines()
    assert f"SwitchName=spine Switches=leaf-1,{UNPLACED_SWITCH}" in lines
    # A pool with a switch of its own, or with label features only, registers as before.
    for index in (0, 2):
        assert not any(part.startswith(("State=", "Reason=")) for part in _node_conf(spec, index))


def test_the_controller_is_told_which_pools_read_which_labels() -> None:
    spec = load_spec(_with_label_switches())
    container = node_state_deployment(spec, "topo-slurm-config")["spec"]["template"]["spec"][
        "containers"
    ][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["NODE_STATE_POOLS"]) == {
        "b": {"switchLabel": "example.com/leaf", "rootSwitch": "spine", "features": {}},
        "c": {
            "switchLabel": None,
            "rootSwitch": "spine",
            "features": {"k8s-zone-": "topology.kubernetes.io/zone"},
        },
    }
    assert env["NODE_STATE_POOL_LABEL"] == POOL_LABEL
    # The controller reads each pod's pool from this label.
    labels = pool_statefulset(spec, spec.worker_pools[1])["spec"]["template"]["metadata"]
    assert labels["labels"][POOL_LABEL] == "b"
