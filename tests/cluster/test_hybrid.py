"""Hybrid clusters on real Slurm: a host outside Kubernetes joins with the join script.

Booted from `Pulumi.hybrid.yaml`. The host is a plain Debian container (not one of the
project's images, not part of the render) on the sandbox's network at an outside address; it
follows docs/hybrid.md: the stack's outputs (`pulumi stack output --json --show-secrets`, the
sandbox's outputs.json) and `python -m slurm_stack join-script`. Every job's fate is read from
sacct, polling with a bounded wait.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for

STACK = Path(__file__).resolve().parent / "Pulumi.hybrid.yaml"
ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("bm1", "bm2")
HOST = HOSTS[0]
# Debian's release whose slurmd is the stack's Slurm (join_script.DEBIAN_RELEASES).
DEBIAN_SUITES = {"26.05": "forky", "24.11": "trixie"}
JOIN_SECONDS = 900  # apt-get installs slurmd and a compiler; the plugin builds


def join_script(cluster: Cluster, directory: Path, *extra: str) -> Path:
    """`python -m slurm_stack join-script` for the stack, from its outputs, into ``directory``."""
    outputs = directory / "outputs.json"
    outputs.write_text(json.dumps(cluster.sandbox.state.load_outputs()))
    script = directory / "join.sh"
    result = subprocess.run(
        [sys.executable, "-m", "slurm_stack", "join-script", "--config", str(cluster.stack_file),
         "--project-dir", str(ROOT), "--outputs", str(outputs), *extra],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    script.write_text(result.stdout)
    return script


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    document = yaml.safe_load(STACK.read_text())
    cluster = boot_stack(document, tmp_path_factory.mktemp("hybrid"), 2)
    yield cluster
    tear_down(cluster)


@pytest.fixture(scope="module")
def host(hybrid: Cluster) -> Iterator[str]:
    """bm1 and bm2 joined, each by the join script run in a plain Debian container; bm1 is
    the host the day-2 tests act on."""
    version = hybrid.sandbox.spec.slurm_version
    outside = hybrid.sandbox.outside()
    # Plain Debian from Debian's mirror, as the project's images start from.
    made = subprocess.run(
        ["bash", str(ROOT / "images" / "debian-base.sh"), DEBIAN_SUITES[version]],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    image = made.stdout.strip()
    for slot, name in enumerate(HOSTS):
        directory = outside.directory(name)
        directory.mkdir(parents=True, exist_ok=True)
        join_script(hybrid, directory, "--show-secrets")
        outside.start(
            name, image, slot=slot, command=["sleep", "infinity"],
            # Root on a real host holds every capability; podman's defaults lack two that
            # slurmstepd uses: pinning a task that already runs as its user to its CPUs
            # (SYS_NICE) and raising its limits to the job's (SYS_RESOURCE), as worker pods do.
            podman_args=["--volume", f"{directory}:/join:ro",
                         "--cap-add", "SYS_NICE", "--cap-add", "SYS_RESOURCE"],
        )  # fmt: skip
    with ThreadPoolExecutor(len(HOSTS)) as pool:
        runs = pool.map(
            lambda name: outside.exec(name, ["sh", "/join/join.sh"], timeout=JOIN_SECONDS), HOSTS
        )
        for name, joined in zip(HOSTS, runs, strict=True):
            assert joined.returncode == 0, joined.stdout + joined.stderr
            assert f"node {name} joined cluster hybrid" in joined.stderr
    yield HOST


def sacct_state(cluster: Cluster, job: str) -> str:
    out = cluster.ok(cluster.ctl(f"sacct -n -X -P -j {job} -o State"))
    return out.strip().splitlines()[0] if out.strip() else ""


def test_the_outside_hosts_join_as_nodes_of_their_pool_with_its_features(
    hybrid: Cluster, host: str
) -> None:
    for slot, name in enumerate(HOSTS):
        wait_for(f"{name} idle", lambda n=name: hybrid.node_states().get(n) == "idle", timeout=60)
        assert hybrid.node_field(name, "AvailableFeatures") == "metal,bigmem"
        assert hybrid.node_field(name, "CPUTot") == "1"
        # Its address is the host's own (its outside slot), which slurmctld connects back to.
        assert hybrid.node_field(name, "NodeAddr") == hybrid.sandbox.outside().address(slot)


def test_srun_spans_two_worker_pods_and_the_outside_hosts(hybrid: Cluster, host: str) -> None:
    out = hybrid.ok(hybrid.login("srun -N4 --ntasks-per-node=1 hostname | sort"))
    assert out.split() == sorted(["hybrid-cpu-0", "hybrid-cpu-1", *HOSTS])


def test_a_job_asking_for_the_hosts_feature_runs_there_on_the_hosts_own_filesystem(
    hybrid: Cluster, host: str
) -> None:
    # The marker exists on the host alone: the job ran on the host's root filesystem, as the
    # declared user (uid 2000, the stack's), not in the jail.
    check = "test -e /etc/slurm-stack/jobs-on-host-root && [ $(id -u) = 2000 ] && hostname"
    job = hybrid.ok(
        hybrid.login(
            f"sbatch --parsable -N2 -C bigmem -o /tmp/host-%j.out --wrap \"srun sh -c '{check}'\""
        )
    ).strip()
    wait_for(f"job {job} in sacct", lambda: sacct_state(hybrid, job) == "COMPLETED", timeout=120)
    nodes = hybrid.ok(hybrid.ctl(f"sacct -n -X -P -j {job} -o NodeList")).strip()
    # In the order the hosts registered (bm[2,1] when bm2 was first): compared as a set.
    hosts = hybrid.ok(hybrid.ctl(f"scontrol show hostnames {nodes}")).split()
    assert sorted(hosts) == ["bm1", "bm2"], nodes
    # The output file is on the batch host's own filesystem: one of the two.
    printed = [
        hybrid.sandbox.outside().exec(name, ["cat", f"/tmp/host-{job}.out"]).stdout
        for name in HOSTS
    ]
    assert sorted("".join(printed).split()) == list(HOSTS)


def running_job_on(cluster: Cluster, host: str) -> str:
    """A requeueable batch job that runs on ``host`` for ten minutes, once it runs."""
    job = cluster.ok(
        cluster.login(f"sbatch --parsable --requeue -w {host} -o /dev/null --wrap 'sleep 600'")
    ).strip()
    wait_for(f"job {job} running", lambda: cluster.job_state(job) == "RUNNING", timeout=60)
    return job


def test_a_host_cut_off_goes_down_its_job_is_requeued_and_it_comes_back(
    hybrid: Cluster, host: str
) -> None:
    job = running_job_on(hybrid, host)
    outside = hybrid.sandbox.outside()
    outside.cut_off(host)
    try:
        # slurmctld's pings go unanswered for SlurmdTimeout: the node is down, its job queued
        # again (Slurm requeues a batch job whose node failed).
        wait_for("bm1 down", lambda: hybrid.node_states().get(host) == "down*", timeout=90)
        wait_for(f"job {job} requeued", lambda: hybrid.job_state(job) == "PENDING", timeout=60)
        assert "NODE_FAIL" in hybrid.ok(hybrid.ctl(f"sacct -n -P -D -X -j {job} -o State"))
    finally:
        outside.reconnect(host)
    # Back on the network, slurmd answers the next ping and the node returns to service.
    wait_for("bm1 back", lambda: hybrid.node_states().get(host) in ("idle", "alloc"), timeout=120)
    hybrid.ok(hybrid.ctl(f"scancel {job}"))
    wait_for("bm1 idle", lambda: hybrid.node_states().get(host) == "idle", timeout=60)


def test_stopping_the_hosts_slurmd_requeues_its_job_and_leaves_no_ghost(
    hybrid: Cluster, host: str
) -> None:
    job = running_job_on(hybrid, host)
    stopped = hybrid.sandbox.outside().exec(host, ["/usr/lib/slurm-stack/stop"], timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    # The pool's policy (requeue, no wait) ended it: requeued, with a comment that says why.
    shown = hybrid.ok(hybrid.ctl(f"scontrol show job {job}"))
    assert "AdminComment=slurm-stack: requeued: host bm1 left the cluster" in shown
    assert hybrid.job_state(job) == "PENDING"
    wait_for(
        f"job {job}'s first run REQUEUED in sacct",
        lambda: "REQUEUED" in hybrid.ok(hybrid.ctl(f"sacct -n -X -P -D -j {job} -o State")),
        timeout=60,
    )
    # No ghost: Slurm has no such node.
    assert host not in hybrid.node_states()
    assert hybrid.ctl(f"scontrol show node {host}").returncode != 0
    hybrid.ok(hybrid.ctl(f"scancel {job}"))


def test_a_host_with_the_wrong_key_is_refused_and_nothing_changes(
    hybrid: Cluster, host: str, tmp_path: Path
) -> None:
    before = hybrid.ok(hybrid.ctl("sinfo -N -h -o '%N %t'"))
    directory = hybrid.sandbox.outside().directory(host)
    join_script(hybrid, directory)  # no key inside: the host reads it from a file
    (directory / "wrong.key").write_bytes(os.urandom(1024))
    refused = hybrid.sandbox.outside().exec(
        host, ["env", "SLURM_STACK_AUTH_KEY_FILE=/join/wrong.key", "sh", "/join/join.sh"],
        timeout=JOIN_SECONDS,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "slurmctld refused this host's credentials" in refused.stderr, refused.stderr
    assert hybrid.ok(hybrid.ctl("sinfo -N -h -o '%N %t'")) == before
    assert host not in hybrid.node_states()


def test_a_host_taken_out_of_the_stack_while_its_slurmd_runs_is_deleted_and_refused(
    hybrid: Cluster, host: str
) -> None:
    directory = hybrid.sandbox.outside().directory(host)
    join_script(hybrid, directory, "--show-secrets")
    joined = hybrid.sandbox.outside().exec(host, ["sh", "/join/join.sh"], timeout=JOIN_SECONDS)
    assert joined.returncode == 0, joined.stderr
    wait_for("bm1 idle", lambda: hybrid.node_states().get(host) == "idle", timeout=60)
    # The host leaves the stack's pool while its slurmd runs: `up`'s reconfigure Job deletes
    # its node (idle: no job to wait for).
    hybrid.edit_stack(lambda c: c["externalNodes"]["pools"][0].update(hosts=["bm2"]))
    hybrid.sandbox.up()
    # bm1 gone; the pods and bm2, which the pool still declares, idle.
    wait_for("bm1 gone, the rest idle", lambda: hybrid.all_idle(3), timeout=120)
    assert set(hybrid.node_states()) == {"hybrid-cpu-0", "hybrid-cpu-1", "bm2"}
    assert hybrid.ctl(f"scontrol show node {host}").returncode != 0
    join_script(hybrid, directory, "--show-secrets")
    refused = hybrid.sandbox.outside().exec(host, ["sh", "/join/join.sh"], timeout=60)
    assert refused.returncode != 0
    assert "'bm1' is not a host of outside pool metal (its hosts: bm2)" in refused.stderr
