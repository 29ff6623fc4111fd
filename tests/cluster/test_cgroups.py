"""Slurm's cgroup plugins (cgroups.enforce) and sshd on nodes (workerPools[].sshd), on real
Slurm: a job gets only its CPUs and memory; a user with a job on a node ssh-es in from the
login node and lands in that job, held to its CPUs and memory; anyone else is refused, and so
is she on a node without a job of hers or whose slurmstepd of her job cannot be asked; the
job's end ends the session; turning sshd on for another pool of the running cluster replaces
only that pool's pod and the login pod.

The sandbox's host runs cgroup v1, so Slurm picks its cgroup/v1 plugin here; Kubernetes
1.36 nodes run cgroup v2 (slurm_stack/sandbox/plan.py says what that leaves untested)."""

import contextlib
import shlex
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from slurm_stack import paths
from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for
from tests.cluster.test_users import keypair

STACK = Path(__file__).with_name("Pulumi.cgroups.yaml")
SSH_NODES = ["cgroups-debug-0", "cgroups-debug-1"]
KEY_SETUP = (
    "install -d -m 700 ~/.ssh && "
    "ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/id_ed25519 && "
    "cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys && chmod 600 ~/.ssh/authorized_keys"
)
# ssh from a login session to a node, failing at once rather than asking anything.
NODE_SSH = "ssh -o BatchMode=yes -o ConnectTimeout=20"
SYS_ADMIN = 21  # include/uapi/linux/capability.h
EXTERN_STEP = 0xFFFFFFFC  # SLURM_EXTERN_CONT (slurm/slurm.h): a job's extern step's id
MIB = 2**20
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# Run in an ssh session on a node: the cgroup directories the session's shell is in (its
# /proc/self/cgroup path under the root the hierarchy's mount shows, /proc/self/mountinfo),
# the memory limit of each from the session's up to the hierarchy's root, the kernel's
# effective limit (hierarchical_memory_limit: the least of them and of those above the
# container), the cpuset, the CPUs the shell may run on, and the exit status of a Python
# that allocates 400 MiB.
SESSION_LIMITS = r"""
dir() {
  p=$(sed -n "s/^[0-9]*:$1://p" /proc/self/cgroup)
  r=$(awk -v m=/sys/fs/cgroup/$1 '$5 == m {print $4}' /proc/self/mountinfo)
  [ "$r" = / ] && r=
  echo "/sys/fs/cgroup/$1${p#"$r"}"
}
m=$(dir memory); echo "memory-cgroup $m"
d=$m
while [ "$d" != /sys/fs/cgroup/memory ]; do
  echo "limit $d $(cat "$d/memory.limit_in_bytes")"; d=${d%/*}
done
awk '$1 == "hierarchical_memory_limit" {print "effective", $2}' "$m/memory.stat"
c=$(dir cpuset); echo "cpuset-cgroup $c"; echo "cpuset $(cat "$c/cpuset.cpus")"
echo "allowed $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
python3 -c 'b = bytearray(400 * 2**20)' 2>/dev/null; echo "hog $?"
"""


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


def job_allocation(cg: Cluster, job: str) -> tuple[int, str]:
    """The memory (bytes) and the CPUs (CPU_IDs) that Slurm allocated to a one-node job, as
    `scontrol show job -d` says."""
    out = cg.ok(cg.ctl(f"scontrol show job -d {job}"))
    fields = dict(token.split("=", 1) for token in out.split() if "=" in token)
    tres = dict(item.split("=", 1) for item in fields["AllocTRES"].split(","))
    amount, unit = tres["mem"][:-1], tres["mem"][-1]
    return int(float(amount) * UNITS[unit]), fields["CPU_IDs"]


def node_log(cg: Cluster, node: str) -> Counter[str]:
    """The lines a node's container has logged (its sshd logs there: `sshd -D -e`)."""
    logs = cg.sandbox.podman.run(["logs", cg.sandbox.node_container(node)], check=False)
    return Counter((logs.stdout + logs.stderr).splitlines())


@contextlib.contextmanager
def extern_step_unaskable(cg: Cluster, node: str, job: str, fault: str) -> Iterator[None]:
    """While the block runs, pam_slurm_adopt on ``node`` cannot ask about ``job``: its
    extern step's slurmstepd is stopped (``hung``: it takes the connection and never
    answers), or its socket in slurmd's spool is moved aside (``gone``: nothing to
    connect to, as when that slurmstepd has died). Then the slurmstepd is continued, or its
    socket put back."""
    if fault == "hung":
        pid = cg.ok(cg.node(node, f"pgrep -x -f 'slurmstepd: \\[{job}\\.extern\\]'")).strip()
        assert pid.isdigit(), pid
        cg.ok(cg.node(node, f"kill -STOP {pid}"))
        try:
            wait_for(
                f"the slurmstepd of {job}.extern stopped",
                lambda: "T (stopped)" in cg.node(node, f"grep ^State: /proc/{pid}/status").stdout,
            )
            yield
        finally:
            cg.node(node, f"kill -CONT {pid}")
    else:
        socket = f"{paths.SLURMD_SPOOL_DIR}/{node}_{job}.{EXTERN_STEP}"
        aside = f"{paths.SLURMD_SPOOL_DIR}/.aside-{job}.{EXTERN_STEP}"
        cg.ok(cg.node(node, f"test -S {socket} && mv {socket} {aside}"))
        try:
            yield
        finally:
            cg.node(node, f"mv {aside} {socket}")


def test_a_job_gets_only_its_cpus_and_its_memory(cg: Cluster, keys: dict[str, Path]) -> None:
    """task/cgroup: a one-CPU task may run on one CPU of its two-CPU node; a task that
    allocates past its --mem is killed by the kernel, and sacct says so."""
    out = cg.ok_as(
        "alice",
        keys["alice"],
        "srun -w cgroups-debug-0 -c1 grep Cpus_allowed_list /proc/self/status",
    )
    assert out.split()[-1] in ("0", "1"), out
    both = cg.ok_as(
        "alice",
        keys["alice"],
        "srun -w cgroups-debug-0 -c2 grep Cpus_allowed_list /proc/self/status",
    )
    assert both.split()[-1] == "0-1", both
    hog = "python3 -c 'b = bytearray(400 * 2**20); print(len(b))'"
    job = cg.ok_as(
        "alice", keys["alice"], f'sbatch --parsable -w cgroups-debug-1 --mem=64M --wrap "{hog}"'
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
    job = running_job(cg, keys["alice"], "cgroups-debug-0")
    try:
        probe = (
            "hostname; cat /proc/self/cgroup; test -e /.slurm-stack-populated && echo jail; "
            'test -e /tmp/mark || echo node-tmp; grep -E "^Cap(Eff|Bnd)" /proc/self/status; '
            "grep Cpus_allowed_list /proc/self/status"
        )
        out = cg.ok_as("alice", keys["alice"], f"{NODE_SSH} cgroups-debug-0 '{probe}'")
        lines = out.splitlines()
        assert lines[0] == "cgroups-debug-0", out
        assert any(f"/job_{job}/step_extern" in line for line in lines), out
        assert "jail" in lines and "node-tmp" in lines, out
        caps = dict(line.split(":") for line in lines if line.startswith("Cap"))
        assert int(caps["CapEff"], 16) == 0, out
        assert not int(caps["CapBnd"], 16) & (1 << SYS_ADMIN), out
        assert lines[-1].split()[-1] in ("0", "1"), out
        refused = cg.login_as("alice", keys["alice"], f"{NODE_SSH} cgroups-debug-1 true")
        assert refused.returncode != 0
        assert "you have no active jobs on this node" in refused.stderr, refused.stderr
        stranger = cg.login_as("bob", keys["bob"], f"{NODE_SSH} cgroups-debug-0 true")
        assert stranger.returncode != 0
        assert "you have no active jobs on this node" in stranger.stderr, stranger.stderr
    finally:
        cg.ctl(f"scancel {job}")
    cg.wait_job(job)


def test_an_ssh_session_is_held_to_its_jobs_memory_and_cpus(
    cg: Cluster, keys: dict[str, Path]
) -> None:
    """A session that lands in a job (--mem=200M, one CPU) is held to what Slurm allocated
    the job, as `scontrol show job -d` says it. Its shell's memory cgroup is the extern
    step's task_0, which sets no limit of its own (its memory.limit_in_bytes is the
    kernel's "none"): what holds it is the least limit on the way up, the job's cgroup's,
    which is the job's memory, and the kernel's effective limit for it
    (hierarchical_memory_limit) is that too. Its cpuset, and the CPUs the shell may run on,
    are the job's CPU_IDs (Slurm's CPU ids are the machine's here: the node's two CPUs are
    its host's). 400 MiB allocated in the session is killed by the kernel while the job
    runs on. (The host has no swap; memory.memsw is not limited.)"""
    submit = "sbatch --parsable -w cgroups-debug-0 -c1 --mem=200M --wrap 'sleep 600'"
    job = cg.ok_as("alice", keys["alice"], submit).strip()
    try:
        wait_for(f"job {job} running", lambda: cg.job_state(job) == "RUNNING", timeout=60)
        memory, cpus = job_allocation(cg, job)
        assert memory == 200 * MIB
        out = cg.ok_as(
            "alice", keys["alice"], f"{NODE_SSH} cgroups-debug-0 {shlex.quote(SESSION_LIMITS)}"
        )
        rows = [line.split(" ", 1) for line in out.splitlines() if " " in line]
        found = dict(rows)
        limits = {
            path: int(value)
            for key, rest in rows
            if key == "limit"
            for path, value in [rest.rsplit(" ", 1)]
        }
        assert f"/job_{job}/step_extern" in found["memory-cgroup"], out
        job_dir = next(path for path in limits if path.endswith(f"/job_{job}"))
        assert limits[job_dir] == memory, out
        assert min(limits.values()) == memory, out
        assert int(found["effective"]) == memory, out
        assert f"/job_{job}/step_extern" in found["cpuset-cgroup"], out
        assert found["cpuset"] == cpus, out
        assert found["allowed"] == cpus, out
        assert found["hog"] == "137", out  # SIGKILL
        assert cg.job_state(job) == "RUNNING"
    finally:
        cg.ctl(f"scancel {job}")
    cg.wait_job(job)


@pytest.mark.parametrize("fault", ["hung", "gone"])
def test_no_one_gets_in_while_the_jobs_slurmstepd_cannot_be_asked(
    cg: Cluster, keys: dict[str, Path], fault: str
) -> None:
    """What pam_slurm_adopt asks about a login is the node's slurmstepds, not slurmd: it
    lists the step sockets in slurmd's spool (SlurmdSpoolDir), connects to the socket of
    each job's extern step to ask whose job it is, and asks her job's to adopt the
    session (stepd_available and stepd_connect in contribs/pam_slurm_adopt/
    pam_slurm_adopt.c); with a single job of the user on the node it sends slurmd nothing,
    so a stopped slurmd keeps no one out. "Slurm cannot be asked" is therefore the job's
    extern slurmstepd not answering (``hung``: stopped, as one stuck on a hung mount is) or
    not there to ask (``gone``: its socket moved aside, as when it has died). Either way
    the job's own user is refused while her job runs on: when it hangs, sshd gives up at
    LoginGraceTime (30 s) and logs "Timeout before authentication"; when it is gone,
    pam_slurm_adopt finds no job of hers and says so. Once it answers again, she lands in
    her job."""
    node = "cgroups-debug-1"
    job = running_job(cg, keys["alice"], node)
    login = f"{NODE_SSH} {node} 'cat /proc/self/cgroup'"
    try:
        before = node_log(cg, node)
        with extern_step_unaskable(cg, node, job, fault):
            refused = cg.login_as("alice", keys["alice"], login)
            assert cg.job_state(job) == "RUNNING"
        logged = "\n".join((node_log(cg, node) - before).elements())
        assert refused.returncode == 255, (refused.stdout, refused.stderr)
        assert refused.stdout == "", refused.stdout
        if fault == "hung":
            assert "Connection closed" in refused.stderr, refused.stderr
            assert "Timeout before authentication" in logged, logged
        else:
            denied = "Access denied by pam_slurm_adopt: you have no active jobs on this node"
            assert denied in refused.stderr, refused.stderr
            assert "Access denied for user alice by PAM account configuration" in logged, logged
        out = cg.ok_as("alice", keys["alice"], login)
        assert f"/job_{job}/step_extern" in out, out
    finally:
        cg.ctl(f"scancel {job}")
    cg.wait_job(job)


def test_the_jobs_end_ends_its_ssh_sessions(cg: Cluster, keys: dict[str, Path]) -> None:
    """proctrack/cgroup counts an adopted session among the job's processes: cancelling the
    job kills it, and sacct records the job as cancelled."""
    job = running_job(cg, keys["alice"], "cgroups-debug-1")
    argv = cg.sandbox.ssh_command("alice", identity=keys["alice"])
    session = subprocess.Popen(
        [*argv, f"{NODE_SSH} cgroups-debug-1 'echo in; exec sleep 600'"],
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
    running = running_job(cg, keys["alice"], "cgroups-debug-0")

    def sshd_on_plain(cluster: dict) -> None:  # type: ignore[type-arg]
        next(p for p in cluster["workerPools"] if p["name"] == "plain")["sshd"] = True

    cg.edit_stack(sshd_on_plain)
    report = cg.sandbox.up(build=False)
    assert "cgroups-plain-0" in report.created and "cgroups-login-0" in report.created, report
    assert not {"cgroups-debug-0", "cgroups-debug-1", "cgroups-controller-0"} & set(
        report.created
    ), report
    wait_for(
        "cgroups-plain-0 idle",
        lambda: cg.node_states().get("cgroups-plain-0") == "idle",
        timeout=120,
    )
    assert cg.job_state(running) == "RUNNING"
    plain = running_job(cg, keys["alice"], "cgroups-plain-0")
    try:
        for node, job in (("cgroups-debug-0", running), ("cgroups-plain-0", plain)):
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
