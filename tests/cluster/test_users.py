"""Declared users on the real cluster: the dev stack with two users whose keys we hold.

Each user logs in over SSH through the login node with its own key, has the declared ids and
groups and its own home, runs jobs as itself under its Slurm account; a re-apply keeps what
users stored; a removed user is locked out and may not submit, with its home and running job
left alone; a name that an admin created by hand in the jail is refused with its config key.
"""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from slurm_stack.sandbox.apply import SandboxError
from slurm_stack.spec.models import derived_id
from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for

DEV_STACK = Path(__file__).resolve().parents[2] / "Pulumi.dev.yaml"
ALICE_UID = derived_id("alice")  # alice declares no uid
BOB_UID = 31000


def keypair(directory: Path, name: str) -> tuple[Path, str]:
    key = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key, key.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("user-keys")
    return {name: keypair(directory, name)[0] for name in ("alice", "bob")}


def public(key: Path) -> str:
    return key.with_suffix(".pub").read_text().strip()


def bob(keys: dict[str, Path]) -> dict:  # type: ignore[type-arg]
    return {
        "name": "bob",
        "uid": BOB_UID,
        "groups": ["ml", "alice"],
        "account": "vision",
        "defaultQos": "interactive",
        "authorizedKeys": [public(keys["bob"])],
    }


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Iterator[Cluster]:
    """The dev stack as shipped, renamed so it cannot meet a developer's own dev sandbox,
    with alice's key replaced by one we hold and a second user, bob."""
    document = yaml.safe_load(DEV_STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    config["name"], config["namespace"] = "users", "slurm-users"
    (alice,) = config["login"]["users"]
    alice["authorizedKeys"] = [public(keys["alice"])]
    alice["groups"] = ["ml"]
    config["login"]["users"].append(bob(keys))
    cluster = boot_stack(document, tmp_path_factory.mktemp("users"), 2)
    yield cluster
    tear_down(cluster)


def test_declared_users_log_in_with_their_ids_groups_and_homes(
    users: Cluster, keys: dict[str, Path]
) -> None:
    out = users.ok_as(
        "alice", keys["alice"], "id -u; id -g; id -Gn; stat -c '%u %g %a' ~; echo $SHELL"
    )
    assert out.split("\n")[:5] == [
        str(ALICE_UID),
        str(ALICE_UID),
        "alice ml",
        f"{ALICE_UID} {ALICE_UID} 700",
        "/bin/bash",
    ]
    out = users.ok_as("bob", keys["bob"], "id -u; id -g; id -Gn; stat -c '%u %a' ~")
    uid, gid, groups, home = out.splitlines()
    assert (uid, gid, home) == (str(BOB_UID), str(BOB_UID), f"{BOB_UID} 700")
    assert sorted(groups.split()) == ["alice", "bob", "ml"]
    # One user's key does not open another's account.
    assert users.login_as("bob", keys["alice"], "true").returncode != 0


def test_jobs_run_as_their_user_under_the_declared_account(
    users: Cluster, keys: dict[str, Path]
) -> None:
    script = "sbatch --parsable --wait -N2 -o ~/ids.%j --wrap 'srun id -un'"
    job = users.ok_as("bob", keys["bob"], script).strip()
    assert users.ok_as("bob", keys["bob"], f"cat ~/ids.{job}").split() == ["bob", "bob"]
    assert users.ok_as("bob", keys["bob"], "srun -N2 id -u").split() == [str(BOB_UID)] * 2
    accounting = users.ok(users.ctl(f"sacct -X -n -P -j {job} -o user,account,qos,state"))
    assert accounting.strip() == "bob|vision|interactive|COMPLETED"
    job = users.ok_as("alice", keys["alice"], "sbatch --parsable --wait --wrap true").strip()
    accounting = users.ok(users.ctl(f"sacct -X -n -P -j {job} -o user,account,state"))
    assert accounting.strip() == "alice|users|COMPLETED"  # the cluster's default account


def test_a_shell_on_a_running_jobs_node_for_its_user_only(
    users: Cluster, keys: dict[str, Path]
) -> None:
    """`srun --overlap --jobid=<id> --pty bash` from the login node (docs/users.md): the
    job's user gets a terminal on the job's node, inside the job (its private /tmp); another
    user is refused."""
    # --exclusive: the job holds every CPU of its node, and the shell still gets in.
    submit = "sbatch --parsable --exclusive --wrap 'echo inside > /tmp/mark; sleep 300'"
    job = users.ok_as("alice", keys["alice"], submit).strip()
    try:
        wait_for("alice's job running", lambda: users.job_state(job) == "RUNNING", timeout=60)
        node = users.ok(users.ctl(f"squeue -h -j {job} -o %N")).strip()
        argv = users.sandbox.ssh_command("alice", tty=True, identity=keys["alice"])
        step = f"srun --overlap --jobid={job} --pty bash -c 'tty; hostname; cat /tmp/mark'"
        shell = subprocess.run([*argv, step], capture_output=True, text=True, timeout=60)
        lines = [line.strip() for line in shell.stdout.splitlines() if line.strip()]
        assert shell.returncode == 0, shell
        assert lines[0].startswith("/dev/pts/") and lines[1:3] == [node, "inside"], lines
        other = users.login_as("bob", keys["bob"], f"srun --overlap --jobid={job} true")
        assert other.returncode != 0
        assert "Access/permission denied" in other.stderr, other.stderr
    finally:
        users.ctl(f"scancel {job}")


def test_keys_are_served_from_a_volume_sshd_would_refuse_as_a_directory(
    users: Cluster, keys: dict[str, Path]
) -> None:
    """The sandbox gives the keys' ConfigMap volume the kubelet's 0777 directory; sshd reading
    keys from it as AuthorizedKeysFile refuses them, as it did on a real node."""
    sshd = users.sandbox.node_container(users.sandbox.pod_of("login"))
    podman = users.sandbox.podman
    stat = podman.exec(sshd, ["stat", "-c", "%a %U", "/etc/ssh/authorized-keys"])
    assert stat.stdout.split() == ["777", "root"]
    strict = (
        "/usr/sbin/sshd -p 2222 -f /etc/ssh/slurm-stack/sshd_config -E /tmp/strict.log "
        "-o AuthorizedKeysCommand=none "
        "-o 'AuthorizedKeysFile /etc/ssh/authorized-keys/authorized_keys.%u'"
    )
    assert podman.exec(sshd, ["sh", "-c", strict]).returncode == 0
    try:
        argv = users.sandbox.ssh_command("alice", identity=keys["alice"])
        refused = subprocess.run(
            [*argv[:-1], "-p", "2222", argv[-1], "true"], capture_output=True, text=True
        )
        assert refused.returncode != 0
        log = podman.exec(sshd, ["cat", "/tmp/strict.log"]).stdout
        assert "bad ownership or modes for directory /etc/ssh/authorized-keys" in log
    finally:
        podman.exec(sshd, ["sh", "-c", "pkill -f 'sshd -p 2222'"])


def test_a_reapply_keeps_homes_and_changes_nothing(users: Cluster, keys: dict[str, Path]) -> None:
    users.ok_as("alice", keys["alice"], "echo results > ~/kept.txt")
    passwd = (users.jail / "etc" / "passwd").read_bytes()
    report = users.sandbox.up(build=False)
    assert report.created == () and report.jobs_run == ()  # same users: no new users Job
    assert (users.jail / "etc" / "passwd").read_bytes() == passwd
    assert users.ok_as("alice", keys["alice"], "cat ~/kept.txt").strip() == "results"


def test_a_removed_user_is_locked_out_and_keeps_home_and_running_job(
    users: Cluster, keys: dict[str, Path]
) -> None:
    users.ok_as("bob", keys["bob"], "echo mine > ~/notes.txt")
    running = users.ok_as("bob", keys["bob"], "sbatch --parsable --wrap 'sleep 20'").strip()
    wait_for("bob's job running", lambda: users.job_state(running) == "RUNNING")

    users.edit_stack(lambda c: c["login"].__setitem__("users", c["login"]["users"][:1]))
    report = users.sandbox.up(build=False)
    assert report.created == () and len(report.jobs_run) == 1  # login pods kept: keys live

    assert users.login_as("bob", keys["bob"], "true").returncode != 0
    sshd = users.sandbox.node_container(users.sandbox.pod_of("login"))
    submit = users.sandbox.podman.exec(
        sshd, ["chroot", "--userspec=bob:bob", "/mnt/jail", "sbatch", "--wrap", "true"]
    )
    assert submit.returncode != 0, submit.stdout
    assert (users.jail / "home" / "bob" / "notes.txt").read_text() == "mine\n"
    assert users.wait_job(running) == "COMPLETED"  # not killed by the update

    users.edit_stack(lambda c: c["login"]["users"].append(bob(keys)))
    users.sandbox.up(build=False)
    assert users.ok_as("bob", keys["bob"], "cat ~/notes.txt").strip() == "mine"
    job = users.ok_as("bob", keys["bob"], "sbatch --parsable --wait --wrap true").strip()
    assert users.job_state(job) == "COMPLETED"


def test_a_name_an_admin_created_by_hand_is_refused(users: Cluster, keys: dict[str, Path]) -> None:
    sshd = users.sandbox.node_container(users.sandbox.pod_of("login"))
    users.ok(
        users.sandbox.podman.exec(
            sshd, ["chroot", "/mnt/jail", "useradd", "--uid", "32000", "--no-create-home", "carol"]
        )
    )
    passwd = (users.jail / "etc" / "passwd").read_bytes()
    carol = {"name": "carol", "authorizedKeys": [public(keys["alice"])]}
    users.edit_stack(lambda c: c["login"]["users"].append(carol))
    with pytest.raises(SandboxError) as failed:
        users.sandbox.up(build=False)
    assert (
        "slurm-stack:cluster.login.users[2].name: 'carol' already exists in the jail (uid 32000)"
        in str(failed.value)
    )
    assert (users.jail / "etc" / "passwd").read_bytes() == passwd


def test_the_next_users_job_finds_no_file_or_process_of_the_last(
    users: Cluster, keys: dict[str, Path]
) -> None:
    node = "users-cpu-0"
    users.ok_as(
        "alice",
        keys["alice"],
        # The stray process lets go of the step's output, or srun would wait on it.
        f"srun -w {node} sh -c 'echo secret > /tmp/alice-was-here; "
        "(setsid sleep 2468 </dev/null >/dev/null 2>&1 &)'",
    )
    out = users.ok_as(
        "bob",
        keys["bob"],
        f'srun -w {node} sh -c \'ls -A /tmp; ps -eo user=,stat=,args= | grep "[s]leep 2468" | '
        'grep -v " Z" || true\'',
    )
    assert "alice-was-here" not in out and "sleep 2468" not in out, out
