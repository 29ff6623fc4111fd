"""Kubernetes node state reaches Slurm (the node-state controller, against the sandbox's
stand-in API): a cordoned or NotReady node drains its Slurm node with a `k8s:` reason and a
recovered one resumes it; a running job finishes; an admin's drain is never touched."""

from collections.abc import Iterator

import pytest

from slurm_stack.sandbox.kube_api import node_of
from tests.cluster.conftest import Cluster, wait_for


@pytest.fixture
def stand_in_nodes(cluster: Cluster) -> Iterator[None]:
    """Every stand-in node schedulable and Ready again afterwards."""
    yield
    api = cluster.sandbox.kube_api()
    for node in api.nodes():
        api.set_node(node, unschedulable=False, ready=True)


def reason_and_state(cluster: Cluster, node: str) -> tuple[str, str]:
    out = cluster.ok(cluster.ctl(f"sinfo -h -n {node} -o '%E|%T'")).strip()
    reason, state = out.rsplit("|", 1)
    return reason, state


@pytest.mark.usefixtures("stand_in_nodes")
def test_a_cordoned_node_drains_its_slurm_node_and_the_running_job_finishes(
    cluster: Cluster,
) -> None:
    node = "itest-cpu-1"
    job = cluster.ok(
        cluster.login(f"sbatch --parsable -w {node} --mem=64M -o /dev/null --wrap 'sleep 6'")
    ).strip()
    wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")
    cluster.sandbox.kube_api().set_node(node_of(node), unschedulable=True)
    wanted = f"k8s: node {node_of(node)} cordoned"
    wait_for(
        f"{node} draining",
        lambda: reason_and_state(cluster, node) in ((wanted, "draining"), (wanted, "drained")),
        timeout=30,
    )
    # Draining, not killing: the job ends as it would have.
    assert cluster.wait_job(job) == "COMPLETED"
    cluster.sandbox.kube_api().set_node(node_of(node), unschedulable=False)
    wait_for(f"{node} resumed", lambda: reason_and_state(cluster, node) == ("none", "idle"), 30)


@pytest.mark.usefixtures("stand_in_nodes")
def test_a_not_ready_node_drains_and_an_admins_drain_stays(cluster: Cluster) -> None:
    api = cluster.sandbox.kube_api()
    admins, ours = "itest-cpu-0", "itest-gpu-1"
    cluster.ok(cluster.ctl(f"scontrol update NodeName={admins} State=DRAIN Reason='admin: disks'"))
    try:
        for node in (admins, ours):
            api.set_node(node_of(node), ready=False)
        wanted = f"k8s: node {node_of(ours)} NotReady"
        wait_for(f"{ours} drained", lambda: reason_and_state(cluster, ours) == (wanted, "drained"))
        assert reason_and_state(cluster, admins) == ("admin: disks", "drained")
        for node in (admins, ours):
            api.set_node(node_of(node), ready=True)
        wait_for(f"{ours} resumed", lambda: reason_and_state(cluster, ours) == ("none", "idle"))
        # The pass that resumed it looked at the admin's node first (nodes go in name order),
        # Ready again too, and left its drain alone.
        assert reason_and_state(cluster, admins) == ("admin: disks", "drained")
    finally:
        cluster.ctl(f"scontrol update NodeName={admins} State=RESUME")
