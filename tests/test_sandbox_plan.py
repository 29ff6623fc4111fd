"""The sandbox's translation of rendered manifests into podman pods (pure; no podman here)."""

import base64
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from slurm_stack.offline import ProgramRun, manifests, run_program
from slurm_stack.program import run
from slurm_stack.sandbox.apply import fingerprint
from slurm_stack.sandbox.plan import STARTS_AFTER, File, Plan, plan
from slurm_stack.sandbox.podman import container_create_args, env_file_text
from slurm_stack.sandbox.seccomp import write_runtime_default_profile
from tests.conftest import DEV_STACK
from tests.helpers import kube

STATE = "/var/lib/slurm-stack/sandbox/dev"


@pytest.fixture(scope="module")
def dev_plan(dev_run: ProgramRun) -> Plan:
    return plan(manifests(dev_run.resources), STATE)


WORKLOADS = ("apps/v1:StatefulSet", "apps/v1:Deployment", "batch/v1:Job")
# Where the sandbox waits longer than the program's dependsOn makes Pulumi wait (plan.py).
SANDBOX_ONLY_WAITS = {"worker": {"reconfigure"}}


@pytest.fixture(scope="module")
def rest_dev_run() -> ProgramRun:
    """The dev stack with the REST API and the node-state controller, so that every component
    of STARTS_AFTER runs."""
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config["restApi"] = {"enabled": True}
    config["nodeState"] = {"enabled": True}
    return run_program(run, config={"slurm-stack:cluster": json.dumps(config)})


def test_pods_start_after_what_the_program_makes_them_depend_on(
    rest_dev_run: ProgramRun,
) -> None:
    """STARTS_AFTER is the program's dependsOn graph between workloads, read by component."""
    component_of = {
        r.urn: r.inputs["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
        for kind in WORKLOADS
        for r in kube(rest_dev_run, kind)
    }
    resources = {r.urn: r for r in rest_dev_run.resources}
    seen = set()
    for urn, component in component_of.items():
        waits = {component_of[d] for d in resources[urn].dependencies if d in component_of}
        expected = set(STARTS_AFTER[component]) - SANDBOX_ONLY_WAITS.get(component, set())
        # dev has accounting, so every edge of the table is in its graph.
        assert waits == expected, component
        seen.add(component)
    assert seen == set(STARTS_AFTER)


def test_pods_in_start_order(dev_plan: Plan) -> None:
    phase = {pod.name.rsplit("-", 1)[0]: pod.phase for pod in dev_plan.pods}
    # The jail's copy needs nothing that runs: it starts with the database.
    assert phase["dev-mariadb"] == phase["dev-populate-jail"] == 0
    assert phase["dev-accounting"] == 1 and phase["dev-controller"] == 2
    # The exporter, the pool's update Job and the config push once the controller runs; the
    # login pod once the jail is populated too.
    for name in ("dev-exporter", "dev-pool-update", "dev-reconfigure", "dev-login"):
        assert phase[name] == 3, name
    assert phase["dev-cpu"] == 4  # last: after its pool's update Job and the config push
    assert phase["dev-users"] == 4  # after the config push too (components/cluster.py)
    assert [pod.phase for pod in dev_plan.pods] == sorted(pod.phase for pod in dev_plan.pods)
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
    assert key.content == base64.b64decode(auth.outputs["base64"]) and key.mode == 0o400
    alice = files[f"{STATE}/pods/dev-login-0/authorized-keys/authorized_keys.alice"]
    assert alice.mode == 0o644 and alice.content.startswith(b"ssh-ed25519 ")
    assert (
        b"ClusterName=dev"
        in files[f"{STATE}/pods/dev-controller-0/slurm-config/slurm.conf"].content
    )
    mariadb = next(pod for pod in dev_plan.pods if pod.name == "dev-mariadb-0").containers[0]
    password = dev_run.get("random:index/randomPassword:RandomPassword", "dev-secrets-db-password")
    assert dict(mariadb.env)["MARIADB_PASSWORD_FILE"] == "/run/secrets/mariadb-user/password"
    user_password = files[f"{STATE}/pods/dev-mariadb-0/user-password/password"]
    assert user_password.content == password.outputs["result"].encode()
    assert user_password.mode == 0o440
    workers = [pod for pod in dev_plan.pods if pod.component == "worker"]
    for pod in workers:  # every node shares the jail claim, each has its own scratch
        mounts = {m.target: m.source for c in pod.containers for m in c.mounts}
        assert mounts["/mnt/jail"] == f"{STATE}/claims/dev-jail"
        assert mounts["/mnt/submounts/scratch"] == f"{STATE}/pods/{pod.name}/sm-scratch"


def test_plan_is_deterministic(dev_run: ProgramRun) -> None:
    assert plan(manifests(dev_run.resources), STATE) == plan(manifests(dev_run.resources), STATE)


def test_addresses_are_kept_across_plans(dev_run: ProgramRun) -> None:
    first = plan(manifests(dev_run.resources), STATE)
    ips = {pod.name: pod.ip for pod in first.pods}
    ips["dev-cpu-0"], ips["dev-login-0"] = ips["dev-login-0"], ips["dev-cpu-0"]
    again = plan(manifests(dev_run.resources), STATE, ips=ips)
    assert {pod.name: pod.ip for pod in again.pods} == ips


def test_readonly_claims_get_no_fs_group(dev_plan: Plan) -> None:
    controller = next(pod for pod in dev_plan.pods if pod.name == "dev-controller-0")
    assert controller.fs_group == 64030
    assert f"{STATE}/claims/dev-jail" in controller.volume_dirs
    assert f"{STATE}/claims/dev-jail" not in controller.fs_group_dirs
    assert f"{STATE}/claims/dev-controller-state" in controller.fs_group_dirs


def test_upstream_mariadb_runs_as_the_local_build(dev_run: ProgramRun) -> None:
    local = plan(manifests(dev_run.resources), STATE, image_tag="26.05-0.1.0")
    mariadb = next(pod for pod in local.pods if pod.name == "dev-mariadb-0").containers[0]
    assert mariadb.image == "localhost/slurm-stack/mariadb:26.05-0.1.0"
    assert mariadb.probe is not None and mariadb.probe.command[0] == "healthcheck.sh"


def test_podman_arguments_follow_the_security_context(dev_plan: Plan) -> None:
    pod = next(pod for pod in dev_plan.pods if pod.name == "dev-cpu-0")
    slurmd = next(c for c in pod.containers if c.name == "slurmd")
    args = container_create_args(
        pod, slurmd, "/env", "/hosts", restart=True, runtime_default_seccomp="/p.json"
    )
    assert args[args.index("--user") + 1] == "0"
    assert "seccomp=/p.json" in args
    assert "--privileged" not in args
    caps = [args[i + 1] for i, a in enumerate(args) if a == "--cap-add"]
    assert "sys_admin" in caps and "net_admin" not in caps
    assert args[args.index("--cap-drop") + 1] == "all"
    assert "apparmor=unconfined" in args
    assert f"type=bind,src={STATE}/claims/dev-jail,dst=/mnt/jail" in args
    assert args[args.index("--entrypoint") + 1] == '["/usr/lib/slurm-stack/entrypoint", "slurmd"]'
    assert args[args.index("--restart") + 1] == "always"
    assert any(a.startswith("slurm-stack.io/pre-stop=") for a in args)


def test_env_values_must_fit_on_one_line(dev_plan: Plan) -> None:
    pod = next(pod for pod in dev_plan.pods if pod.name == "dev-cpu-0")
    slurmd = next(c for c in pod.containers if c.name == "slurmd")
    assert "SLURMD_CONF_SERVER=dev-controller.slurm-dev.svc:6817\n" in env_file_text(slurmd)
    broken = replace(slurmd, env=(("X", "a\nb"),))
    with pytest.raises(ValueError, match="spans lines"):
        env_file_text(broken)


def test_fingerprint_follows_files_and_images(dev_plan: Plan) -> None:
    pod = dev_plan.pods[0]
    files = [File("/x/a", b"1", 0o644)]
    assert fingerprint(pod, files) == fingerprint(pod, list(files))
    assert fingerprint(pod, files) != fingerprint(pod, [File("/x/a", b"2", 0o644)])
    assert fingerprint(pod, files, ("sha256:1",)) != fingerprint(pod, files, ("sha256:2",))


def test_config_volumes_are_kept_current_unless_immutable(dev_plan: Plan) -> None:
    login = next(pod for pod in dev_plan.pods if pod.name == "dev-login-0")
    projected = dict(login.projected_dirs)
    # The users ConfigMap is updated in place; the hash-named config and Secrets are not
    # (Secrets from Pulumi are mutable too, and the kubelet refreshes them as well).
    assert projected[f"{STATE}/pods/dev-login-0/authorized-keys"] is True
    assert projected[f"{STATE}/pods/dev-login-0/sshd-config"] is False


def test_in_memory_volumes_become_sized_tmpfs(dev_plan: Plan) -> None:
    worker = next(pod for pod in dev_plan.pods if pod.name == "dev-cpu-0")
    memory = dict(worker.memory_dirs)
    # The worker's /dev/shm (shmSize, 16Gi by default) and the munge socket directory.
    assert memory[f"{STATE}/pods/dev-cpu-0/shm"] == 16 * 2**30
    assert memory[f"{STATE}/pods/dev-cpu-0/munge-socket"] == 16 * 2**20
    # The jail is a claim and the spool a disk emptyDir: neither is in memory.
    assert not [path for path in memory if "/claims/" in path or path.endswith("/spool")]


def test_pods_leave_highest_ordinal_first_and_carry_their_grace(dev_plan: Plan) -> None:
    from slurm_stack.sandbox.apply import _ordinal_order
    from slurm_stack.sandbox.podman import GRACE_LABEL, pod_create_args

    names = ["itest-cpu-9", "itest-cpu-10", "itest-cpu-2", "itest-gpu-0"]
    assert sorted(names, key=_ordinal_order, reverse=True)[:3] == [
        "itest-gpu-0",
        "itest-cpu-10",
        "itest-cpu-9",
    ]
    worker = next(pod for pod in dev_plan.pods if pod.name == "dev-cpu-0")
    args = pod_create_args(worker, "net", "dev", "f")
    # The preStop drain's wait plus time to delete the node record.
    assert f"{GRACE_LABEL}={worker.grace_seconds}" in args and worker.grace_seconds > 30


def test_seccomp_is_unconfined_unless_the_manifest_asks_for_the_runtime_default(
    dev_plan: Plan,
) -> None:
    login = next(pod for pod in dev_plan.pods if pod.name == "dev-login-0")
    by_name = {c.name: c for c in login.containers}
    assert by_name["sshd"].seccomp == "RuntimeDefault"
    unconfined = replace(by_name["sshd"], seccomp="Unconfined")
    args = container_create_args(login, unconfined, "/env", "/hosts", restart=True)
    assert "seccomp=unconfined" in args
    with pytest.raises(ValueError, match="seccomp"):
        container_create_args(login, by_name["sshd"], "/env", "/hosts", restart=True)


def test_the_runtime_default_profile_gates_and_refuses_as_containerds_does(
    tmp_path: Path,
) -> None:
    source = tmp_path / "podman.json"
    source.write_text(
        json.dumps(
            {
                "defaultAction": "SCMP_ACT_ERRNO",
                "defaultErrnoRet": 38,
                "syscalls": [
                    {"names": ["read", "mount", "pivot_root"], "action": "SCMP_ACT_ALLOW"},
                    {"names": ["pivot_root"], "action": "SCMP_ACT_ALLOW"},
                ],
            }
        )
    )
    written = json.loads(write_runtime_default_profile(tmp_path / "out.json", source).read_text())
    assert written["syscalls"][0] == {"names": ["read"], "action": "SCMP_ACT_ALLOW"}
    naming = [rule for rule in written["syscalls"] if "mount" in rule["names"]]
    assert naming == [
        {
            "names": naming[0]["names"],
            "action": "SCMP_ACT_ALLOW",
            "includes": {"caps": ["CAP_SYS_ADMIN"]},
        }
    ]
    assert not [rule for rule in written["syscalls"] if "pivot_root" in rule["names"]]
    assert (written["defaultAction"], written["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", 1)


def test_a_pod_keeps_its_mac_address_with_its_ip(dev_plan: Plan) -> None:
    from slurm_stack.sandbox.podman import mac_address, pod_create_args

    worker = next(pod for pod in dev_plan.pods if pod.name == "dev-cpu-0")
    args = pod_create_args(worker, "net", "dev", "f")
    assert args[args.index("--mac-address") + 1] == mac_address(worker.ip)
    assert mac_address("10.89.7.16") == "02:53:0a:59:07:10"  # locally administered, unicast
    macs = {mac_address(pod.ip) for pod in dev_plan.pods}
    assert len(macs) == len(dev_plan.pods)


def test_an_optional_secret_volume_without_its_secret_is_empty_as_the_kubelet_mounts_it() -> None:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config["containers"] = {"enabled": True}
    objects = manifests(
        run_program(run, config={"slurm-stack:cluster": json.dumps(config)}).resources
    )
    # No containerRegistryAuth: the workers' registry-auth volume names a Secret that is absent.
    assert not [o for o in objects if o["metadata"]["name"] == "dev-registry-auth"]
    planned = plan(objects, STATE)
    worker = next(p for p in planned.pods if p.name == "dev-cpu-0")
    [slurmd] = [c for c in worker.containers if c.name == "slurmd"]
    auth = next(m for m in slurmd.mounts if m.target == "/etc/slurm-stack/registry")
    assert not [f for f in planned.files if f.path.startswith(auth.source + "/")]
    # A volume whose Secret must exist fails the plan, naming it (the kubelet would not start
    # the pod either).
    for manifest in objects:
        for volume in (
            manifest.get("spec", {}).get("template", {}).get("spec", {}).get("volumes", [])
        ):
            if volume.get("secret", {}).get("optional"):
                volume["secret"]["optional"] = False
    with pytest.raises(ValueError, match="volume registry-auth needs Secret dev-registry-auth"):
        plan(objects, STATE)


def test_no_pod_is_ever_given_an_outside_machines_address() -> None:
    """Pods take the subnet from .10 up to .239, however many there are; .240-.254 are kept
    for machines outside the cluster (outside.py), the tools below .10 for the sandbox's."""
    from slurm_stack.sandbox.kube_api import kube_api_address
    from slurm_stack.sandbox.outside import outside_address
    from slurm_stack.sandbox.plan import allocate_ips, outside_addresses, pod_addresses
    from slurm_stack.sandbox.prometheus import prometheus_address

    subnet = "10.89.7.0/24"
    outside = outside_addresses(subnet)
    assert (outside[0], outside[-1]) == ("10.89.7.240", "10.89.7.254")
    assert [outside_address(subnet, slot) for slot in range(len(outside))] == outside
    names = [f"pod-{i}" for i in range(len(pod_addresses(subnet)))]
    given = allocate_ips(names, subnet, {})
    assert sorted(given.values()) == sorted(pod_addresses(subnet))
    assert (given["pod-0"], given[names[-1]]) == ("10.89.7.10", "10.89.7.239")
    tools = {kube_api_address(subnet), prometheus_address(subnet)}
    assert not set(given.values()) & (set(outside) | tools)
    assert not set(outside) & tools
    # Pods that come back keep theirs; with every pod address taken, a new pod gets none of
    # the outside machines' but fails, naming the subnet.
    with pytest.raises(ValueError, match="too few addresses"):
        allocate_ips([*names, "one-more"], subnet, given)
    with pytest.raises(ValueError, match="slots 0 to 14"):
        outside_address(subnet, len(outside))
