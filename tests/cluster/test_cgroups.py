"""Slurm's cgroup plugins (cgroups.enforce) and sshd on nodes (workerPools[].sshd), on real
Slurm: a job gets only its CPUs and memory; a user with a job on a node ssh-es in from the
login node and lands in that job; anyone else, and any node without a job of theirs, is
refused; the job's end ends the session; turning sshd on for another pool of the running
cluster replaces only that pool's pod and the login pod.

The sandbox's host runs cgroup v1, so Slurm picks its cgroup/v1 plugin here; Kubernetes
1.36 nodes run cgroup v2 (slurm_stack/sandbox/plan.py says what that leaves untested)."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for
from tests.cluster.test_users import keypair

STACK = Path(__file__).with_name("Pulumi.cgroups.yaml")
SSH_NODES = ["cg-debug-0", "cg-debug-1"]
KEY_SETUP = (
    "install -d -m 700 ~/.ssh && "
    "ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/id_ed25519 && "
    "cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys && chmod 600 ~/.ssh/authorized_keys"
)
# ssh from a login session to a node, failing at once rather than asking anything.
NODE_SSH = "ssh -o BatchMode=yes -o ConnectTimeout=20"
SYS_ADMIN = 21  # include/uapi/linux/capability.h


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("cgroup-keys")
    return {name: keypair(directory, name)[0] for name in ("alice", "bob")}


@pytest.fixture(scope="module")
def cg(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Iterator[Cluster]:
    """The cgroups stack, with our keys for alice and bob; each user has made a key pair of
    their own on the login node, as docs/users.md tells them to."""
    document = yaml.safe_load(STACK.read_text())
    for user in document["config"]["slurm-stack:cluster"]["login"]["users"]:
        user["authorizedKeys"] = [keys[user["name"]].with_suffix(".pub").read_text().strip()]
    cluster = boot_stack(document, tmp_path_factory.mktemp("cgroups"), 3)
    for name, key in keys.items():
        cluster.ok_as(name, key, KEY_SETUP)
    yield cluster
    tear_down(cluster)


def running_job(cg: Cluster, key: Path, node: str, user: str = "alice") -> str:
    """A job of ``user`` holding one CPU of ``node`` until cancelled, once it runs; it
    leaves a mark in its private /tmp."""
    submit = f"sbatch --parsable -w {node} -c1 --wrap 'echo job > /tmp/mark; sleep 600'"
    job = cg.ok_as(user, key, submit).strip()
    wait_for(f"job {job} running", lambda: cg.job_state(job) == "RUNNING", timeout=60)
    return job


def sacct_state(cg: Cluster, job: str) -> str:
    out = cg.ok(cg.ctl(f"sacct -n -X -P -j {job} -o State"))
    return out.strip()


def test_a_job_gets_only_its_cpus_and_its_memory(cg: Cluster, keys: dict[str, Path]) -> None:
    """task/cgroup: a one-CPU task may run on one CPU of its two-CPU node; a task that
    allocates past its --mem is killed by the kernel, and sacct says so."""
    out = cg.ok_as(
        "alice", keys["alice"], "srun -w cg-debug-0 -c1 grep Cpus_allowed_list /proc/self/status"
    )
    assert out.split()[-1] in ("0", "1"), out
    both = cg.ok_as(
        "alice", keys["alice"], "srun -w cg-debug-0 -c2 grep Cpus_allowed_list /proc/self/status"
    )
    assert both.split()[-1] == "0-1", both
    hog = "python3 -c 'b = bytearray(400 * 2**20); print(len(b))'"
    job = cg.ok_as(
        "alice", keys["alice"], f'sbatch --parsable -w cg-debug-1 --mem=64M --wrap "{hog}"'
    ).strip()
    cg.wait_job(job)
    assert sacct_state(cg, job) == "OUT_OF_MEMORY"


def test_a_user_with_a_job_on_a_node_lands_in_it_over_ssh(
    cg: Cluster, keys: dict[str, Path]
) -> None:
    """From a login session, `ssh <node>` reaches a node of the pool with sshd where the user
    has a job: the session is in the jail and in that job's extern step, sees the job's CPU
    only and the node's /tmp (not the job's private one), and holds no capability, SYS_ADMIN
    not even in its bounding set. The other node of the pool, where the user has no job,
    refuses them, as the node refuses bob, who has no job anywhere."""
    job = running_job(cg, keys["alice"], "cg-debug-0")
    try:
        probe = (
            "hostname; cat /proc/self/cgroup; test -e /.slurm-stack-populated && echo jail; "
            'test -e /tmp/mark || echo node-tmp; grep -E "^Cap(Eff|Bnd)" /proc/self/status; '
            "grep Cpus_allowed_list /proc/self/status"
        )
        out = cg.ok_as("alice", keys["alice"], f"{NODE_SSH} cg-debug-0 '{probe}'")
        lines = out.splitlines()
        assert lines[0] == "cg-debug-0", out
        assert any(f"/job_{job}/step_extern" in line for line in lines), out
        assert "jail" in lines and "node-tmp" in lines, out
        caps = dict(line.split(":") for line in lines if line.startswith("Cap"))
        assert int(caps["CapEff"], 16) == 0, out
        assert not int(caps["CapBnd"], 16) & (1 << SYS_ADMIN), out
        assert lines[-1].split()[-1] in ("0", "1"), out
        refused = cg.login_as("alice", keys["alice"], f"{NODE_SSH} cg-debug-1 true")
        assert refused.returncode != 0
        assert "you have no active jobs on this node" in refused.stderr, refused.stderr
        stranger = cg.login_as("bob", keys["bob"], f"{NODE_SSH} cg-debug-0 true")
        assert stranger.returncode != 0
        assert "you have no active jobs on this node" in stranger.stderr, stranger.stderr
    finally:
        cg.ctl(f"scancel {job}")
    cg.wait_job(job)


def test_the_jobs_end_ends_its_ssh_sessions(cg: Cluster, keys: dict[str, Path]) -> None:
    """proctrack/cgroup counts an adopted session among the job's processes: cancelling the
    job kills it, and sacct records the job as cancelled."""
    job = running_job(cg, keys["alice"], "cg-debug-1")
    argv = cg.sandbox.ssh_command("alice", identity=keys["alice"])
    session = subprocess.Popen(
        [*argv, f"{NODE_SSH} cg-debug-1 'echo in; exec sleep 600'"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert session.stdout is not None
        assert session.stdout.readline().strip() == "in"
        cg.ok(cg.ctl(f"scancel {job}"))
        session.wait(timeout=60)
    finally:
        session.kill()
    assert cg.wait_job(job) == "CANCELLED"
    assert sacct_state(cg, job).startswith("CANCELLED")


def test_turning_sshd_on_for_another_pool_rolls_only_that_pool_and_keeps_running_jobs(
    cg: Cluster, keys: dict[str, Path]
) -> None:
    """Day 2: `sshd: true` added to the pool without it. Only that pool's pod and the login
    pod (whose ssh_config gains the pool) are replaced; a job running on the other pool runs
    on, and its node still lets alice in; the newly enabled node does too, into her job
    there. Each job's fate is read from sacct."""
    running = running_job(cg, keys["alice"], "cg-debug-0")

    def sshd_on_plain(cluster: dict) -> None:  # type: ignore[type-arg]
        next(p for p in cluster["workerPools"] if p["name"] == "plain")["sshd"] = True

    cg.edit_stack(sshd_on_plain)
    report = cg.sandbox.up(build=False)
    assert "cg-plain-0" in report.created and "cg-login-0" in report.created, report
    assert not {"cg-debug-0", "cg-debug-1", "cg-controller-0"} & set(report.created), report
    wait_for("cg-plain-0 idle", lambda: cg.node_states().get("cg-plain-0") == "idle", timeout=120)
    assert cg.job_state(running) == "RUNNING"
    plain = running_job(cg, keys["alice"], "cg-plain-0")
    try:
        for node, job in (("cg-debug-0", running), ("cg-plain-0", plain)):
            out = cg.ok_as(
                "alice", keys["alice"], f"{NODE_SSH} {node} 'hostname; cat /proc/self/cgroup'"
            )
            assert out.splitlines()[0] == node, out
            assert f"/job_{job}/step_extern" in out, out
    finally:
        cg.ctl(f"scancel {running} {plain}")
    for job in (running, plain):
        assert cg.wait_job(job) == "CANCELLED"
        assert sacct_state(cg, job).startswith("CANCELLED")
