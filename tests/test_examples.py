"""The shipped examples run, and everything they create passes strict schema validation."""

import ast
import ipaddress
import runpy

import pytest

from slurm_stack.offline import ProgramRun, manifests, run_program, validate_manifests
from slurm_stack.spec import load_spec
from tests.conftest import PROD_STACK, ROOT
from tests.helpers import kube

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
    # Deleting it would delete the retained claims in it.
    assert namespace.protect and namespace.retain_on_delete


def test_the_readme_compose_example_puts_the_cluster_in_the_namespace_it_depends_on() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Compose into your own program")[1].split("```python")[1]
    code = section.split("```")[0]
    spec_literal = code.split("load_spec(")[1].split("\n)\n")[0]
    spec = ast.literal_eval(spec_literal.strip())
    assert spec["namespace"] == "research"
    assert load_spec(spec).namespace == "research"
    assert "depends_on=[my_namespace]" in code


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


# RFC 5737 and RFC 3849 documentation ranges: a placeholder copied unedited admits no one.
DOCUMENTATION_NETWORKS = [
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
]


@pytest.mark.parametrize("fixture", ["prod_run", "host_run"])
def test_examples_restrict_who_reaches_ssh(fixture: str, request: pytest.FixtureRequest) -> None:
    run: ProgramRun = request.getfixturevalue(fixture)
    (login,) = [s for s in kube(run, "core/v1:Service") if s.name.endswith("-login-service")]
    spec = login.inputs["spec"]
    if spec["type"] == "LoadBalancer":
        ranges = [ipaddress.ip_network(r) for r in spec["loadBalancerSourceRanges"]]
        assert ranges, "an example load balancer open to the whole internet"
        for network in ranges:
            assert any(network.subnet_of(doc) for doc in DOCUMENTATION_NETWORKS), network
    else:
        # A NodePort example says how to restrict it and shows the load balancer's way.
        text = PROD_STACK.read_text()
        assert "loadBalancerSourceRanges: [198.51.100.0/24]" in text
        assert "restrict port 30022" in text


def test_production_example_bounds_what_login_and_workers_write_to_node_disk(
    prod_run: ProgramRun,
) -> None:
    statefulsets = {s.inputs["metadata"]["name"]: s for s in kube(prod_run, "apps/v1:StatefulSet")}
    for name in ("prod-login", "prod-h100", "prod-h200"):
        (main,) = statefulsets[name].inputs["spec"]["template"]["spec"]["containers"]
        assert main["resources"]["limits"]["ephemeral-storage"], name
