"""Registry credentials for container jobs (`containerRegistryAuth`): a Pulumi secret that
reaches worker pods only as a Kubernetes Secret, checked without ever being quoted."""

import base64
import json
from typing import Any

import pytest
import yaml

from slurm_stack import paths
from slurm_stack.components.secrets import checked_registry_auth
from slurm_stack.offline import ProgramRun, run_program
from slurm_stack.program import run
from slurm_stack.spec import REGISTRY_AUTH_CONFIG_KEY, SpecError, load_spec
from slurm_stack.spec.registry_auth import registry_auth_problem
from slurm_stack.spec.rules import SECRET_PLACEHOLDER
from tests.conftest import DEV_STACK
from tests.helpers import by_name, containers

PASSWORD = "registry-pull-secret"
AUTH = json.dumps(
    {
        "auths": {
            "registry.example:5000": {
                "auth": base64.b64encode(b"puller:" + PASSWORD.encode()).decode()
            }
        }
    }
)


def dev_config(**changes: Any) -> dict[str, Any]:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    config.update(changes)
    return config


def run_with_auth(auth: str, **changes: Any) -> ProgramRun:
    return run_program(
        run,
        config={
            "slurm-stack:cluster": json.dumps(dev_config(**changes)),
            REGISTRY_AUTH_CONFIG_KEY: auth,
        },
        secret_keys=[REGISTRY_AUTH_CONFIG_KEY],
    )


@pytest.fixture(scope="module")
def auth_run() -> ProgramRun:
    return run_with_auth(AUTH, containers={"enabled": True})


def test_the_credentials_reach_only_their_secret(auth_run: ProgramRun) -> None:
    secret = by_name(auth_run, "core/v1:Secret", "dev-registry-auth")
    assert "stringData" in secret.secret_inputs
    assert secret.inputs["stringData"] == {paths.REGISTRY_AUTH_FILE: AUTH}
    encoded = AUTH.split('"auth": "')[1].split('"')[0]
    for resource in auth_run.resources:
        if resource is not secret:
            dumped = json.dumps(resource.inputs)
            assert encoded not in dumped and PASSWORD not in dumped, resource.urn
    # Mounted in slurmd (root-only files), where the fetch program reads them.
    slurmd = containers(by_name(auth_run, "apps/v1:StatefulSet", "dev-cpu"))["slurmd"]
    assert {"name": "registry-auth", "mountPath": paths.REGISTRY_AUTH_DIR, "readOnly": True} in (
        slurmd["volumeMounts"]
    )


def test_without_credentials_there_is_no_secret(dev_run: ProgramRun) -> None:
    assert not [r for r in dev_run.resources if r.name.endswith("-registry-auth")]


def test_credentials_without_container_jobs_are_refused() -> None:
    with pytest.raises(SpecError) as failed:
        load_spec(dev_config(), registry_auth_provided=True)
    [issue] = failed.value.issues
    assert issue.path == "containers.enabled"
    assert "containerRegistryAuth is set but container jobs are off" in issue.message


@pytest.mark.parametrize(
    ("auth", "fragment"),
    [
        ("user:" + PASSWORD, "is not JSON"),
        (json.dumps({"registry.example": {"auth": PASSWORD}}), 'has no "auths" object'),
        (json.dumps({"auths": {}}), 'has no "auths" object'),
        (
            json.dumps({"auths": {"registry.example": {"pass": PASSWORD}}}),
            'auths["registry.example"]',
        ),
    ],
)
def test_credentials_that_are_not_a_docker_config_are_refused_unquoted(
    auth: str, fragment: str
) -> None:
    problem = registry_auth_problem(auth)
    assert problem is not None and fragment in problem and PASSWORD not in problem
    # The program refuses them before any resource exists...
    with pytest.raises(SpecError) as error:
        run_with_auth(auth, containers={"enabled": True})
    assert str(error.value).endswith(f"{REGISTRY_AUTH_CONFIG_KEY}: {problem}")
    assert PASSWORD not in str(error.value)
    # ...and the component, given them as an output, once they resolve.
    with pytest.raises(SpecError) as error:
        checked_registry_auth(auth)
    assert str(error.value).endswith(f"{REGISTRY_AUTH_CONFIG_KEY}: {problem}")


def test_an_offline_stand_in_for_a_secure_value_passes() -> None:
    assert registry_auth_problem(SECRET_PLACEHOLDER) is None
    assert registry_auth_problem(None) is None


def test_username_and_password_entries_are_accepted() -> None:
    entry = {"username": "puller", "password": PASSWORD}
    assert registry_auth_problem(json.dumps({"auths": {"r.example": entry}})) is None
