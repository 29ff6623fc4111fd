"""The stack program under Pulumi's mock engine: graph, options, secrets, exports."""

import json
import re

import pytest

from slurm_stack.k8s.accounting import storage_pass_problem
from slurm_stack.offline import ProgramRun, run_program
from slurm_stack.program import run
from slurm_stack.spec import SpecError
from tests.helpers import by_content, by_name, containers, kube, spec_error_text

COMPONENTS = {
    "SlurmCluster",
    "ClusterSecrets",
    "Accounting",
    "Controller",
    "Jail",
    "LoginPool",
    "WorkerPool",
    "Users",
    "NetworkPolicies",
    "Metrics",
}


def component(run: ProgramRun, name: str):
    return run.get(f"slurm-stack:index:{name.split('/')[0]}", name.split("/")[-1])


def test_graph_shape(dev_run: ProgramRun) -> None:
    types = {r.type.removeprefix("slurm-stack:index:") for r in dev_run.resources if not r.custom}
    assert types == COMPONENTS  # no HealthChecks: dev has no GPU pool
    cluster = dev_run.get("slurm-stack:index:SlurmCluster", "dev")
    assert cluster.parent is None or cluster.parent.endswith("pulumi:pulumi:Stack::slurm-stack-dev")
    digest = re.compile(r"-[0-9a-f]{6,}$")
    children = {(r.type, digest.sub("-<digest>", r.name)) for r in dev_run.children(cluster.urn)}
    assert children == {
        ("slurm-stack:index:ClusterSecrets", "dev-secrets"),
        ("slurm-stack:index:Accounting", "dev-accounting"),
        ("slurm-stack:index:Controller", "dev-controller"),
        ("slurm-stack:index:Jail", "dev-jail"),
        ("slurm-stack:index:LoginPool", "dev-login"),
        ("slurm-stack:index:WorkerPool", "dev-cpu"),
        ("slurm-stack:index:Users", "dev-users"),
        ("kubernetes:core/v1:ConfigMap", "dev-slurm-config-<digest>"),
        ("kubernetes:batch/v1:Job", "dev-reconfigure-<digest>"),
        ("kubernetes:core/v1:ServiceAccount", "dev-reconfigure-service-account"),
        ("kubernetes:batch/v1:Job", "dev-cpu-update-<digest>"),
        ("kubernetes:core/v1:ServiceAccount", "dev-pool-update-service-account"),
        ("kubernetes:policy/v1:PodDisruptionBudget", "dev-services-disruption-budget"),
        ("slurm-stack:index:NetworkPolicies", "dev-network"),
        ("slurm-stack:index:Metrics", "dev-metrics"),
    }
    # Every resource hangs under the cluster, and every component registered its outputs.
    urns = {r.urn: r for r in dev_run.resources}
    for resource in dev_run.resources:
        if resource is not cluster:
            assert resource.parent in urns, resource.urn
        if not resource.custom:
            assert resource.outputs_registered, resource.urn


def test_objects_named_by_content_carry_the_digest_in_their_logical_name(
    dev_run: ProgramRun,
) -> None:
    """A revert after a failed update registers the old object again, which still exists:
    with a fixed logical name it would be a replacement onto a name that is taken."""
    named = [
        ("kubernetes:core/v1:ConfigMap", "dev-slurm-config"),
        ("kubernetes:core/v1:ConfigMap", "dev-accounting-config"),
        ("kubernetes:core/v1:ConfigMap", "dev-login-config"),
        ("kubernetes:batch/v1:Job", "dev-reconfigure"),
        ("kubernetes:batch/v1:Job", "dev-users-sync"),
        ("kubernetes:batch/v1:Job", "dev-jail-populate"),
    ]
    for type_, name in named:
        resource = by_content(dev_run, type_, name)
        digest = resource.name.removeprefix(f"{name}-")
        assert resource.inputs["metadata"]["name"].endswith(f"-{digest}"), resource.name
        # Stacks deployed before keep their object: the old fixed name is an alias.
        assert resource.alias_names == (name,), resource.name


def test_only_user_data_is_protected(dev_run: ProgramRun) -> None:
    protected = {r.inputs["metadata"]["name"] for r in dev_run.resources if r.protect}
    assert protected == {"dev-controller-state", "dev-jail", "dev-mariadb-data"}
    for resource in dev_run.resources:
        assert resource.retain_on_delete == resource.protect, resource.urn


def test_the_accounting_archive_volume_is_protected_and_kept_on_delete() -> None:
    def archive(config: dict) -> None:
        config["accounting"]["purge"] = {"jobsAfter": "12months", "archive": True}

    protected = {
        r.inputs["metadata"]["name"]: r.retain_on_delete
        for r in _run_with(archive).resources
        if r.protect
    }
    assert protected == {
        "dev-controller-state": True,
        "dev-jail": True,
        "dev-mariadb-data": True,
        "dev-accounting-archive": True,
    }


def test_ordering_through_depends_on(dev_run: ProgramRun) -> None:
    def urn(kind: str, name: str) -> str:
        return by_name(dev_run, kind, name).urn

    def depends(kind: str, name: str) -> set[str]:
        return set(by_name(dev_run, kind, name).dependencies)

    controller = urn("apps/v1:StatefulSet", "dev-controller")
    populate = next(r for r in kube(dev_run, "batch/v1:Job") if "populate" in r.name).urn
    assert urn("apps/v1:StatefulSet", "dev-mariadb") in depends(
        "apps/v1:Deployment", "dev-accounting"
    )
    assert {
        urn("apps/v1:Deployment", "dev-accounting"),
        urn("core/v1:PersistentVolumeClaim", "dev-controller-state"),
        by_content(dev_run, "kubernetes:core/v1:ConfigMap", "dev-slurm-config").urn,
    } <= depends("apps/v1:StatefulSet", "dev-controller")
    for workload in ("dev-login", "dev-cpu"):
        assert {controller, populate} <= depends("apps/v1:StatefulSet", workload)
    assert urn("core/v1:PersistentVolumeClaim", "dev-jail") in set(
        by_content(dev_run, "kubernetes:batch/v1:Job", "dev-jail-populate").dependencies
    )
    # Accounts are applied once the controller, slurmdbd and the jail are there; login pods
    # mount the users ConfigMap, so it exists before them.
    users_config = dev_run.get("kubernetes:core/v1:ConfigMap", "dev-users-config").urn
    assert {
        controller,
        populate,
        urn("apps/v1:Deployment", "dev-accounting"),
        users_config,
    } <= set(by_content(dev_run, "kubernetes:batch/v1:Job", "dev-users-sync").dependencies)
    assert users_config in depends("apps/v1:StatefulSet", "dev-login")
    reconfigure = by_content(dev_run, "kubernetes:batch/v1:Job", "dev-reconfigure")
    assert controller in reconfigure.dependencies


def test_await_decisions(dev_run: ProgramRun) -> None:
    skip, wait_for = "pulumi.com/skipAwait", "pulumi.com/waitFor"
    for resource in kube(dev_run, "apps/v1:StatefulSet") + kube(dev_run, "core/v1:Service"):
        annotations = resource.inputs["metadata"].get("annotations", {})
        is_worker = resource.inputs["metadata"]["name"] == "dev-cpu"
        service = resource.type.endswith("Service")
        # A pool's headless Service is not awaited; its StatefulSet only until it exists.
        assert (annotations.get(skip) == "true") == (is_worker and service)
        assert (wait_for in annotations) == (is_worker and not service)
    populate = by_content(dev_run, "kubernetes:batch/v1:Job", "dev-jail-populate")
    assert populate.custom_timeouts == {"create": "185m", "update": "185m"}


def test_secrets_stay_secret(dev_run: ProgramRun) -> None:
    auth_key = dev_run.get("random:index/randomBytes:RandomBytes", "dev-secrets-auth-key")
    password = dev_run.get("random:index/randomPassword:RandomPassword", "dev-secrets-db-password")
    root = dev_run.get("random:index/randomPassword:RandomPassword", "dev-secrets-db-root-password")
    assert "base64" in auth_key.secret_outputs
    assert "result" in password.secret_outputs and "result" in root.secret_outputs
    secret_values = {auth_key.outputs["base64"], password.outputs["result"], root.outputs["result"]}
    for kind in ("core/v1:Secret",):
        for secret in kube(dev_run, kind):
            assert secret.secret_inputs & {"data", "stringData"}, secret.urn
    # No secret value reaches anything but a Secret (not env, not a ConfigMap, not exports).
    for resource in dev_run.resources:
        if resource.type in ("kubernetes:core/v1:Secret",) or not resource.type.startswith(
            "kubernetes:"
        ):
            continue
        text = json.dumps(resource.inputs)
        assert not any(value in text for value in secret_values), resource.urn
    assert not any(value in json.dumps(dev_run.outputs) for value in secret_values)
    slurmdbd = containers(by_name(dev_run, "apps/v1:Deployment", "dev-accounting"))["slurmdbd"]
    # slurmdbd reads the password from a Secret volume, never from its environment.
    assert all("valueFrom" not in e for e in slurmdbd["env"])
    env = {e["name"]: e["value"] for e in slurmdbd["env"]}
    assert env["DB_PASSWORD_FILE"] == "/run/secrets/slurmdbd/password"


def test_exports(dev_run: ProgramRun) -> None:
    config_map = by_content(dev_run, "kubernetes:core/v1:ConfigMap", "dev-slurm-config")
    assert dev_run.outputs == {
        "namespace": "slurm-dev",
        "loginEndpoint": "<address-of-a-node-running-a-login-pod>:30022",
        "sshCommand": "ssh -p 30022 alice@<address-of-a-node-running-a-login-pod>",
        "configHash": config_map.inputs["metadata"]["name"].removeprefix("dev-slurm-config-"),
        "slurmVersion": "26.05",
        "restApiUrl": "",  # the dev stack runs no REST API
        "controllerReplicas": 1,
    }
    assert not dev_run.secret_outputs


def test_config_map_hash_names_config_and_reconfigure_job(dev_run: ProgramRun) -> None:
    config_hash = dev_run.outputs["configHash"]
    config_map = by_content(dev_run, "kubernetes:core/v1:ConfigMap", "dev-slurm-config")
    assert config_map.inputs["immutable"] is True
    assert sorted(config_map.inputs["data"]) == [
        "cgroup.conf",
        "gres.conf",
        "plugstack.conf",
        "slurm.conf",
    ]
    job = by_content(dev_run, "kubernetes:batch/v1:Job", "dev-reconfigure")
    assert job.inputs["metadata"]["name"] == f"dev-reconfigure-{config_hash}"
    controller = by_name(dev_run, "apps/v1:StatefulSet", "dev-controller")
    volumes = controller.inputs["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "slurm-config",
        "configMap": {"name": f"dev-slurm-config-{config_hash}"},
    } in volumes


def test_least_privilege(dev_run: ProgramRun) -> None:
    for workload in kube(dev_run, "apps/v1:StatefulSet") + kube(dev_run, "apps/v1:Deployment"):
        for name, container in containers(workload).items():
            context = container.get("securityContext", {})
            assert not context.get("privileged"), (workload.name, name)
            assert context.get("capabilities", {}).get("drop") == ["ALL"], (workload.name, name)
            assert container.get("resources", {}).get("requests"), (workload.name, name)
    for name in ("dev-controller", "dev-mariadb"):
        for container in containers(by_name(dev_run, "apps/v1:StatefulSet", name)).values():
            if container["name"] == "munge":
                continue
            assert container["securityContext"]["runAsNonRoot"] is True
            assert "add" not in container["securityContext"]["capabilities"]
    # The munge sidecar may only hand the key to the munge user before dropping to it.
    munge = containers(by_name(dev_run, "apps/v1:StatefulSet", "dev-cpu"))["munge"]
    assert munge["securityContext"]["capabilities"] == {
        "drop": ["ALL"],
        "add": ["CHOWN", "SETGID", "SETUID"],
    }
    assert munge["securityContext"]["allowPrivilegeEscalation"] is False
    slurmd = containers(by_name(dev_run, "apps/v1:StatefulSet", "dev-cpu"))["slurmd"]
    # The jail needs a mount namespace; tasks of users are pinned to CPUs by root.
    assert {"SYS_ADMIN", "SYS_NICE"} <= set(slurmd["securityContext"]["capabilities"]["add"])
    assert {"readinessProbe", "livenessProbe"} <= set(slurmd)
    assert "GPU_DRIVER_DIR" not in {e["name"] for e in slurmd["env"]}  # a CPU pool


def _run_with(change) -> ProgramRun:
    import yaml

    from tests.conftest import DEV_STACK

    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    change(config)
    return run_program(run, config={"slurm-stack:cluster": json.dumps(config)})


def _worker_inputs(run: ProgramRun) -> dict:
    return by_name(run, "apps/v1:StatefulSet", "dev-cpu").inputs


def test_hash_changes_with_config_and_workers_do_not_restart(dev_run: ProgramRun) -> None:
    changed = _run_with(lambda c: c["partitions"][0].setdefault("options", []).append("MaxNodes=1"))
    assert changed.outputs["configHash"] != dev_run.outputs["configHash"]
    assert _worker_inputs(changed) == _worker_inputs(dev_run)
    controller = by_name(changed, "apps/v1:StatefulSet", "dev-controller").inputs
    assert f"dev-slurm-config-{changed.outputs['configHash']}" in json.dumps(controller)


def test_scaling_changes_only_replicas(dev_run: ProgramRun) -> None:
    def scale(config: dict) -> None:
        config["workerPools"][0]["replicas"] = 7

    scaled = _run_with(scale)
    assert scaled.outputs["configHash"] == dev_run.outputs["configHash"]
    before, after = _worker_inputs(dev_run), _worker_inputs(scaled)
    assert after["spec"]["replicas"] == 7
    assert {**after["spec"], "replicas": 2} == before["spec"]
    unchanged = _run_with(lambda c: None)
    assert unchanged.outputs["configHash"] == dev_run.outputs["configHash"]


def test_invalid_config_registers_nothing() -> None:
    failures: list[SpecError] = []

    def program() -> None:
        try:
            run()
        except SpecError as error:
            failures.append(error)

    bad = {"name": "dev", "workerPools": [{"name": "cpu", "gpus": -1}], "jail": {}}
    result = run_program(program, config={"slurm-stack:cluster": json.dumps(bad)})
    assert result.resources == ()
    message = str(failures[0])
    assert "slurm-stack:cluster.workerPools[0].gpus" in message
    assert "slurm-stack:cluster.jail" in message


def test_production_example(prod_run: ProgramRun) -> None:
    pools = {r.inputs["metadata"]["name"]: r for r in kube(prod_run, "apps/v1:StatefulSet")}
    assert set(pools) == {"prod-controller", "prod-login", "prod-h100", "prod-h200"}
    for name in ("prod-h100", "prod-h200"):
        slurmd = containers(pools[name])["slurmd"]
        assert slurmd["resources"]["limits"]["nvidia.com/gpu"] == "8"
        env = {e["name"]: e["value"] for e in slurmd["env"]}
        assert "Gres=gpu:" + name.removeprefix("prod-") + ":8" in env["SLURMD_NODE_CONF"]
        # GPU nodes stage their driver files for the jail plugin.
        assert env["GPU_DRIVER_DIR"] == "/run/slurm-stack/gpu-driver"
    assert "volumeClaimTemplates" in pools["prod-h200"].inputs["spec"]
    # External accounting: slurmdbd but no database of ours, password from secret config.
    assert not [r for r in prod_run.resources if "mariadb" in r.name]
    password = by_name(prod_run, "core/v1:Secret", "prod-db-password")
    assert "stringData" in password.secret_inputs
    login = by_name(prod_run, "core/v1:Service", "prod-login").inputs["spec"]
    assert login["type"] == "NodePort"
    assert login["ports"][0]["nodePort"] == 30022
    assert prod_run.get("slurm-stack:index:HealthChecks", "prod-health")
    assert (
        prod_run.outputs["sshCommand"]
        == "ssh -p 30022 root@<address-of-a-node-running-a-login-pod>"
    )


@pytest.mark.parametrize("mode", ["embedded", "mariadb-operator"])
def test_accounting_modes(mode: str) -> None:
    result = _run_with(lambda c: c["accounting"].update(mode=mode))
    operator = [r for r in result.resources if r.type.endswith("MariaDB")]
    assert bool(operator) == (mode == "mariadb-operator")
    if operator:
        assert operator[0].protect
        assert operator[0].inputs["apiVersion"] == "k8s.mariadb.com/v1alpha1"


def test_auth_slurm_keeps_the_key_from_users_and_gives_each_daemon_what_it_reads() -> None:
    slurm_auth = _run_with(lambda config: config.update(auth="slurm"))
    secret = by_name(slurm_auth, "core/v1:Secret", "dev-slurm-key")
    assert set(secret.inputs["data"]) == {"slurm.key"}

    def mounts(workload: str, kind: str = "apps/v1:StatefulSet") -> dict[str, dict[str, str]]:
        return {
            name: {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            for name, c in containers(by_name(slurm_auth, kind, workload)).items()
        }

    login = mounts("dev-login")
    assert not {"auth-key", "slurm-key"} & set(login["sshd"])  # users' sessions run here
    assert login["sackd"]["slurm-key"] == "/run/slurm-key"
    controller = mounts("dev-controller")
    assert controller["slurmctld"]["slurm-key"] == "/run/slurm-key"
    assert controller["slurmctld"]["sack"] == "/run/slurmctld"
    assert "auth-key" not in controller["slurmctld"]  # the root-only Secret: not for SlurmUser
    assert mounts("dev-accounting", "apps/v1:Deployment")["slurmdbd"]["sack"] == "/run/slurmdbd"
    assert mounts("dev-cpu")["slurmd"]["auth-key"] == "/run/secrets/slurm"
    copy = containers(by_name(slurm_auth, "apps/v1:StatefulSet", "dev-controller"))["slurm-key"]
    assert copy["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert "restartPolicy" not in copy  # runs once before the daemon
    volumes = by_name(slurm_auth, "apps/v1:StatefulSet", "dev-controller").inputs["spec"][
        "template"
    ]["spec"]["volumes"]
    key = next(v for v in volumes if v["name"] == "auth-key")
    assert key["secret"]["defaultMode"] == 0o400
    # Job pods get tokens from a sackd sidecar; their clients never see the key.
    job = containers(by_content(slurm_auth, "kubernetes:batch/v1:Job", "dev-reconfigure"))
    assert job["sackd"]["restartPolicy"] == "Always"
    assert {m["name"] for m in job["reconfigure"]["volumeMounts"]} == {"slurm-config", "sack-run"}


def test_embedded_mariadb_is_sized_as_slurms_accounting_guide_asks(dev_run: ProgramRun) -> None:
    def args(run: ProgramRun) -> list[str]:
        return containers(by_name(run, "apps/v1:StatefulSet", "dev-mariadb"))["mariadb"]["args"]

    # A quarter of the 4Gi default limit for the buffer pool, a quarter of that for the redo log.
    assert args(dev_run) == [
        "--innodb-buffer-pool-size=1024M",
        "--innodb-log-file-size=256M",
        "--innodb-lock-wait-timeout=900",
        "--max-allowed-packet=16M",
        "--loose-innodb-snapshot-isolation=OFF",
    ]
    bigger = _run_with(
        lambda c: c["accounting"]["embedded"].update(resources={"limits": {"memory": "32Gi"}})
    )
    assert args(bigger)[:2] == ["--innodb-buffer-pool-size=8192M", "--innodb-log-file-size=2048M"]


DB_PASSWORDS = ("dev-secrets-db-password", "dev-secrets-db-root-password")


def test_embedded_mariadb_has_root_at_localhost_and_passwords_only_in_files(
    dev_run: ProgramRun,
) -> None:
    statefulset = by_name(dev_run, "apps/v1:StatefulSet", "dev-mariadb")
    pod = statefulset.inputs["spec"]["template"]["spec"]
    mariadb = containers(statefulset)["mariadb"]
    # Plain values only: nothing comes from a Secret into the environment.
    assert all(set(entry) == {"name", "value"} for entry in mariadb["env"])
    env = {e["name"]: e["value"] for e in mariadb["env"]}
    assert "MARIADB_RANDOM_ROOT_PASSWORD" not in env  # upstream prints that one to the log
    assert not {"MARIADB_PASSWORD", "MARIADB_ROOT_PASSWORD"} & set(env)
    assert env["MARIADB_ROOT_HOST"] == "localhost"  # upstream's default is '%'
    passwords = {
        name: dev_run.get("random:index/randomPassword:RandomPassword", name).outputs["result"]
        for name in DB_PASSWORDS
    }
    assert not any(value in json.dumps(statefulset.inputs) for value in passwords.values())

    # Each *_FILE is a key of the right Secret, mounted read-only for the pod's group only.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in mariadb["volumeMounts"]}

    def secret_behind(path: str) -> str:
        directory, key = path.rsplit("/", 1)
        assert mounts[directory]["readOnly"] is True
        source = volumes[mounts[directory]["name"]]["secret"]
        assert source["items"] == [{"key": key, "path": key}]
        assert source["defaultMode"] == 0o440
        return source["secretName"]

    assert secret_behind(env["MARIADB_PASSWORD_FILE"]) == "dev-db-password"
    assert secret_behind(env["MARIADB_ROOT_PASSWORD_FILE"]) == "dev-db-root-password"
    root_secret = by_name(dev_run, "core/v1:Secret", "dev-db-root-password")
    assert root_secret.inputs["stringData"] == {"password": passwords[DB_PASSWORDS[1]]}
    assert "stringData" in root_secret.secret_inputs
    assert passwords[DB_PASSWORDS[0]] != passwords[DB_PASSWORDS[1]]
    # slurmdbd's pod cannot even name root's Secret.
    slurmdbd = by_name(dev_run, "apps/v1:Deployment", "dev-accounting")
    assert "dev-db-root-password" not in json.dumps(slurmdbd.inputs)


def test_generated_database_passwords_are_letters_and_digits(dev_run: ProgramRun) -> None:
    for name in DB_PASSWORDS:
        password = dev_run.get("random:index/randomPassword:RandomPassword", name)
        # No special characters at all ('#' is among random's defaults): nothing that
        # slurmdbd.conf, SQL or a shell would need quoted.
        assert password.inputs["special"] is False
        assert "overrideSpecial" not in password.inputs
        assert password.inputs["length"] == 32
        assert password.outputs["result"].isalnum()
        assert storage_pass_problem(password.outputs["result"]) is None


def test_mariadb_operator_gets_roots_own_password() -> None:
    result = _run_with(lambda c: c["accounting"].update(mode="mariadb-operator"))
    operator = next(r for r in result.resources if r.type.endswith("MariaDB"))
    spec = operator.inputs["spec"]
    assert spec["rootPasswordSecretKeyRef"]["name"] == "dev-db-root-password"
    assert spec["passwordSecretKeyRef"]["name"] == "dev-db-password"
    assert by_name(result, "core/v1:Secret", "dev-db-root-password")


def test_external_database_has_no_root_secret(prod_run: ProgramRun) -> None:
    assert not [
        r for r in kube(prod_run, "core/v1:Secret") if "root" in r.inputs["metadata"]["name"]
    ]
    assert not [r for r in prod_run.resources if r.name.endswith("db-root-password")]


@pytest.mark.parametrize("password", ["s3cret#tail", "two words", "new\nline", 'q"uote', "back\\"])
def test_an_accounting_password_slurmdbd_conf_cannot_hold_is_refused(password: str) -> None:
    import yaml

    from tests.conftest import DEV_STACK

    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config["accounting"] = {"mode": "external", "external": {"host": "db.example.org"}}
    key = "slurm-stack:accountingDbPassword"
    # Raised while the Secret's value resolves: the engine may report it as the cause of the
    # resource registration that waited for it ("While processing resource: ...").
    with pytest.raises(ValueError) as error:
        run_program(
            run,
            config={"slurm-stack:cluster": json.dumps(config), key: password},
            secret_keys=[key],
        )
    message = spec_error_text(error.value)
    assert f"{key}: cannot be written to slurmdbd.conf" in message
    assert password not in message
