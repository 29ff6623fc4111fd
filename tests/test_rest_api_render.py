"""The REST API's objects: slurmrestd's Deployment and Service, the JWT key and who reads it,
the config lines, the flows the NetworkPolicies open, and the key's generations."""

import json
from typing import Any

import pytest
import yaml

from slurm_stack import paths
from slurm_stack.k8s.network import flows
from slurm_stack.k8s.rest_api import (
    KEY_GENERATION_ANNOTATION,
    OPENAPI_VERSIONS,
    rest_api_deployment,
    rest_api_service,
)
from slurm_stack.offline import ProgramRun, manifests, run_program
from slurm_stack.program import run
from slurm_stack.render import slurm_config_files
from slurm_stack.render.services import render_slurmdbd_conf
from slurm_stack.sandbox.stack import keep_secrets
from slurm_stack.spec import ClusterSpec, load_spec
from slurm_stack.spec.versions import SUPPORTED_VERSIONS
from tests.conftest import DEV_STACK
from tests.helpers import by_name, containers, kube
from tests.test_pod_security import pss_level

KEY_PATH = f"{paths.JWT_KEY_DIR}/{paths.JWT_KEY_FILE}"


def _config(**rest_api: Any) -> dict[str, Any]:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config["restApi"] = {"enabled": True, **rest_api}
    return config


def _spec(**rest_api: Any) -> ClusterSpec:
    return load_spec(_config(**rest_api))


@pytest.fixture(scope="module")
def rest_run() -> ProgramRun:
    return run_program(run, config={"slurm-stack:cluster": json.dumps(_config(replicas=2))})


def test_slurmctld_and_slurmdbd_take_tokens_only_with_the_api() -> None:
    jwt = ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={KEY_PATH}"]
    on, off = _spec(), load_spec({**_config(), "restApi": {"enabled": False}})
    slurm_conf = slurm_config_files(on)["slurm.conf"].splitlines()
    assert all(line in slurm_conf for line in jwt)
    assert all(line in render_slurmdbd_conf(on).splitlines() for line in jwt)
    assert "AuthAlt" not in slurm_config_files(off)["slurm.conf"]
    assert "AuthAlt" not in render_slurmdbd_conf(off)


def test_slurmrestd_runs_unprivileged_with_no_key_and_no_munge() -> None:
    spec = _spec(replicas=3)
    deployment = rest_api_deployment(spec, "dev-slurm-config-x")
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    [slurmrestd] = pod["containers"]
    assert "initContainers" not in pod or pod["initContainers"] == []  # no munged sidecar
    assert slurmrestd["image"].endswith("/rest:26.05-0.1.0")
    context = slurmrestd["securityContext"]
    assert context["runAsUser"] == context["runAsGroup"] == paths.SLURMRESTD_UID
    assert context["runAsUser"] not in (0, paths.SLURM_UID)  # slurmrestd refuses both
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["allowPrivilegeEscalation"] is False
    assert "fsGroup" not in pod["securityContext"]  # no supplementary group either
    assert pod["automountServiceAccountToken"] is False
    # Its volumes: the config, and the jail's /etc (users' names) read-only; no Secret.
    assert not any("secret" in volume for volume in pod["volumes"])
    mounts = {m["mountPath"]: m for m in slurmrestd["volumeMounts"]}
    assert set(mounts) == {paths.SLURM_CONF_DIR, f"{paths.JAIL_DIR}/etc"}
    assert mounts[f"{paths.JAIL_DIR}/etc"]["subPath"] == "etc"
    assert all(m["readOnly"] for m in mounts.values())
    env = {e["name"]: e["value"] for e in slurmrestd["env"]}
    assert env["SLURM_JWT"] == "daemon" and env["SLURMRESTD_AUTH_TYPES"] == "rest_auth/jwt"
    assert env["SLURMRESTD_OPENAPI_PLUGINS"] == "openapi/slurmctld,openapi/slurmdbd"
    assert env["SLURMRESTD_DATA_PARSER_PLUGINS"] == (
        "data_parser/v0.0.42,data_parser/v0.0.43,data_parser/v0.0.44,data_parser/v0.0.45"
    )
    service = rest_api_service(spec)["spec"]
    assert service["ports"] == [{"name": "http", "port": 6820, "targetPort": "http"}]


def test_every_supported_release_has_its_openapi_versions() -> None:
    assert set(OPENAPI_VERSIONS) == set(SUPPORTED_VERSIONS)


def test_the_versions_and_content_follow_the_release_and_accounting() -> None:
    config = _config()
    config.update(slurmVersion="24.11")
    config["accounting"] = {"enabled": False}
    pod = rest_api_deployment(load_spec(config), "c")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["SLURMRESTD_DATA_PARSER_PLUGINS"] == (
        "data_parser/v0.0.40,data_parser/v0.0.41,data_parser/v0.0.42"
    )
    assert env["SLURMRESTD_OPENAPI_PLUGINS"] == "openapi/slurmctld"


def test_only_slurmctld_and_slurmdbd_mount_the_key(rest_run: ProgramRun) -> None:
    holders = set()
    for kind in ("apps/v1:StatefulSet", "apps/v1:Deployment", "batch/v1:Job", "batch/v1:CronJob"):
        for workload in kube(rest_run, kind):
            spec = workload.inputs["spec"]
            template = spec.get("template") or spec["jobTemplate"]["spec"]["template"]
            for volume in template["spec"].get("volumes", []):
                if volume.get("secret", {}).get("secretName") == "dev-jwt-key":
                    holders.add(workload.inputs["metadata"]["name"])
                    assert volume["secret"]["defaultMode"] == 0o440  # the fsGroup's, no other
    assert holders == {"dev-controller", "dev-accounting"}
    assert containers(by_name(rest_run, "apps/v1:StatefulSet", "dev-controller"))["slurmctld"][
        "volumeMounts"
    ][-1] == {"name": "jwt-key", "mountPath": paths.JWT_KEY_DIR, "readOnly": True}


def test_the_key_is_a_pulumi_secret_and_the_url_an_output(rest_run: ProgramRun) -> None:
    key = rest_run.get("random:index/randomBytes:RandomBytes", "dev-secrets-jwt-key")
    assert "base64" in key.secret_outputs
    assert key.inputs["keepers"] == {"generation": "1"}
    secret = by_name(rest_run, "core/v1:Secret", "dev-jwt-key")
    assert "data" in secret.secret_inputs
    assert rest_run.outputs["restApiUrl"] == "http://dev-rest.slurm-dev.svc:6820"
    service = by_name(rest_run, "core/v1:Service", "dev-rest")
    assert service.custom_timeouts["create"] == "10m"


def test_a_new_key_generation_rolls_slurmctld_and_slurmdbd_onto_a_new_key() -> None:
    runs = [
        run_program(run, config={"slurm-stack:cluster": json.dumps(_config(keyGeneration=g))})
        for g in (1, 2)
    ]
    keys = [
        r.get("random:index/randomBytes:RandomBytes", "dev-secrets-jwt-key").outputs["base64"]
        for r in runs
    ]
    assert keys[0] != keys[1]
    for workload, kind in (("dev-controller", "StatefulSet"), ("dev-accounting", "Deployment")):
        annotations = [
            by_name(r, f"apps/v1:{kind}", workload).inputs["spec"]["template"]["metadata"][
                "annotations"
            ]
            for r in runs
        ]
        assert [a[KEY_GENERATION_ANNOTATION] for a in annotations] == ["1", "2"]


def test_the_sandbox_keeps_a_key_until_its_generation_changes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    def documents(generation: int) -> list[dict[str, Any]]:
        config = _config(keyGeneration=generation)
        result = run_program(run, config={"slurm-stack:cluster": json.dumps(config)})
        return [d for d in manifests(result.resources) if d["kind"] == "Secret"]

    state = tmp_path / "secrets.json"

    def key(generation: int) -> str:
        kept = keep_secrets(documents(generation), state)
        [secret] = [d for d in kept if d["metadata"]["name"] == "dev-jwt-key"]
        return secret["data"][paths.JWT_KEY_FILE]

    first = key(1)
    assert key(1) == first
    assert key(2) != first


def test_the_network_policies_open_what_slurmrestd_uses() -> None:
    by_target: dict[str, list[Any]] = {}
    for flow in flows(_spec()):
        by_target.setdefault(flow.target, []).append(flow)
    [api] = by_target["rest"]
    assert api.port == 6820 and api.any_pod
    assert any("rest" in f.sources for f in by_target["controller"] if f.port == 6817)
    assert any("rest" in f.sources for f in by_target["accounting"] if f.port == 6819)
    assert "rest" not in {f.target for f in flows(load_spec({**_config(), "restApi": {}}))}


def test_slurmrestd_pods_are_restricted_and_baseline_with_a_directory() -> None:
    plain = rest_api_deployment(_spec(), "c")["spec"]["template"]["spec"]
    assert pss_level(plain) == "restricted"
    config = _config()
    config["directory"] = {"uri": "ldaps://ldap.example.org", "baseDn": "dc=example,dc=org"}
    with_directory = rest_api_deployment(load_spec(config), "c")["spec"]["template"]["spec"]
    # The sssd sidecar starts as root to copy its Secret (k8s/directory.py).
    assert [c["name"] for c in with_directory["initContainers"]] == ["sssd"]
    assert pss_level(with_directory) == "baseline"
    [slurmrestd] = with_directory["containers"]
    assert {"name": "sss-pipes", "mountPath": paths.SSS_PIPES_DIR, "readOnly": True} in slurmrestd[
        "volumeMounts"
    ]
