"""The package's YAML and TypeScript examples: their SlurmCluster properties are in the schema
with the schema's types, and they make a valid cluster when constructed.

No Pulumi CLI or TypeScript compiler runs here: the YAML program is parsed as YAML, the
TypeScript argument object (plain literals only) with json5.
"""

import json
import re
from pathlib import Path
from typing import Any

import json5
import pytest
import yaml

from slurm_stack.offline import run_program
from slurm_stack.package.provider import SlurmStackProvider

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "slurm-stack:index:SlurmCluster"
YAML_PROGRAM = ROOT / "examples" / "package-yaml" / "Pulumi.yaml"
TS_PROGRAM = ROOT / "examples" / "package-typescript" / "index.ts"
TS_PROJECT = ROOT / "examples" / "package-typescript" / "Pulumi.yaml"
SCHEMA_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SlurmStackProvider().schema)


def yaml_properties() -> dict[str, Any]:
    program = yaml.safe_load(YAML_PROGRAM.read_text())
    (cluster,) = [r for r in program["resources"].values() if r["type"] == TOKEN]
    return cluster["properties"]


def typescript_properties() -> dict[str, Any]:
    """The object literal passed as `args` to `new slurm.SlurmCluster("<name>", {...}, ...)`."""
    text = TS_PROGRAM.read_text()
    start = re.search(r'new slurm\.SlurmCluster\(\s*"[^"]+",\s*', text)
    assert start, "no `new slurm.SlurmCluster(` in the TypeScript example"
    depth, end = 0, start.end()
    for end in range(start.end(), len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    return json5.loads(text[start.end() : end + 1])


def problems(value: Any, prop: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    """Where ``value`` does not fit schema property ``prop``."""
    if "$ref" in prop:
        type_ = schema["types"][prop["$ref"].removeprefix("#/types/")]
        if "enum" in type_:
            allowed = [e["value"] for e in type_["enum"]]
            return [] if value in allowed else [f"{path}: {value!r} not one of {allowed}"]
        return object_problems(value, type_, schema, path)
    kind = prop.get("type")
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        return [
            p
            for i, v in enumerate(value)
            for p in problems(v, prop["items"], schema, f"{path}[{i}]")
        ]
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: not a map"]
        values = prop["additionalProperties"]
        return [p for k, v in value.items() for p in problems(v, values, schema, f"{path}.{k}")]
    expected = SCHEMA_TYPES[kind]
    if (isinstance(value, bool) and kind != "boolean") or not isinstance(value, expected):
        return [f"{path}: {value!r} is not a {kind}"]
    return []


def object_problems(
    value: Any, type_: dict[str, Any], schema: dict[str, Any], path: str
) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: not an object"]
    # A resource's arguments are its inputProperties; an object type's, its properties.
    properties = type_.get("inputProperties", type_.get("properties", {}))
    required = type_.get("requiredInputs", type_.get("required", []))
    found = [f"{path}.{key}: not in the schema" for key in value if key not in properties]
    found += [f"{path}.{key}: required" for key in required if key not in value]
    for key, item in value.items():
        if key in properties:
            found += problems(item, properties[key], schema, f"{path}.{key}")
    return found


EXAMPLES = {"yaml": yaml_properties, "typescript": typescript_properties}


@pytest.mark.parametrize("language", EXAMPLES)
def test_the_example_fits_the_schema(language: str, schema: dict[str, Any]) -> None:
    properties = EXAMPLES[language]()
    cluster = schema["resources"][TOKEN]
    assert object_problems(properties, cluster, schema, "args") == []


def test_the_schema_check_catches_a_misspelt_or_mistyped_property(schema: dict[str, Any]) -> None:
    properties = yaml_properties()
    properties["workerPools"][1]["gpu"] = 8
    properties["workerPools"][0]["replicas"] = "2"
    properties["login"]["service"]["type"] = "Ingress"
    found = object_problems(properties, schema["resources"][TOKEN], schema, "args")
    assert sorted(found) == [
        "args.login.service.type: 'Ingress' not one of ['LoadBalancer', 'NodePort', 'ClusterIP']",
        "args.workerPools[0].replicas: '2' is not a integer",
        "args.workerPools[1].gpu: not in the schema",
    ]


@pytest.mark.parametrize("language", EXAMPLES)
def test_the_example_constructs_a_cluster(language: str) -> None:
    properties = EXAMPLES[language]()
    provider = SlurmStackProvider()
    run = run_program(lambda: provider.construct("research", TOKEN, properties), stack="example")
    pools = [
        r.inputs["metadata"]["name"]
        for r in run.resources
        if r.type == "kubernetes:apps/v1:StatefulSet" and "-gpu" in r.inputs["metadata"]["name"]
    ]
    assert pools == ["research-gpu"]


def test_both_programs_name_the_package_directory() -> None:
    for project in (YAML_PROGRAM, TS_PROJECT):
        packages = yaml.safe_load(project.read_text())["packages"]
        assert (project.parent / packages["slurm-stack"] / "PulumiPlugin.yaml").is_file()
    assert '"@pulumi/slurm-stack"' in TS_PROGRAM.read_text()
