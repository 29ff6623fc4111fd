"""The offline engine, manifests and schema validation, on a small throwaway program."""

import base64
import copy
import gc

import pulumi
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from pulumi_kubernetes.core.v1 import ConfigMap, PersistentVolumeClaim, Secret, Service
from pulumi_kubernetes.provider import Provider
from pulumi_random import RandomBytes, RandomPassword
from pulumi_tls import PrivateKey

import slurm_stack.offline.validate as validate
from slurm_stack.offline import (
    LOAD_BALANCER_IP,
    REDACTED,
    REDACTED_DATA,
    UNKNOWN,
    OfflineEngineError,
    ProgramRun,
    dump_yaml,
    manifests,
    redact_secrets,
    run_program,
    validate_manifests,
)
from slurm_stack.offline.keys import deterministic_private_key, rsa_key

STACK = "urn:pulumi:dev::slurm-stack::pulumi:pulumi:Stack::slurm-stack-dev"
EXAMPLE = "urn:pulumi:dev::slurm-stack::slurm-stack:index:Example::example"


def child_urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::slurm-stack::slurm-stack:index:Example${type_}::{name}"


class Example(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-stack:index:Example", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        munge = RandomBytes("munge-key", length=32, opts=child)
        host_key = PrivateKey("ssh-host", algorithm="ED25519", opts=child)
        provider = Provider("cluster", namespace="hpc", opts=child)
        self.secret = Secret(
            "munge",
            metadata={"name": "munge", "namespace": "hpc"},
            data={"munge.key": munge.base64},
            string_data={"ssh_host_ed25519_key": host_key.private_key_openssh},
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        config = ConfigMap(
            "config",
            metadata={"namespace": "hpc"},  # auto-named
            data={"slurm.conf": "ClusterName=example\nSlurmctldPort=6817\n"},
            opts=child,
        )
        PersistentVolumeClaim(
            "state",
            metadata={"name": "state", "namespace": "hpc"},
            spec={"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            opts=pulumi.ResourceOptions(parent=self, protect=True, depends_on=[config]),
        )
        login = Service(
            "login",
            metadata={"name": "login", "namespace": "hpc"},
            spec={"type": "LoadBalancer", "ports": [{"port": 22}], "selector": {"app": "login"}},
            opts=child,
        )
        self.login_ip = login.status.load_balancer.ingress[0].ip
        self.munge_key = munge.base64
        self.register_outputs({"login_ip": self.login_ip})


def example_program() -> None:
    example = Example("example")
    pulumi.export("loginIp", example.login_ip)
    pulumi.export("mungeKey", example.munge_key)
    pulumi.export("greeting", pulumi.Config().get("greeting") or "none")


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return run_program(example_program, config={"greeting": "hello"})


def test_parents_are_recorded(run: ProgramRun) -> None:
    assert run.get("slurm-stack:index:Example", "example").parent == STACK
    children = {r.name for r in run.children(EXAMPLE)}
    assert children == {"munge-key", "ssh-host", "cluster", "munge", "config", "state", "login"}


def test_options_and_dependencies_are_recorded(run: ProgramRun) -> None:
    pvc = run.get("kubernetes:core/v1:PersistentVolumeClaim", "state")
    assert pvc.protect
    assert pvc.dependencies == (child_urn("kubernetes:core/v1:ConfigMap", "config"),)
    assert not run.get("kubernetes:core/v1:ConfigMap", "config").protect

    secret = run.get("kubernetes:core/v1:Secret", "munge")
    provider = run.get("pulumi:providers:kubernetes", "cluster")
    assert secret.provider == f"{provider.urn}::{provider.id}"
    assert run.get("kubernetes:core/v1:ConfigMap", "config").provider is None
    # Input dependencies arrive per property.
    munge_urn = child_urn("random:index/randomBytes:RandomBytes", "munge-key")
    assert secret.property_dependencies["data"] == (munge_urn,)


def test_secrets_stay_secret(run: ProgramRun) -> None:
    assert run.outputs["greeting"] == "hello"
    assert run.outputs["loginIp"] == LOAD_BALANCER_IP
    assert run.secret_outputs == {"mungeKey"}

    secret = run.get("kubernetes:core/v1:Secret", "munge")
    assert secret.secret_inputs == {"data", "stringData"}
    assert {"data", "stringData"} <= secret.secret_outputs
    munge = run.get("random:index/randomBytes:RandomBytes", "munge-key")
    assert munge.secret_outputs == {"base64", "hex"}
    assert len(base64.b64decode(munge.outputs["base64"])) == 32
    assert secret.inputs["data"]["munge.key"] == munge.outputs["base64"]


def test_inputs_are_plain_camel_case_with_ints(run: ProgramRun) -> None:
    assert run.get("random:index/randomBytes:RandomBytes", "munge-key").inputs["length"] == 32
    spec = run.get("kubernetes:core/v1:Service", "login").inputs["spec"]
    assert spec["ports"] == [{"port": 22}]
    assert isinstance(spec["ports"][0]["port"], int)


def test_component_outputs_are_recorded(run: ProgramRun) -> None:
    example = run.get("slurm-stack:index:Example", "example")
    assert example.outputs_registered
    assert example.outputs == {"login_ip": LOAD_BALANCER_IP}


def test_tls_key_is_real_and_secret(run: ProgramRun) -> None:
    key = run.get("tls:index/privateKey:PrivateKey", "ssh-host")
    assert {"privateKeyPem", "privateKeyOpenssh", "privateKeyPemPkcs8"} <= key.secret_outputs
    loaded = serialization.load_ssh_private_key(key.outputs["privateKeyOpenssh"].encode(), None)
    public = loaded.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert key.outputs["publicKeyOpenssh"] == public.decode() + "\n"
    assert key.outputs["publicKeyFingerprintSha256"].startswith("SHA256:")


def test_load_balancer_service_gets_an_ingress_ip(run: ProgramRun) -> None:
    service = run.get("kubernetes:core/v1:Service", "login")
    assert service.outputs["status"]["loadBalancer"]["ingress"] == [{"ip": LOAD_BALANCER_IP}]


def test_runs_are_deterministic_and_independent(run: ProgramRun) -> None:
    again = run_program(example_program, config={"greeting": "hello"})
    assert dump_yaml(manifests(again.resources)) == dump_yaml(manifests(run.resources))
    assert again.resources == run.resources
    assert again.outputs == run.outputs

    # A different program afterwards sees nothing of the first one.
    def other() -> None:
        RandomPassword("db", length=24)
        pulumi.export("only", 1)

    single = run_program(other)
    assert [r.name for r in single.resources] == ["db"]
    assert single.outputs == {"only": 1}
    password = single.resources[0]
    assert len(password.outputs["result"]) == 24
    assert "result" in password.secret_outputs


def test_duplicate_urn_raises() -> None:
    def duplicated() -> None:
        ConfigMap("same", data={"a": "1"})
        ConfigMap("same", data={"a": "2"})

    with pytest.raises(OfflineEngineError, match="duplicate resource URN"):
        run_program(duplicated)


def test_program_errors_propagate() -> None:
    def broken() -> None:
        ConfigMap("fine", data={"a": "1"})
        raise ValueError("bad spec")

    with pytest.raises(ValueError, match="bad spec"):
        run_program(broken)


def test_config_logs_and_preview() -> None:
    def program() -> None:
        config = pulumi.Config()
        pulumi.export("password", config.require_secret("dbPassword"))
        pulumi.export("pools", config.require_object("pools"))
        pulumi.export("dryRun", pulumi.runtime.is_dry_run())
        pulumi.log.warn("jail storage class not set")

    result = run_program(
        program,
        config={"dbPassword": "s3cret", "slurm-stack:pools": {"cpu": {"replicas": 2}}},
        secret_keys=["dbPassword"],
        preview=True,
    )
    assert result.outputs == {
        "dryRun": True,
        "password": "s3cret",
        "pools": {"cpu": {"replicas": 2}},
    }
    assert result.secret_outputs == {"password"}
    assert UNKNOWN not in result.outputs.values()
    assert result.logs == (("warning", "jail storage class not set"),)
    assert result.stack_urn == STACK


def test_manifests_are_ordered_and_complete(run: ProgramRun) -> None:
    docs = manifests(run.resources)
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "Service"),
    ]
    assert all(list(d)[:3] == ["apiVersion", "kind", "metadata"] for d in docs)
    config = docs[1]
    # Auto-named objects carry the name the provider would have given them.
    assert (
        config["metadata"]["name"]
        == run.get("kubernetes:core/v1:ConfigMap", "config").outputs["metadata"]["name"]
    )
    assert config["metadata"]["name"].startswith("config-")
    assert validate_manifests(docs) == []


def test_yaml_dump_and_redaction(run: ProgramRun) -> None:
    docs = [redact_secrets(d) for d in manifests(run.resources)]
    text = dump_yaml(docs)
    assert text.startswith("---\n")
    assert text.count("---\n") == len(docs)
    assert "&id" not in text and "*id" not in text
    assert "PRIVATE KEY" not in text
    assert list(yaml.safe_load_all(text)) == docs
    assert docs[0]["data"] == {"munge.key": REDACTED_DATA}
    assert docs[0]["stringData"] == {"ssh_host_ed25519_key": REDACTED}
    # Still valid Kubernetes: `data` values are base64, as the API server decodes them.
    assert base64.b64decode(docs[0]["data"]["munge.key"], validate=True) == b"redacted"
    assert "---\n# Secret values redacted: render with --show-secrets" in text
    # The unredacted original is untouched.
    assert "PRIVATE KEY" in manifests(run.resources)[0]["stringData"]["ssh_host_ed25519_key"]


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "hpc"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
        },
    },
}


def test_valid_deployment_passes() -> None:
    assert validate_manifests([DEPLOYMENT]) == []


def test_misspelled_field_fails_in_strict_mode() -> None:
    bad = copy.deepcopy(DEPLOYMENT)
    bad["spec"]["replicass"] = 2
    assert validate_manifests([bad], ["1.31"]) == [
        "Deployment/hpc/web (k8s 1.31): spec.replicass: unknown field"
    ]
    assert validate_manifests([bad], ["1.31"], strict=False) == []


def test_known_valid_objects_are_not_checked_again_and_problems_are_never_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known: set[str] = set()
    assert validate_manifests([DEPLOYMENT], ["1.31", "1.34"], known_valid=known) == []
    assert len(known) == 2  # one per version
    checked: list[str] = []
    real = validate.validate_manifest

    def counting(manifest: dict, version: str, **options: object) -> list[str]:
        checked.append(version)
        return real(manifest, version, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(validate, "validate_manifest", counting)
    assert validate_manifests([DEPLOYMENT], ["1.31", "1.34"], known_valid=known) == []
    assert checked == []
    assert validate_manifests([DEPLOYMENT], ["1.31"], strict=False, known_valid=known) == []
    assert checked == ["1.31"]  # other options, another check
    bad = copy.deepcopy(DEPLOYMENT)
    bad["spec"]["replicass"] = 2
    for _ in range(2):
        problems = validate_manifests([bad], ["1.31"], known_valid=known)
        assert problems == ["Deployment/hpc/web (k8s 1.31): spec.replicass: unknown field"]
    assert len(known) == 3


def test_wrong_type_fails_for_every_version() -> None:
    bad = copy.deepcopy(DEPLOYMENT)
    bad["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": "ssh"}]
    problems = validate_manifests([bad], ["1.30", "1.34"])
    assert [p.split(": ")[0] for p in problems] == [
        "Deployment/hpc/web (k8s 1.30)",
        "Deployment/hpc/web (k8s 1.34)",
    ]
    assert all(
        "spec.template.spec.containers[0].ports[0].containerPort: 'ssh' is not of type" in p
        for p in problems
    )


def test_unknown_kind_is_a_problem_unless_skipped() -> None:
    custom = {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "MariaDB",
        "metadata": {"name": "db"},
    }
    assert validate_manifests([custom], ["1.31"]) == [
        "MariaDB/db (k8s 1.31): (root): no schema for MariaDB in k8s.mariadb.com/v1alpha1"
    ]
    assert validate_manifests([custom], ["1.31"], unknown_kinds="skip") == []


@pytest.mark.parametrize("curve", ["P256", "P384", "P521"])
def test_ecdsa_keys_are_deterministic(curve: str) -> None:
    first = deterministic_private_key(b"seed", "ECDSA", ecdsa_curve=curve)
    second = deterministic_private_key(b"seed", "ECDSA", ecdsa_curve=curve)
    assert first.private_numbers() == second.private_numbers()
    assert (
        first.curve.name == {"P256": "secp256r1", "P384": "secp384r1", "P521": "secp521r1"}[curve]
    )


def test_rsa_keys_are_stable_per_seed_within_a_process() -> None:
    key = rsa_key(b"seed-a", 2048)
    assert key.key_size == 2048
    assert rsa_key(b"seed-a", 2048).private_numbers() == key.private_numbers()
    assert rsa_key(b"seed-b", 2048).private_numbers() != key.private_numbers()


def test_the_garbage_collector_is_paused_for_a_run_only() -> None:
    """The collector is off while a program runs (the SDK's garbage made a render a third
    slower) and as it was before afterwards, whether the program succeeded or failed."""
    seen: list[bool] = []

    def program() -> None:
        seen.append(gc.isenabled())
        ConfigMap("c", metadata={"name": "c"}, data={"k": "v"})

    run_program(program)
    assert seen == [False] and gc.isenabled()

    def failing() -> None:
        raise RuntimeError("the program failed")

    with pytest.raises(RuntimeError, match="the program failed"):
        run_program(failing)
    assert gc.isenabled()
    gc.disable()
    try:
        run_program(program)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
