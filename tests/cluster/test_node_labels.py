"""Kubernetes node labels as Slurm switches and features, on real Slurm.

Booted from `Pulumi.labels.yaml`: pool fabric takes each node's leaf switch from a node label
and a `k8s-zone-` feature from the zone label; pool fixed names its switch in the stack. The
node-state controller reads the labels from the sandbox's stand-in API; the tests label and
relabel the stand-in nodes as `kubectl label node` would.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from slurm_stack.naming import AWAITING_SWITCH_REASON, UNPLACED_SWITCH
from slurm_stack.sandbox.kube_api import node_of
from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for
from tests.cluster.test_topology import _hostnames, _job_nodes, _submit, _switches

STACK = Path(__file__).resolve().parent / "Pulumi.labels.yaml"
SWITCH = "example.com/leaf-switch"
ZONE = "topology.kubernetes.io/zone"
FABRIC = [f"labels-fabric-{i}" for i in range(4)]


def _topology(cluster: Cluster) -> bool:
    return cluster.sandbox.spec.topology is not None  # removed for 24.11 (conftest.py)


def _needs_topology(cluster: Cluster) -> None:
    if not _topology(cluster):
        pytest.skip("topology needs Slurm 25.05 or newer (the spec refuses it on 24.11)")


def _settled(cluster: Cluster) -> bool:
    """With a topology, fabric's nodes wait drained for their switch labels; without one
    (24.11: features only) every node is idle."""
    if not _topology(cluster):
        return cluster.all_idle(5)
    states = cluster.node_states()
    return states.get("labels-fixed-0") == "idle" and all(
        states.get(node) == "drain" for node in FABRIC
    )


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    document = yaml.safe_load(STACK.read_text())
    cluster = boot_stack(document, tmp_path_factory.mktemp("labels"), 5, settled=_settled)
    yield cluster
    tear_down(cluster)


def label(cluster: Cluster, node: str, **labels: str | None) -> None:
    """Set (or, with None, remove) labels of ``node``'s stand-in Kubernetes node."""
    named = {SWITCH if k == "switch" else ZONE: v for k, v in labels.items()}
    cluster.sandbox.kube_api().set_node(node_of(node), labels=named)


def reason(cluster: Cluster, node: str) -> str:
    return cluster.node_reason(node)


def features(cluster: Cluster, node: str) -> list[str]:
    return cluster.node_field(node, "AvailableFeatures").split(",")


def test_unlabelled_nodes_stay_drained_and_say_which_label_is_missing(labels: Cluster) -> None:
    _needs_topology(labels)
    # The controller's first passes: registered drained, then drained for the missing label.
    for node in FABRIC:
        wanted = f"k8s: node {node_of(node)} has no label {SWITCH}"
        wait_for(f"{node}'s reason", lambda n=node, w=wanted: reason(labels, n) == w, timeout=30)
    assert labels.node_states()["labels-fixed-0"] == "idle"
    switches = _switches(labels)
    assert _hostnames(labels, switches["leaf-s"]["Nodes"]) == {"labels-fixed-0"}
    # They wait on a leaf of their own, drained: a job for them queues rather than fails.
    assert _hostnames(labels, switches[UNPLACED_SWITCH]["Nodes"]) == set(FABRIC)
    job = _submit(labels, "--constraint=fabric --wrap 'sleep 1'")
    try:
        wait_for(f"job {job} held", lambda: labels.job_state(job) == "PENDING")
    finally:
        labels.login(f"scancel {job}")


def test_labels_put_each_node_on_its_switch(labels: Cluster) -> None:
    _needs_topology(labels)
    for node, switch, zone in zip(
        FABRIC, ["leaf-a", "leaf-a", "leaf-b", "leaf-b"], "aabb", strict=True
    ):
        label(labels, node, switch=switch, zone=f"z-{zone}")
    wait_for("every node idle", lambda: labels.all_idle(5), timeout=30)
    switches = _switches(labels)
    assert _hostnames(labels, switches["leaf-a"]["Nodes"]) == set(FABRIC[:2])
    assert _hostnames(labels, switches["leaf-b"]["Nodes"]) == set(FABRIC[2:])
    assert UNPLACED_SWITCH not in switches or switches[UNPLACED_SWITCH].get("Nodes") in ("", None)
    assert _hostnames(labels, switches["spine"]["Switches"]) >= {"leaf-a", "leaf-b", "leaf-s"}
    # The reason the node registered with (its pool's --conf) is gone with the drain.
    assert AWAITING_SWITCH_REASON not in labels.ok(labels.ctl("sinfo -R -h -o '%E'"))

    # With one node of leaf-a taken, a one-switch job of two nodes runs on leaf-b.
    blocker = _submit(labels, f"-w {FABRIC[0]} --exclusive --wrap 'sleep 300'")
    try:
        wait_for(f"job {blocker} to run", lambda: labels.job_state(blocker) == "RUNNING")
        job = _submit(labels, "-N2 --switches=1 --wrap 'sleep 1'")
        assert labels.wait_job(job) == "COMPLETED"
        assert _job_nodes(labels, job) == set(FABRIC[2:])
    finally:
        labels.login(f"scancel {blocker}")
        wait_for(f"job {blocker} to end", lambda: labels.job_state(blocker) != "RUNNING")


def test_zone_labels_become_features_and_follow_the_labels(labels: Cluster) -> None:
    for node, zone in zip(FABRIC, "aabb", strict=True):
        label(labels, node, zone=f"z-{zone}")
    wait_for(
        "the zone features",
        lambda: features(labels, FABRIC[3]) == ["fabric", "k8s-zone-z-b"],
        timeout=30,
    )
    assert features(labels, FABRIC[0]) == ["fabric", "k8s-zone-z-a"]
    assert features(labels, "labels-fixed-0") == ["fixed"]  # its pool reads no labels
    wait_for("every node idle", lambda: labels.all_idle(5), timeout=30)
    # A zone constraint lands on that zone's nodes.
    job = _submit(labels, "-N2 --constraint=k8s-zone-z-b --wrap 'sleep 1'")
    assert labels.wait_job(job) == "COMPLETED"
    assert _job_nodes(labels, job) == set(FABRIC[2:])

    # A changed label changes the feature; a removed one removes it; an admin's stays.
    node = FABRIC[1]
    admins = "fabric,nvme,k8s-zone-z-a"  # Slurm wants the active features among them
    labels.ok(
        labels.ctl(
            f"scontrol update NodeName={node} AvailableFeatures={admins} ActiveFeatures={admins}"
        )
    )
    for zone, wanted in [
        ("z-c", ["fabric", "nvme", "k8s-zone-z-c"]),
        (None, ["fabric", "nvme"]),
        ("z-a", ["fabric", "nvme", "k8s-zone-z-a"]),
    ]:
        label(labels, node, zone=zone)
        wait_for(f"{node}: {wanted}", lambda w=wanted: features(labels, node) == w, timeout=30)
        assert labels.node_field(node, "ActiveFeatures") == ",".join(wanted)


def test_a_relabelled_node_moves_and_a_wrong_label_drains_it(labels: Cluster) -> None:
    _needs_topology(labels)
    wait_for("every node idle", lambda: labels.all_idle(5), timeout=30)
    moved, broken, admins = FABRIC[1], FABRIC[3], FABRIC[2]
    label(labels, moved, switch="leaf-b")
    wait_for(
        f"{moved} on leaf-b",
        lambda: moved in _hostnames(labels, _switches(labels)["leaf-b"]["Nodes"]),
        timeout=30,
    )
    assert _hostnames(labels, _switches(labels)["leaf-a"]["Nodes"]) == {FABRIC[0]}

    # The root is no leaf: the node drains, naming the label and its value.
    label(labels, broken, switch="spine")
    wanted = f"k8s: node {node_of(broken)} label {SWITCH}:'spine' is no leaf switch name"
    wait_for(f"{broken} drained", lambda: reason(labels, broken) == wanted, timeout=30)

    # An admin's drain outlives a label problem and its repair.
    labels.ok(labels.ctl(f"scontrol update NodeName={admins} State=DRAIN Reason='admin: cable'"))
    label(labels, admins, switch=None)
    label(labels, broken, switch="leaf-b")
    wait_for(f"{broken} back", lambda: labels.node_states()[broken] == "idle", timeout=30)
    label(labels, admins, switch="leaf-b")
    assert reason(labels, admins) == "admin: cable"
    labels.ok(labels.ctl(f"scontrol update NodeName={admins} State=RESUME"))


def test_placement_survives_a_controller_restart_and_a_replaced_pod_is_placed_again(
    labels: Cluster,
) -> None:
    # Its own labels, whatever ran before it: each fabric node on a leaf and in a zone.
    for node, switch, zone in zip(
        FABRIC, ["leaf-a", "leaf-a", "leaf-b", "leaf-b"], "aabb", strict=True
    ):
        label(labels, node, switch=switch, zone=f"z-{zone}")

    def on_their_labels() -> bool:
        if not labels.all_idle(5):
            return False
        if any(
            f"k8s-zone-z-{z}" not in features(labels, n)
            for n, z in zip(FABRIC, "aabb", strict=True)
        ):
            return False
        if not _topology(labels):
            return True
        switches = _switches(labels)
        return _hostnames(labels, switches["leaf-a"]["Nodes"]) == set(FABRIC[:2]) and (
            _hostnames(labels, switches["leaf-b"]["Nodes"]) == set(FABRIC[2:])
        )

    wait_for("every node idle where its labels say", on_their_labels, timeout=60)

    def placed() -> dict[str, object]:
        found: dict[str, object] = {node: features(labels, node) for node in FABRIC}
        if _topology(labels):
            found |= {name: f.get("Nodes") for name, f in _switches(labels).items()}
        return found

    before = placed()
    # slurmctld re-executes itself and reads the nodes back from its state.
    labels.ok(labels.ctl("scontrol reconfigure"))
    wait_for("slurmctld back", lambda: labels.ctl("scontrol ping").returncode == 0)
    assert placed() == before

    # An evicted pod's node is deleted by its preStop; the new pod registers (with a
    # topology: on the waiting leaf, drained) and the controller places it again.
    node = FABRIC[0]
    labels.sandbox.delete_pod(node)
    wait_for(
        f"{node} placed again and idle",
        lambda: labels.node_states().get(node) == "idle" and placed() == before,
        timeout=60,
    )
