"""Network topology: what `topology` and each pool's `switch` render (topology/tree)."""

from typing import Any

from slurm_stack.k8s.workers import pool_statefulset
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
