"""Network topology on real Slurm: the itest stack puts each pool on a leaf switch of its own
under one root (topology/tree); every node joins its leaf as it registers."""

import pytest

from tests.cluster.conftest import Cluster, wait_for


def _needs_topology(cluster: Cluster) -> None:
    if cluster.sandbox.spec.topology is None:  # removed for 24.11 (tests/cluster/conftest.py)
        pytest.skip("topology needs Slurm 25.05 or newer")


def _switches(cluster: Cluster) -> dict[str, dict[str, str]]:
    """`scontrol show topology`: switch name -> its fields (Level, Nodes, Switches, ...)."""
    out = cluster.ok(cluster.ctl("scontrol show topology"))
    switches = {}
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "SwitchName" in fields:
            switches[fields["SwitchName"]] = fields
    return switches


def _hostnames(cluster: Cluster, nodes: str) -> set[str]:
    return set(cluster.ok(cluster.ctl(f"scontrol show hostnames {nodes}")).split())


def _job_nodes(cluster: Cluster, job: str) -> set[str]:
    out = cluster.ok(cluster.ctl(f"scontrol show job {job} -o"))
    nodes = next(t.split("=", 1)[1] for t in out.split() if t.startswith("NodeList="))
    return _hostnames(cluster, nodes)


def _job_field(cluster: Cluster, job: str, field: str) -> str:
    out = cluster.ok(cluster.ctl(f"scontrol show job {job} -o"))
    return next((t.split("=", 1)[1] for t in out.split() if t.startswith(f"{field}=")), "")


def _submit(cluster: Cluster, options: str) -> str:
    return cluster.ok(cluster.login(f"sbatch --parsable {options}")).strip()


def test_each_node_is_on_its_pools_leaf_switch(cluster: Cluster) -> None:
    _needs_topology(cluster)
    switches = _switches(cluster)
    assert _hostnames(cluster, switches["leaf-cpu"]["Nodes"]) == {"itest-cpu-0", "itest-cpu-1"}
    assert _hostnames(cluster, switches["leaf-gpu"]["Nodes"]) == {"itest-gpu-0", "itest-gpu-1"}
    root = switches["spine"]
    assert _hostnames(cluster, root["Switches"]) == {"leaf-cpu", "leaf-gpu"}
    assert int(root["Level"]) > int(switches["leaf-cpu"]["Level"])


def test_a_one_switch_job_lands_on_one_leaf(cluster: Cluster) -> None:
    _needs_topology(cluster)
    # With itest-cpu-0 taken, the only two free nodes on one leaf are the gpu pool's; without
    # the topology any two would do, such as itest-cpu-1 and a gpu node.
    blocker = _submit(cluster, "-w itest-cpu-0 --exclusive --wrap 'sleep 300'")
    try:
        wait_for(f"job {blocker} to run", lambda: cluster.job_state(blocker) == "RUNNING")
        job = _submit(cluster, "-p main -N2 --switches=1 --wrap 'sleep 1'")
        assert cluster.wait_job(job) == "COMPLETED"
        assert _job_nodes(cluster, job) == {"itest-gpu-0", "itest-gpu-1"}
    finally:
        cluster.login(f"scancel {blocker}")
        wait_for(f"job {blocker} to end", lambda: cluster.job_state(blocker) != "RUNNING")


def test_a_one_switch_job_waits_while_free_nodes_are_only_on_two_leaves(cluster: Cluster) -> None:
    _needs_topology(cluster)
    # One node taken on each leaf: the two free nodes are on different leaves. A flat
    # topology would start the job on them at once.
    blockers = [
        _submit(cluster, f"-w {node} --exclusive --wrap 'sleep 300'")
        for node in ("itest-cpu-0", "itest-gpu-1")
    ]
    job = ""
    try:
        for blocker in blockers:
            wait_for(f"job {blocker} to run", lambda b=blocker: cluster.job_state(b) == "RUNNING")
        job = _submit(cluster, "-p main -N2 --switches=1@10:00 --wrap 'sleep 1'")
        reason = wait_for(
            f"the scheduler to hold job {job}",
            lambda: (r := _job_field(cluster, job, "Reason")) not in ("", "None") and r,
        )
        # Waiting for nodes on one switch, not refused or held for another cause.
        assert (cluster.job_state(job), reason) == ("PENDING", "Resources")
        states = cluster.node_states()
        assert states["itest-cpu-1"] == states["itest-gpu-0"] == "idle", states
    finally:
        cluster.login(f"scancel {' '.join([*blockers, job])}")
        for blocker in blockers:
            wait_for(f"job {blocker} to end", lambda b=blocker: cluster.job_state(b) != "RUNNING")
