"""An LDAP directory in the spec, sssd.conf, and the pods that resolve directory users."""

import json
from typing import Any

import pytest
import yaml

from slurm_stack.offline import ProgramRun, run_program
from slurm_stack.program import run
from slurm_stack.render.directory import render_sssd_conf
from slurm_stack.spec import SpecError, load_spec
from tests.conftest import DEV_STACK
from tests.helpers import by_content, by_name, containers

PASSWORD = "directory-reader-secret"
DIRECTORY = {
    "uri": "ldap://ldap.example.org",
    "baseDn": "dc=example,dc=org",
    "bindDn": "cn=reader,dc=example,dc=org",
    "loginGroups": ["mlteam"],
}


def dev_config(**changes: Any) -> dict[str, Any]:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config.update(changes)
    return config


@pytest.fixture(scope="module")
def directory_run() -> ProgramRun:
    return run_program(
        run,
        config={
            "slurm-stack:cluster": json.dumps(dev_config(directory=DIRECTORY)),
            "slurm-stack:ldapBindPassword": PASSWORD,
        },
        secret_keys=["slurm-stack:ldapBindPassword"],
    )


def test_sssd_conf_binds_as_the_reader_without_tls_unless_asked() -> None:
    spec = load_spec(dev_config(directory=DIRECTORY), ldap_password_provided=True)
    conf = render_sssd_conf(spec, PASSWORD)
    assert "ldap_uri = ldap://ldap.example.org\n" in conf
    assert "ldap_default_bind_dn = cn=reader,dc=example,dc=org\n" in conf
    assert f"ldap_default_authtok = {PASSWORD}\n" in conf
    assert "ldap_id_use_start_tls = false\n" in conf  # sssd's own default is true
    assert "ldap_user_ssh_public_key = sshPublicKey\n" in conf
    anonymous = load_spec(dev_config(directory={**DIRECTORY, "bindDn": None}))
    assert "authtok" not in render_sssd_conf(anonymous, None)
    with pytest.raises(ValueError, match="span lines"):
        render_sssd_conf(spec, "a\nldap_uri = ldap://evil")


@pytest.mark.parametrize(
    ("directory", "password", "path", "fragment"),
    [
        (DIRECTORY, False, "directory.bindDn", "pulumi config set --secret ldapBindPassword"),
        ({**DIRECTORY, "bindDn": None}, True, "directory.bindDn", "ldapBindPassword is set but"),
        ({**DIRECTORY, "uri": "ldap.example.org"}, True, "directory.uri", "pattern"),
        ({**DIRECTORY, "caCertificate": "not a cert"}, True, "directory.caCertificate", ""),
        ({**DIRECTORY, "loginGroups": ["ML Team"]}, True, "directory.loginGroups[0]", ""),
        ({**DIRECTORY, "groupFilter": "x"}, True, "directory.groupFilter", "unknown key"),
    ],
)
def test_bad_directory_settings_name_the_key(
    directory: dict[str, Any], password: bool, path: str, fragment: str
) -> None:
    with pytest.raises(SpecError) as failed:
        load_spec(dev_config(directory=directory), ldap_password_provided=password)
    messages = [i.message for i in failed.value.issues if i.path == path]
    assert messages and any(fragment in m for m in messages), failed.value


def test_the_bind_password_reaches_only_the_sssd_secret(directory_run: ProgramRun) -> None:
    secret = by_name(directory_run, "core/v1:Secret", "dev-sssd")
    assert "stringData" in secret.secret_inputs
    assert PASSWORD in secret.inputs["stringData"]["sssd.conf"]
    for resource in directory_run.resources:
        if resource is not secret:
            assert PASSWORD not in json.dumps(resource.inputs), resource.urn


def test_every_pod_that_resolves_users_has_sssd_beside_it(directory_run: ProgramRun) -> None:
    for workload, main in (
        ("dev-login", "sshd"),
        ("dev-cpu", "slurmd"),
        ("dev-controller", "slurmctld"),
    ):
        pod = containers(by_name(directory_run, "apps/v1:StatefulSet", workload))
        sssd = pod["sssd"]
        assert sssd["restartPolicy"] == "Always"  # a native sidecar, up before the daemon
        assert sssd["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert sssd["securityContext"]["allowPrivilegeEscalation"] is False
        pipes = [m for m in pod[main]["volumeMounts"] if m["name"] == "sss-pipes"]
        assert pipes == [{"name": "sss-pipes", "mountPath": "/var/lib/sss/pipes", "readOnly": True}]
        # The config Secret (with the password) is mounted in sssd only.
        assert not [m for m in pod[main]["volumeMounts"] if m["name"] == "sssd-config"]
    # Tasks resolve directory users too: the sockets are bound into the jail, read-only.
    config = by_content(directory_run, "kubernetes:core/v1:ConfigMap", "dev-slurm-config").inputs[
        "data"
    ]["plugstack.conf"]
    assert "ro_bind=/var/lib/sss/pipes:/var/lib/sss/pipes" in config
    users = by_name(directory_run, "core/v1:ConfigMap", "dev-users").inputs["data"]
    assert users["directory_login_groups"] == "mlteam\n"


def test_without_a_directory_nothing_of_it_is_rendered(dev_run: ProgramRun) -> None:
    for workload in ("dev-login", "dev-cpu", "dev-controller"):
        assert "sssd" not in containers(by_name(dev_run, "apps/v1:StatefulSet", workload))
    assert not [r for r in dev_run.resources if r.name.endswith("-sssd")]
