"""The sandbox's translation of rendered manifests into podman pods (pure; no podman here)."""

import base64

import pytest

from slurm_stack.offline import ProgramRun, manifests
from slurm_stack.sandbox.plan import Plan, plan

STATE = "/var/lib/slurm-stack/sandbox/dev"


@pytest.fixture(scope="module")
def dev_plan(dev_run: ProgramRun) -> Plan:
    return plan(manifests(dev_run.resources), STATE)


def test_pods_in_start_order(dev_plan: Plan) -> None:
    order = [(pod.phase, pod.name, pod.job) for pod in dev_plan.pods]
    names = [name for _, name, _ in order]
    assert names[:3] == ["dev-mariadb-0", "dev-accounting-0", "dev-controller-0"]
    assert names[3].startswith("dev-populate-jail-") and order[3][2]
    assert names[4:7] == ["dev-cpu-0", "dev-cpu-1", "dev-login-0"]  # replicas: 2 workers
    assert names[7].startswith("dev-reconfigure-") and order[7][2]
    assert len({pod.ip for pod in dev_plan.pods}) == len(dev_plan.pods)


def test_sidecars_start_first_and_init_containers_before_main(dev_plan: Plan) -> None:
    login = next(pod for pod in dev_plan.pods if pod.name == "dev-login-0")
    assert [(c.name, c.role) for c in login.containers] == [
        ("munge", "sidecar"),
        ("sackd", "sidecar"),
        ("wait-for-jail", "init"),
        ("sshd", "main"),
    ]


def test_services_become_host_names(dev_plan: Plan) -> None:
    pods = {pod.name: pod.ip for pod in dev_plan.pods}
    assert dev_plan.hosts["dev-controller.slurm-dev.svc"] == pods["dev-controller-0"]
    assert dev_plan.hosts["dev-mariadb.slurm-dev.svc"] == pods["dev-mariadb-0"]
    assert dev_plan.hosts["dev-cpu-1.dev-cpu.slurm-dev.svc"] == pods["dev-cpu-1"]
    assert not any(name.startswith("dev-populate-jail") for name in dev_plan.hosts)


def test_security_context_is_carried_over(dev_plan: Plan) -> None:
    containers = {(pod.name, c.name): c for pod in dev_plan.pods for c in pod.containers}
    slurmctld = containers[("dev-controller-0", "slurmctld")]
    assert slurmctld.user == 64030 and slurmctld.cap_add == ()
    slurmd = containers[("dev-cpu-0", "slurmd")]
    assert slurmd.user == 0 and "SYS_ADMIN" in slurmd.cap_add and slurmd.apparmor_unconfined
    assert not slurmd.privileged
    assert slurmd.command == ("/usr/lib/slurm-stack/entrypoint", "slurmd")


def test_volumes_files_and_secret_env(dev_plan: Plan, dev_run: ProgramRun) -> None:
    files = {f.path: f for f in dev_plan.files}
    key = files[f"{STATE}/pods/dev-controller-0/auth-key/munge.key"]
    auth = dev_run.get("random:index/randomBytes:RandomBytes", "dev-secrets-auth-key")
    assert key.content == base64.b64decode(auth.outputs["base64"]) and key.mode == 0o440
    assert files[f"{STATE}/pods/dev-login-0/authorized-keys/alice"].mode == 0o644
    assert (
        b"ClusterName=dev"
        in files[f"{STATE}/pods/dev-controller-0/slurm-config/slurm.conf"].content
    )
    mariadb = next(pod for pod in dev_plan.pods if pod.name == "dev-mariadb-0").containers[0]
    password = dev_run.get("random:index/randomPassword:RandomPassword", "dev-secrets-db-password")
    assert dict(mariadb.env)["MARIADB_PASSWORD"] == password.outputs["result"]
    workers = [pod for pod in dev_plan.pods if pod.component == "worker"]
    for pod in workers:  # every node shares the jail claim, each has its own scratch
        mounts = {m.target: m.source for c in pod.containers for m in c.mounts}
        assert mounts["/mnt/jail"] == f"{STATE}/claims/dev-jail"
        assert mounts["/mnt/submounts/scratch"] == f"{STATE}/pods/{pod.name}/sm-scratch"


def test_plan_is_deterministic(dev_run: ProgramRun) -> None:
    assert plan(manifests(dev_run.resources), STATE) == plan(manifests(dev_run.resources), STATE)
