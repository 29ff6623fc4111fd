"""The shipped examples run, and everything they create passes strict schema validation."""

import runpy

import pytest

from slurm_stack.offline import ProgramRun, manifests, run_program, validate_manifests
from tests.conftest import ROOT

HOST_PROGRAM = ROOT / "examples" / "host-program" / "__main__.py"


@pytest.fixture(scope="module")
def host_run() -> ProgramRun:
    return run_program(
        lambda: runpy.run_path(str(HOST_PROGRAM), run_name="__main__"),
        project="gpu-platform",
        stack="example",
        config={"gpu-platform:kubeconfig": "~/.kube/config"},
    )


def test_host_program_uses_its_own_provider_and_namespace(host_run: ProgramRun) -> None:
    provider = host_run.get("pulumi:providers:kubernetes", "platform")
    namespace = host_run.get("kubernetes:core/v1:Namespace", "research")
    cluster = host_run.get("slurm-stack:index:SlurmCluster", "research")
    assert namespace.urn in cluster.dependencies
    objects = [r for r in host_run.resources if r.type.startswith("kubernetes:")]
    assert len(objects) > 15
    for resource in objects:
        assert resource.provider is not None, resource.urn
        assert resource.provider.startswith(provider.urn + "::"), resource.urn
        if resource is not namespace:
            assert resource.inputs["metadata"]["namespace"] == "research", resource.urn
    assert host_run.outputs["sshCommand"] == "ssh root@192.0.2.10"


@pytest.mark.parametrize("fixture", ["dev_run", "prod_run", "host_run"])
def test_every_object_is_valid_in_strict_mode(fixture: str, request: pytest.FixtureRequest) -> None:
    run: ProgramRun = request.getfixturevalue(fixture)
    documents = manifests(run.resources)
    assert len(documents) > 15
    assert validate_manifests(documents, unknown_kinds="skip") == []


def test_validation_catches_a_broken_object(dev_run: ProgramRun) -> None:
    documents = manifests(dev_run.resources)
    statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
    statefulset["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    problems = validate_manifests([statefulset], ["1.34"])
    assert problems and "volumeMount" in problems[0]
