"""Accounting on a MariaDB server outside the cluster's pods (`accounting.mode: external`), on
real Slurm.

Booted from `Pulumi.extdb.yaml`. Before the `up`, the test starts the project's MariaDB image
as a machine outside the cluster (slurm_stack/sandbox/outside.py) at the address the stack
names, with the database, user and password the stack gives slurmdbd, and waits until it
answers on TCP (slurmdbd would retry every 5 s meanwhile: "The database must be up when
starting the MYSQL plugin. Trying again in 5 seconds"; waiting first keeps the boot the same
every time). Nothing renders or runs a database pod. A declared user's jobs end COMPLETED in
sacct, and their records are in the outside server's tables, written by slurmdbd's
connection from its pod. Once slurmdbd's pod has been killed, a job that ran while it was
gone and one after its return reach sacct too; so does one after the server itself restarts
under slurmdbd. `sandbox down` removes the outside server with the pods. Every job's fate is
read from sacct, polling with a bounded wait.
"""

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_stack import paths
from slurm_stack.sandbox.outside import OutsideMachines
from slurm_stack.sandbox.session import Sandbox
from slurm_stack.spec.models import IMAGE_REVISION
from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for
from tests.cluster.secret_scan import leaks, stack_secrets
from tests.cluster.test_boot import ERROR_LINE, SMALL_BUFFER_POOL
from tests.cluster.test_users import keypair

STACK = Path(__file__).resolve().parent / "Pulumi.extdb.yaml"
NAME = "extdb"
USER = "ada"  # the stack's declared user
DB = "db"  # the outside machine's name: container extdb-outside-db
SECRETS = "/run/secrets/db"  # where the outside server reads its passwords
# What Slurm's accounting guide asks of the server, as an admin would set it up (the embedded
# server's settings, k8s/accounting.py mariadb_args, for a small one); slurmdbd fatals on the
# write conflicts MariaDB's snapshot isolation (on from 11.6) reports.
SERVER_OPTIONS = (
    "--innodb-buffer-pool-size=128M",
    "--innodb-log-file-size=32M",
    "--innodb-lock-wait-timeout=900",
    "--max-allowed-packet=16M",
    "--loose-innodb-snapshot-isolation=OFF",
)
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
JOB_COMPLETE = 3  # job_table.state of a completed job (slurm.h, enum job_states)


def write_private(path: Path, text: str) -> None:
    """A file only the server's user (mysql, uid 999) reads."""
    path.write_text(text)
    os.chown(path, paths.MARIADB_UID, paths.MARIADB_UID)
    path.chmod(0o400)


def start_database(sandbox: Sandbox, config: dict[str, Any], password: str) -> str:
    """The project's MariaDB image (for the stack's Slurm version) as an outside machine, set
    up on first start with the stack's database and user (its password from a file), root
    only at localhost; returns its address once it answers on TCP."""
    external = config["accounting"]["external"]
    outside = sandbox.outside()
    files = outside.directory(DB)
    data, keys = files / "data", files / "secrets"
    data.mkdir(exist_ok=True)
    keys.mkdir(mode=0o700, exist_ok=True)
    os.chown(keys, paths.MARIADB_UID, paths.MARIADB_UID)
    write_private(keys / "password", password)
    write_private(keys / "root-password", secrets.token_hex(16))
    # For the tests' own queries: the stack's user and database, over TCP as slurmdbd
    # connects (`database` is the mariadb client's alone: [mysql]).
    write_private(
        keys / "client.cnf",
        f"[client]\nuser={external['user']}\npassword={password}\nprotocol=tcp\n"
        f"host=127.0.0.1\n[mysql]\ndatabase={external['database']}\n",
    )
    image = f"localhost/slurm-stack/mariadb:{config['slurmVersion']}-{IMAGE_REVISION}"
    address = outside.start(
        DB,
        image,
        slot=0,
        podman_args=[
            "--volume", f"{data}:/var/lib/mysql",
            "--volume", f"{keys}:{SECRETS}:ro",
            "--env", f"MARIADB_DATABASE={external['database']}",
            "--env", f"MARIADB_USER={external['user']}",
            "--env", f"MARIADB_PASSWORD_FILE={SECRETS}/password",
            "--env", f"MARIADB_ROOT_PASSWORD_FILE={SECRETS}/root-password",
            "--env", "MARIADB_ROOT_HOST=localhost",
        ],
        command=["mariadbd", *SERVER_OPTIONS],
    )  # fmt: skip
    assert address == external["host"], "Pulumi.extdb.yaml must name the outside slot 0"
    health = ["healthcheck.sh", "--connect", "--innodb_initialized"]
    wait_for(
        "the outside database answering on TCP",
        lambda: outside.exec(DB, health).returncode == 0 or not outside.running(DB),
        timeout=180,
    )
    assert outside.running(DB), outside.logs(DB)
    return address


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {USER: keypair(tmp_path_factory.mktemp("extdb-keys"), USER)[0]}


@pytest.fixture(scope="module")
def extdb(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Iterator[Cluster]:
    """The stack with our key for ada, its database started outside the pods first."""
    document = yaml.safe_load(STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    for user in config["login"]["users"]:
        user["authorizedKeys"] = [keys[user["name"]].with_suffix(".pub").read_text().strip()]
    password = document["config"]["slurm-stack:accountingDbPassword"]
    cluster = boot_stack(
        document,
        tmp_path_factory.mktemp(NAME),
        1,
        # After boot_stack has set the Slurm version under test.
        before_up=lambda sandbox: start_database(sandbox, config, password),
    )
    yield cluster
    tear_down(cluster)


def outside(cluster: Cluster) -> OutsideMachines:
    return cluster.sandbox.outside()


def query(cluster: Cluster, sql: str) -> list[list[str]]:
    """Rows of ``sql`` on the outside server, as the stack's database user."""
    result = outside(cluster).exec(
        DB,
        ["mariadb", f"--defaults-extra-file={SECRETS}/client.cnf", "-N", "-B", "-e", sql],
        user="mysql",
    )
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def submit(cluster: Cluster, key: Path, command: str) -> str:
    return cluster.ok_as(USER, key, f"sbatch --parsable -o /dev/null --wrap '{command}'").strip()


def ended(cluster: Cluster, job: str, timeout: float = 180) -> str:
    """The job's `state|user` in sacct once it has ended there."""

    def row() -> str:
        line = cluster.ctl(f"sacct -X -n -P -j {job} -o state,user").stdout.strip()
        return line if line.startswith(ENDED) else ""

    return wait_for(f"job {job} ended in sacct", row, timeout=timeout)


def main_start(cluster: Cluster, pod: str) -> str:
    """When the main container of ``pod`` last started."""
    container = cluster.sandbox.node_container(pod)
    out = cluster.sandbox.podman.run(["inspect", "-f", "{{.State.StartedAt}}", container])
    return out.stdout.strip()


def test_no_database_pod_is_rendered_and_the_only_mariadb_is_outside(extdb: Cluster) -> None:
    plan = extdb.sandbox.current_plan
    assert not [pod.name for pod in plan.pods if pod.component == "database"]
    image = f"localhost/slurm-stack/mariadb:{extdb.sandbox.image_tag}"
    assert not [c.name for pod in plan.pods for c in pod.containers if c.image == image]
    # This sandbox's containers (another sandbox's may run beside it, its own MariaDB too).
    listed = extdb.sandbox.podman.run(["ps", "--format", "{{.Names}} {{.Image}}"]).stdout
    ours = [line.split() for line in listed.splitlines() if line.startswith(f"{NAME}-")]
    assert [name for name, *ran in ours if ran == [image]] == [f"{NAME}-outside-{DB}"]
    assert outside(extdb).names() == [f"{NAME}-outside-{DB}"]
    # slurmdbd's connection to the outside server comes from its pod's address.
    accounting = extdb.sandbox.pod_of("accounting")
    address = next(pod.ip for pod in plan.pods if pod.name == accounting)
    hosts = query(
        extdb,
        "SELECT host FROM information_schema.processlist "
        "WHERE user = 'slurm' AND id <> CONNECTION_ID()",  # not this query's own
    )
    assert hosts and {row[0].rsplit(":", 1)[0] for row in hosts} == {address}
    # The server answered before slurmdbd first tried it: slurmdbd logged no retry ("The
    # database must be up ...") nor any error but the small buffer pool's of a test server.
    log = extdb.sandbox.podman.logs(extdb.sandbox.node_container(accounting), tail=1000)
    assert "slurmdbd version" in log and "started" in log, log
    errors = [line for line in log.splitlines() if ERROR_LINE.search(line)]
    assert [line for line in errors if SMALL_BUFFER_POOL not in line] == [], log


def test_a_declared_users_jobs_complete_in_sacct_and_in_the_outside_database(
    extdb: Cluster, keys: dict[str, Path]
) -> None:
    jobs = [submit(extdb, keys[USER], "hostname"), submit(extdb, keys[USER], "srun true")]
    for job in jobs:
        assert ended(extdb, job) == f"COMPLETED|{USER}"
    uid = extdb.ok_as(USER, keys[USER], "id -u").strip()
    rows = query(
        extdb,
        f"SELECT id_job, state, id_user FROM {NAME}_job_table WHERE id_job IN ({','.join(jobs)})",
    )
    assert sorted(rows) == sorted([job, str(JOB_COMPLETE), uid] for job in jobs)


def test_jobs_reach_sacct_across_a_restart_of_slurmdbds_pod(
    extdb: Cluster, keys: dict[str, Path]
) -> None:
    """slurmdbd's pod killed (a crash, a lost node): a job that runs while it is gone is
    recorded once it is back (slurmctld keeps what it could not send), as is one after."""
    accounting = extdb.sandbox.pod_of("accounting")
    before = main_start(extdb, accounting)
    extdb.sandbox.kill_pod(accounting, come_back=False)
    during = submit(extdb, keys[USER], "hostname")
    extdb.wait_job(during)  # its fate is sacct's to tell, once slurmdbd is back
    extdb.sandbox.restore()
    assert main_start(extdb, accounting) != before
    after = submit(extdb, keys[USER], "hostname")
    for job in (during, after):
        assert ended(extdb, job) == f"COMPLETED|{USER}"
    rows = query(extdb, f"SELECT id_job FROM {NAME}_job_table WHERE id_job IN ({during},{after})")
    assert sorted(row[0] for row in rows) == sorted([during, after])


def test_a_job_reaches_sacct_after_the_outside_server_restarts(
    extdb: Cluster, keys: dict[str, Path]
) -> None:
    """The database server restarted under a running slurmdbd (maintenance): slurmdbd
    connects again by itself, and the next job is recorded."""
    outside(extdb).restart(DB)
    health = ["healthcheck.sh", "--connect", "--innodb_initialized"]
    wait_for("the outside database back", lambda: outside(extdb).exec(DB, health).returncode == 0)
    job = submit(extdb, keys[USER], "hostname")
    assert ended(extdb, job) == f"COMPLETED|{USER}"
    assert query(extdb, f"SELECT state FROM {NAME}_job_table WHERE id_job = {job}") == [
        [str(JOB_COMPLETE)]
    ]


def test_no_database_password_is_in_any_log(extdb: Cluster) -> None:
    """The external database's password (`accountingDbPassword`), which slurmdbd uses, is in
    no log (tests/cluster/secret_scan.py)."""
    secrets = stack_secrets(extdb)
    password = yaml.safe_load(extdb.stack_file.read_text())["config"][
        "slurm-stack:accountingDbPassword"
    ]
    secrets["accountingDbPassword"] = password.encode()
    assert extdb.sandbox.spec.name in extdb.ok(
        extdb.login("sacctmgr -n -P show cluster format=cluster")
    )
    found, _ = leaks(extdb, secrets)
    assert not found, "\n".join(found)


# Last: it takes the stack down.
def test_sandbox_down_removes_the_outside_machine_and_its_files(extdb: Cluster) -> None:
    """Last: a suite run leaves nothing behind."""
    if os.environ.get("KEEP_SANDBOX") == "1":
        pytest.skip("KEEP_SANDBOX=1 keeps the sandbox")
    extdb.sandbox.down(delete_data=True)
    assert outside(extdb).names() == []
    gone = subprocess.run(["podman", "container", "exists", f"{NAME}-outside-{DB}"], check=False)
    assert gone.returncode == 1
    assert not (extdb.sandbox.state.root / "outside").exists()
