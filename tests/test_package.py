"""The component package: its schema, and SlurmCluster constructed as another language would.

Pulumi's Python SDK serves components by analyzing their type annotations
(`pulumi.provider.experimental`): these tests run that analyzer on SlurmCluster, and construct
through `ComponentProvider.construct` with inputs that went through the same protobuf round
trip as a construct request from the engine (numbers become floats there).

    .venv/bin/python -m slurm_stack.package.generate   # after a spec change; review the diff
"""

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import grpc
import pulumi
import pytest
import yaml
from pulumi.errors import InputPropertiesError, InputPropertyError
from pulumi.provider.experimental.util import camel_case
from pulumi.provider.server import ProviderServicer
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc
from pydantic import BaseModel

from slurm_stack.offline import ProgramRun, run_program
from slurm_stack.offline.render import load_stack_config
from slurm_stack.package import args as package_args
from slurm_stack.package.generate import ARGS_FILE, SCHEMA_FILE, generate
from slurm_stack.package.provider import SlurmStackProvider, schema_text
from slurm_stack.spec.models import ClusterSpec
from tests.conftest import DEV_STACK, PROD_STACK

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "slurm-stack:index:SlurmCluster"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SlurmStackProvider().schema)


def test_args_are_generated_from_the_current_spec_models() -> None:
    assert ARGS_FILE.read_text() == generate(), (
        "slurm_stack/package/args.py is stale: run python -m slurm_stack.package.generate"
    )


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    """Every spec model reachable from ``model``."""
    if model in seen:
        return
    seen.add(model)
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                _models(annotation, seen)
            stack.extend(get_args(annotation))


def test_every_spec_field_is_in_the_schema_with_its_stack_config_name_and_description(
    schema: dict[str, Any],
) -> None:
    models: set[type[BaseModel]] = set()
    _models(ClusterSpec, models)
    schema_properties = {
        name for type_ in schema["types"].values() for name in type_.get("properties", {})
    } | set(schema["resources"][TOKEN]["inputProperties"])
    for model in models:
        for python_name, info in model.model_fields.items():
            alias = info.alias or python_name
            assert camel_case(python_name) == alias, f"{model.__name__}.{python_name}"
            assert alias in schema_properties, f"{model.__name__}.{alias} missing"
            assert info.description, f"{model.__name__}.{alias} has no docstring"


def test_the_schema_is_typed_and_documented(schema: dict[str, Any]) -> None:
    cluster = schema["resources"][TOKEN]
    assert cluster["isComponent"] is True
    inputs = cluster["inputProperties"]
    pools = inputs["workerPools"]
    assert pools["type"] == "array"
    assert pools["items"]["$ref"] == "#/types/slurm-stack:index:WorkerPool"
    pool = schema["types"]["slurm-stack:index:WorkerPool"]
    assert pool["properties"]["replicas"]["type"] == "integer"
    assert pool["properties"]["gpus"]["type"] == "integer"
    assert "Default: 1." in pool["properties"]["replicas"]["description"]
    assert pool["required"] == ["name"]
    assert sorted(cluster["requiredInputs"]) == ["jail", "name", "workerPools"]
    auth = schema["types"]["slurm-stack:index:SlurmClusterAuth"]
    assert [e["value"] for e in auth["enum"]] == ["munge", "slurm"]
    secrets = ("dbPassword", "ldapBindPassword", "containerRegistryAuth")
    for key in secrets:  # may be outputs: secrets of the caller
        assert "plain" not in inputs[key] and inputs[key]["type"] == "string"
    assert all(inputs[key].get("plain") for key in inputs if key not in secrets)
    outputs = cluster["properties"]
    assert sorted(outputs) == [
        "configHash",
        "loginEndpoint",
        "namespace",
        "outsideControllers",
        "outsideNodesAuthKey",
        "restApiUrl",
        "slurmVersion",
        "sshCommand",
    ]
    assert all(outputs[key]["description"] for key in outputs)
    assert all(outputs[key]["type"] == "string" for key in outputs if key != "outsideControllers")
    controllers = outputs["outsideControllers"]
    assert controllers["type"] == "array"
    assert controllers["items"]["type"] == "object"
    assert controllers["items"]["additionalProperties"]["type"] == "string"
    assert sorted(cluster["required"]) == sorted(outputs)


def test_the_schema_is_the_reviewed_one() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "provider/schema.json is stale: run python -m slurm_stack.package.generate, review the diff"
    )


def wire(properties: dict[str, Any], secrets: dict[str, str] | None = None) -> dict[str, Any]:
    """``properties`` (and ``secrets``, as secret values) as a construct request carries
    them, as the provider server reads them."""

    async def round_trip() -> dict[str, Any]:
        secret = {key: pulumi.Output.secret(value) for key, value in (secrets or {}).items()}
        struct = await rpc.serialize_properties({**properties, **secret}, {})
        return await ProviderServicer._construct_inputs(struct, {})

    return asyncio.run(round_trip())


def cluster_config(stack_file: Path) -> dict[str, Any]:
    """The `slurm-stack:cluster` value of a stack file, as the program reads it."""
    return json.loads(load_stack_config(stack_file, "slurm-stack").config["slurm-stack:cluster"])


def construct(name: str, inputs: dict[str, Any], stack: str) -> ProgramRun:
    provider = SlurmStackProvider()
    return run_program(lambda: provider.construct(name, TOKEN, inputs), stack=stack)


def comparable(run: ProgramRun) -> list[tuple[str, str, str, Any]]:
    return [
        (r.type, r.name, r.parent or "", r.inputs)
        for r in run.resources
        if r.type != "pulumi:pulumi:Stack"
    ]


@pytest.mark.parametrize("stack_file", [DEV_STACK, PROD_STACK], ids=["dev", "prod"])
def test_a_construct_registers_what_the_python_stack_registers(
    stack_file: Path, request: pytest.FixtureRequest
) -> None:
    python_run = request.getfixturevalue("dev_run" if stack_file == DEV_STACK else "prod_run")
    stack = load_stack_config(stack_file, "slurm-stack")
    cluster = cluster_config(stack_file)
    # The program passes a secret from stack config as dbPassword; so does this caller.
    password_key = "slurm-stack:accountingDbPassword"
    secrets = (
        {"dbPassword": stack.config[password_key]} if password_key in stack.secret_keys else {}
    )
    inputs = wire(cluster, secrets)
    floats = [v for v in _leaves(inputs) if isinstance(v, float)]
    assert floats and all(v.is_integer() for v in floats), "numbers cross the wire as floats"
    run = construct(cluster["name"], inputs, stack.stack)
    assert comparable(run) == comparable(python_run)
    component = run.get(TOKEN, cluster["name"])
    assert component.outputs["configHash"] == python_run.outputs["configHash"]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_a_bad_input_through_construct_names_its_property() -> None:
    bad = cluster_config(DEV_STACK)
    bad["workerPools"][0]["replicas"] = 1.5
    bad["workerPools"][0]["gpus"] = -1
    provider = SlurmStackProvider()
    with pytest.raises(InputPropertiesError) as raised:
        provider.construct("dev", TOKEN, wire(bad))
    paths = {e["property_path"]: e["reason"] for e in raised.value.errors or []}
    assert set(paths) == {"workerPools[0].replicas", "workerPools[0].gpus"}, paths
    assert "integer" in paths["workerPools[0].replicas"]
    assert paths["workerPools[0].gpus"] == "Input should be greater than or equal to 0 (got -1)"


def test_an_unknown_enum_value_is_refused_with_its_property() -> None:
    bad = cluster_config(DEV_STACK)
    bad["login"]["service"]["type"] = "Ingress"
    with pytest.raises(InputPropertyError) as raised:
        SlurmStackProvider().construct("dev", TOKEN, wire(bad))
    assert raised.value.property_path == "login.service.type"
    assert "Ingress" in raised.value.reason


def test_python_callers_pass_a_spec_a_stack_config_mapping_or_typed_args(
    dev_run: ProgramRun,
) -> None:
    from slurm_stack.components.cluster import SlurmCluster
    from slurm_stack.spec import load_spec

    stack = load_stack_config(DEV_STACK, "slurm-stack")
    config = cluster_config(DEV_STACK)
    typed: package_args.SlurmClusterArgs = {
        **{k: v for k, v in config.items() if k not in ("slurmVersion", "workerPools", "login")},
        "slurm_version": package_args.SlurmClusterSlurmVersion.V_26_05,
        "worker_pools": config["workerPools"],
        "login": config["login"],
    }
    expected = comparable(dev_run)
    for args in (load_spec(config), config, typed):
        run = run_program(lambda args=args: SlurmCluster("dev", args), stack=stack.stack)
        assert comparable(run) == expected


def test_an_output_in_a_spec_field_is_refused_naming_its_key() -> None:
    inputs = wire(cluster_config(DEV_STACK))
    provider = SlurmStackProvider()

    def program() -> None:
        # What the provider server makes of a value that depends on another resource.
        provider.construct("dev", TOKEN, {**inputs, "namespace": pulumi.Output.from_input("x")})

    with pytest.raises(InputPropertiesError) as raised:
        run_program(program, stack="dev")
    [error] = raised.value.errors or []
    assert error["property_path"] == "namespace"
    assert "not an output of another resource" in error["reason"]


def test_the_plugin_directory_serves_the_schema_over_grpc() -> None:
    """As the Python language host runs a plugin (pulumi-language-python RunPlugin:
    `python <plugin directory> <engine address>`); GetSchema needs no engine."""
    plugin = ROOT / "provider"
    assert yaml.safe_load((plugin / "PulumiPlugin.yaml").read_text()) == {"runtime": "python"}
    requirements = (plugin / "requirements.txt").read_text().split("\n")
    assert [line for line in requirements if line and not line.startswith("#")] == ["-e .."]
    server = subprocess.Popen(
        [sys.executable, str(plugin), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        assert port.isdigit(), server.stderr.read() if server.stderr else ""
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            reply = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
        assert json.dumps(json.loads(reply.schema), indent=2, sort_keys=True) + "\n" == (
            SCHEMA_FILE.read_text()
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
