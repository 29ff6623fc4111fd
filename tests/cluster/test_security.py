"""What a job can reach and do, on the real cluster: paths a job names resolve inside the
jail, root in a job holds no capability that changes the node, setuid programs raise no
one's privileges, and nothing a job leaves behind (files in /tmp, processes) outlives it."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster, wait_for

# It edits the shared itest stack: restored for the modules after it (tests/cluster/conftest.py).
pytestmark = pytest.mark.usefixtures("itest_stack_restored")

NODE = "itest-cpu-0"
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID (NET_BIND_SERVICE, also kept,
# is not among slurmd's capabilities).
TASK_BOUNDING_SET = "00000000000000fb"


@pytest.fixture(scope="module")
def pod_only_files(cluster: Cluster) -> Iterator[None]:
    """Files only the worker pod has: a marker, a directory and a stand-in token."""
    cluster.ok(
        cluster.node(
            NODE,
            f"echo pod-secret > /pod-marker && mkdir -p /pod-dir {Path(TOKEN).parent} && "
            f"echo pod-file > /pod-dir/f && echo pod-token > {TOKEN} && "
            f"chmod -R a+rwX /pod-dir && chmod a+r /pod-marker {TOKEN}",
        )
    )
    yield
    cluster.node(NODE, f"rm -rf /pod-marker /pod-dir {TOKEN}")


def as_root(cluster: Cluster, command: str) -> str:
    """A job submitted by root (from the login pod's sshd container, outside the chroot)."""
    result = cluster.sandbox.exec(
        "itest-login-0", ["sh", "-c", f"srun -w {NODE} sh -c '{command}' 2>&1"]
    )
    return result.stdout


def batch(cluster: Cluster, options: str, command: str) -> str:
    """Run ``command`` as a batch job on NODE (slurmstepd opens its files); its output."""
    job = cluster.ok(
        cluster.login(
            f"sbatch --parsable -w {NODE} --mem=64M -o sec-%j.out {options} --wrap '{command}'"
        )
    ).strip()
    cluster.wait_job(job)
    return cluster.login(f"cat sec-{job}.out").stdout


def test_paths_a_job_names_resolve_inside_the_jail(cluster: Cluster, pod_only_files: None) -> None:
    for option in ("--input=/pod-marker", f"--input={TOKEN}"):
        out = batch(cluster, option, "cat")
        assert "pod-secret" not in out and "pod-token" not in out
    # A directory as stdin lists the jail's root, not the pod's.
    listing = batch(cluster, "--input=/", "ls /proc/self/fd/0/")
    assert "home" in listing.split() and "pod-dir" not in listing, listing
    moved = batch(cluster, "--chdir=/pod-dir", "pwd; cat f")
    assert "pod-file" not in moved
    job = cluster.ok(
        cluster.login(
            f"sbatch --parsable -w {NODE} --mem=64M -o /pod-dir/out -e /pod-dir/err --wrap 'echo x'"
        )
    ).strip()
    cluster.wait_job(job)
    assert cluster.node(NODE, "ls /pod-dir").stdout.split() == ["f"]
    # srun reads --input on the login node, inside the login's jail.
    assert "pod-secret" not in cluster.login(f"srun -w {NODE} --input=/pod-marker cat").stdout
    # The batch script itself comes from the spool, bound into the jail at the same path.
    assert "version=" in batch(cluster, "", "cat /.slurm-stack-populated")


def test_srun_bcast_lands_where_the_job_finds_it(cluster: Cluster) -> None:
    out = cluster.login(f"srun -w {NODE} --bcast=/home/sandbox/bcast-true true && echo ran")
    assert out.returncode == 0 and "ran" in out.stdout, out.stderr


def test_root_in_a_job_cannot_change_the_node(cluster: Cluster) -> None:
    status = as_root(cluster, 'id -u; grep -E "^(CapBnd|CapEff)" /proc/self/status')
    assert status.splitlines()[0] == "0"
    assert f"CapBnd:\t{TASK_BOUNDING_SET}" in status
    assert f"CapEff:\t{TASK_BOUNDING_SET}" in status
    # Write back the value it has, so that a failing test changes nothing on the host.
    core = as_root(
        cluster,
        "v=$(cat /proc/sys/kernel/core_pattern); "
        'printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern && echo WROTE',
    )
    assert "WROTE" not in core and "Read-only file system" in core
    for attempt in ("mount -t proc proc /mnt", "unshare -m true", "ls /proc/1/root/"):
        out = as_root(cluster, f"{attempt} && echo DONE")
        assert "DONE" not in out, attempt


def test_a_setuid_program_does_not_raise_a_users_privileges(cluster: Cluster) -> None:
    setuid_cat = cluster.jail / "usr" / "local" / "bin" / "setuid-cat"
    setuid_cat.write_bytes((cluster.jail / "usr" / "bin" / "cat").read_bytes())
    setuid_cat.chmod(0o4755)
    try:
        probe = 'setuid-cat /proc/self/status | grep -E "^(Uid|CapEff|NoNewPrivs)"'
        for out in (
            cluster.ok(cluster.login(f"srun -w {NODE} sh -c '{probe}'")),
            cluster.ok(cluster.login(probe)),  # a login session
        ):
            fields = dict(line.split(":", 1) for line in out.splitlines())
            assert "0" not in fields["Uid"].split(), out
            assert fields["CapEff"].strip() == "0000000000000000"
            assert fields["NoNewPrivs"].strip() == "1"
    finally:
        setuid_cat.unlink()


def test_each_job_has_its_own_tmp_gone_when_it_ends(cluster: Cluster) -> None:
    first = cluster.ok(
        cluster.login(
            f"sbatch --parsable -w {NODE} --mem=64M -o /dev/null "
            "--wrap 'echo mine > /tmp/first-job; echo shm > /dev/shm/first-job; sleep 20'"
        )
    ).strip()
    wait_for("the first job to run", lambda: cluster.job_state(first) == "RUNNING")
    wait_for(
        "its /tmp file",
        lambda: (
            cluster.node(NODE, f"ls /var/lib/slurm-stack/job-tmp/{first}").stdout.strip()
            == "first-job"
        ),
    )
    second = cluster.login(f"srun -w {NODE} --mem=64M sh -c 'ls -A /tmp /dev/shm'")
    assert "first-job" not in second.stdout
    cluster.ok(cluster.login(f"scancel {first}"))
    gone = "test ! -e /var/lib/slurm-stack/job-tmp/{0} && test ! -e /dev/shm/slurm-stack-jobs/{0}"
    wait_for(
        "the epilog to remove the job's directories",
        lambda: cluster.node(NODE, gone.format(first)).returncode == 0,
        timeout=60,
    )


def test_a_process_a_job_leaves_behind_is_killed_when_it_ends(cluster: Cluster) -> None:
    other = cluster.ok(
        cluster.login(f"sbatch --parsable -w {NODE} --mem=64M -o /dev/null --wrap 'sleep 300'")
    ).strip()
    wait_for("the other job to run", lambda: cluster.job_state(other) == "RUNNING")
    cluster.ok(
        cluster.login(f"srun -w {NODE} --mem=64M sh -c '(setsid sleep 4321 >/dev/null 2>&1 &)'")
    )
    alive = "ps -eo stat=,args= | grep -v '^Z' | grep -c '[s]leep 4321'"
    wait_for(
        "the left-behind process to be killed",
        lambda: cluster.node(NODE, alive).stdout.strip() == "0",
        timeout=60,
    )
    assert cluster.job_state(other) == "RUNNING"  # the user's other job was left alone
    cluster.ok(cluster.login(f"scancel {other}"))


def test_root_over_ssh_is_jail_root_without_the_way_out_of_the_chroot(
    cluster: Cluster, tmp_path: Path
) -> None:
    key = tmp_path / "root-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)

    def root_key(spec: dict) -> None:  # type: ignore[type-arg]
        spec["login"]["rootAuthorizedKeys"] = [key.with_suffix(".pub").read_text().strip()]

    cluster.edit_stack(root_key)
    cluster.sandbox.up(build=False)
    status = wait_for(
        "root's key to reach the login node",
        lambda: cluster.login_as("root", key, "id -u; grep CapBnd /proc/self/status").stdout,
    )
    uid, bounding = status.split("\n", 1)
    assert uid == "0"
    capabilities = int(bounding.split()[1], 16)
    assert not capabilities & (1 << 18 | 1 << 21 | 1 << 8)  # SYS_CHROOT, SYS_ADMIN, SETPCAP
    escape = cluster.login_as("root", key, "mkdir -p /tmp/out && chroot /tmp/out /bin/true")
    assert escape.returncode != 0 and "Operation not permitted" in escape.stderr
    assert cluster.login_as("root", key, "cat /.slurm-stack-populated").returncode == 0

    # Files of the jail that root can change and that a session runs: each runs without
    # SYS_CHROOT, or not at all (sshd does not chroot root; root-session does, then drops it).
    record = 'grep CapEff /proc/self/status > "{}"\n'
    (cluster.jail / "etc" / "ssh").mkdir(parents=True, exist_ok=True)
    planted = {
        cluster.jail / "etc" / "ssh" / "sshrc": "/tmp/sshrc-caps",
        cluster.jail / "root" / ".bashrc": "/tmp/bashrc-caps",
    }
    saved = {path: path.read_text() if path.exists() else None for path in planted}
    try:
        for path, out in planted.items():
            path.write_text((saved[path] or "") + record.format(out))
        cluster.ok(cluster.login_as("root", key, "true"))
        shell = cluster.login_as("root", key, "echo $0; grep CapEff /proc/self/status")
        assert "CapEff" in shell.stdout
        for out in planted.values():
            found = cluster.login_as("root", key, f"cat {out} 2>/dev/null").stdout.split()
            if found:  # it ran: then without SYS_CHROOT
                assert not int(found[1], 16) & 1 << 18, (out, found)
    finally:
        for path, text in saved.items():
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)


def test_an_interactive_step_gets_its_terminal_inside_the_jail(cluster: Cluster) -> None:
    command = [
        *cluster.sandbox.ssh_command(tty=True),
        f"srun -w {NODE} --pty sh -c 'tty; test -e /.slurm-stack-populated && echo in-jail'",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    lines = result.stdout.replace("\r", "").split()
    assert any(line.startswith("/dev/pts/") for line in lines), result.stdout + result.stderr
    assert "in-jail" in lines
