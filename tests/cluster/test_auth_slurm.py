"""`auth: slurm` on the real cluster: the itest stack's CPU pool with Slurm's own auth.

slurm.key comes from its Secret; slurmctld, slurmdbd, sackd and the Jobs read SlurmUser's
in-memory copy, slurmd the Secret itself. The cluster runs jobs from the login node with
accounting, and neither a job nor a login session can read the key at any path where a pod
mounts it. The REST API, turned on while a job runs, takes tokens beside auth/slurm as beside
munge, and the job carries on.
"""

from collections.abc import Iterator

import pytest
import yaml

from slurm_stack.k8s.common import munge_key_secret_name
from tests.cluster.conftest import STACK, Cluster, boot_stack, tear_down, wait_for
from tests.cluster.secret_scan import leaks, stack_secrets
from tests.cluster.test_rest_api import REFUSED_TOKEN, curl, latest

KEY_VOLUMES = ("auth-key", "slurm-key")


# Slurm's own auth and the REST API's versions differ by major: every test runs on both.
pytestmark = pytest.mark.both_majors


@pytest.fixture(scope="module")
def slurm_auth(
    tmp_path_factory: pytest.TempPathFactory, slurm_version: str | None
) -> Iterator[Cluster]:
    document = yaml.safe_load(STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    config.update(name="authslurm", namespace="slurm-authslurm", auth="slurm")
    config["workerPools"] = config["workerPools"][:1]  # cpu x2
    config["partitions"] = [{"name": "main", "default": True}]
    config["healthChecks"] = {"quick": {"intervalSeconds": 10}, "nccl": {"enabled": False}}
    del config["jail"]["submounts"]
    del config["restApi"]  # turned on later, on the running cluster
    cluster = boot_stack(document, tmp_path_factory.mktemp("authslurm"), 2, version=slurm_version)
    yield cluster
    tear_down(cluster)


def key_paths(cluster: Cluster, component: str) -> set[str]:
    """Where the pods of ``component`` mount slurm.key (the Secret or SlurmUser's copy)."""
    paths = set()
    for pod in cluster.sandbox.current_plan.pods:
        if pod.component != component:
            continue
        for container in pod.containers:
            for mount in container.mounts:
                if mount.source.rsplit("/", 1)[-1] in KEY_VOLUMES:
                    paths.add(f"{mount.target}/slurm.key")
    return paths


def test_the_cluster_runs_on_slurm_auth(slurm_auth: Cluster) -> None:
    assert "AuthType=auth/slurm" in slurm_auth.ok(slurm_auth.ctl("cat $SLURM_CONF"))
    out = slurm_auth.ok(slurm_auth.login("srun -N2 hostname"))
    assert sorted(out.split()) == ["authslurm-cpu-0", "authslurm-cpu-1"]
    job = slurm_auth.ok(
        slurm_auth.login("sbatch --parsable --wait -N2 -o ~/out.%j --wrap 'srun hostname'")
    ).strip()
    assert len(slurm_auth.ok(slurm_auth.login(f"cat ~/out.{job}")).split()) == 2
    accounting = slurm_auth.ok(slurm_auth.login(f"sacct -X -n -P -j {job} -o user,state"))
    assert accounting.strip() == "sandbox|COMPLETED"


def test_the_key_is_mounted_only_where_a_daemon_reads_it(slurm_auth: Cluster) -> None:
    plan = slurm_auth.sandbox.current_plan
    login = next(p for p in plan.pods if p.component == "login")
    sshd = next(c for c in login.containers if c.name == "sshd")
    assert not [m for m in sshd.mounts if m.source.rsplit("/", 1)[-1] in KEY_VOLUMES]
    assert key_paths(slurm_auth, "worker") == {"/run/secrets/slurm/slurm.key"}
    assert key_paths(slurm_auth, "login") >= {"/run/slurm-key/slurm.key"}


def test_no_job_or_login_session_can_read_the_key(slurm_auth: Cluster) -> None:
    paths = sorted(key_paths(slurm_auth, "worker") | key_paths(slurm_auth, "login"))
    assert paths
    for path in paths:
        from_job = slurm_auth.login(f"srun -N2 cat {path}")
        assert from_job.returncode != 0 and "No such file" in from_job.stderr, path
        from_login = slurm_auth.login(f"cat {path}")
        assert from_login.returncode != 0 and "No such file" in from_login.stderr, path
    # The daemons do read it: slurmd as root from the Secret, sackd from SlurmUser's copy.
    worker = slurm_auth.sandbox.pod_of("worker")
    owner = slurm_auth.node(worker, "stat -L -c '%U %a' /run/secrets/slurm/slurm.key")
    assert slurm_auth.ok(owner).split() == ["root", "400"]


def test_the_rest_api_turned_on_later_takes_tokens_and_spares_running_jobs(
    slurm_auth: Cluster,
) -> None:
    running = slurm_auth.ok(slurm_auth.login("sbatch --parsable --wrap 'sleep 20'")).strip()
    wait_for("the job to run", lambda: slurm_auth.job_state(running) == "RUNNING")
    slurm_auth.edit_stack(lambda c: c.update(restApi={"enabled": True}))
    report = slurm_auth.sandbox.up(build=False)
    # slurmctld and slurmdbd restart onto configs that take tokens; slurmrestd starts.
    assert {f"{slurm_auth.name}-controller-0", f"{slurm_auth.name}-rest-0"} <= set(report.created)

    status, diag = curl(slurm_auth, f"/slurm/{latest(slurm_auth)}/diag")
    assert status == 200 and diag["errors"] == [], diag
    status, accounts = curl(slurm_auth, f"/slurmdb/{latest(slurm_auth)}/accounts")
    assert status == 200 and accounts["errors"] == [], accounts
    assert slurm_auth.wait_job(running) == "COMPLETED"


def test_the_rest_api_turned_off_and_on_again_has_a_new_key(slurm_auth: Cluster) -> None:
    """Turning the API off deletes its key (a `pulumi_random` resource and its Secret); on
    again, the key is a new one and a token signed before is refused."""
    slurm_auth.edit_stack(lambda c: c.update(restApi={"enabled": True}))
    slurm_auth.sandbox.up(build=False)  # on already if the test above ran
    diag = f"/slurm/{latest(slurm_auth)}/diag"
    wait_for("the API to answer", lambda: curl(slurm_auth, diag)[0] == 200, timeout=60)
    old = slurm_auth.ok(slurm_auth.login("scontrol token lifespan=3600")).strip().split("=", 1)[1]
    assert curl(slurm_auth, diag, token=old)[0] == 200

    slurm_auth.edit_stack(lambda c: c.update(restApi={"enabled": False}))
    report = slurm_auth.sandbox.up(build=False)
    assert f"{slurm_auth.name}-rest-0" in report.removed
    slurm_auth.edit_stack(lambda c: c.update(restApi={"enabled": True}))
    slurm_auth.sandbox.up(build=False)

    wait_for("the API to answer a new token", lambda: curl(slurm_auth, diag)[0] == 200, timeout=60)
    assert curl(slurm_auth, diag, token=old)[0] == REFUSED_TOKEN


def test_no_secret_value_is_in_any_log(slurm_auth: Cluster) -> None:
    """slurm.key, which every daemon here reads, is in no log: not the pods', the Jobs' or
    the sandbox's (tests/cluster/secret_scan.py)."""
    secrets = stack_secrets(slurm_auth)
    key = f"Secret {munge_key_secret_name(slurm_auth.sandbox.spec)}/slurm.key"
    assert key in secrets, sorted(secrets)
    assert slurm_auth.ok(slurm_auth.login("srun -N2 hostname")).split()
    found, _ = leaks(slurm_auth, secrets)
    assert not found, "\n".join(found)
