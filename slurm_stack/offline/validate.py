"""Validate manifests against the Kubernetes OpenAPI schemas shipped by `kubernetes-validate`.

Strict schemas (the default) reject fields Kubernetes does not know, so a misspelled key fails
here instead of being silently dropped by the API server. Each object is checked against each
requested Kubernetes minor; schemas and validators are loaded once per process.
"""

import functools
import hashlib
import importlib.metadata
import json
import re
from collections.abc import Iterable, Mapping, MutableSet, Sequence
from typing import Any, Literal

import jsonschema
from kubernetes_validate import utils as kv
from packaging.version import Version
from referencing import Registry, Resource

DEFAULT_MINORS = ("1.30", "1.31", "1.32", "1.33", "1.34")


@functools.cache
def available_versions() -> dict[str, str]:
    """Kubernetes minors with schemas in the installed kubernetes-validate → full version."""
    return {kv.major_minor(full): full for full in kv.all_versions()}


def default_versions() -> tuple[str, ...]:
    """Every minor from 1.30 to 1.34 the installed kubernetes-validate has schemas for."""
    return tuple(v for v in DEFAULT_MINORS if v in available_versions())


def _schema_dir(version: str, strict: bool) -> str:
    full = available_versions().get(version)
    if full is None:
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {version}")
    return f"kubernetes-json-schema/v{full}-local{'-strict' if strict else ''}"


@functools.cache
def _definitions(version: str, strict: bool) -> Resource:
    return Resource.from_contents(
        kv.schema_contents(f"{_schema_dir(version, strict)}/_definitions.json", version)
    )


@functools.cache
def _validator(
    version: str, api_version: str, kind: str, strict: bool
) -> jsonschema.protocols.Validator | None:
    # File naming as kubernetes-validate does it: "rbac.authorization.k8s.io/v1" → "rbac-v1".
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = f"{_schema_dir(version, strict)}/{kind.lower()}-{group_version}.json"
    try:
        schema = kv.schema_contents(path, version)
    except FileNotFoundError:
        return None
    definitions = _definitions(version, strict)
    registry = Registry().with_resources(
        [
            (schema["$id"], Resource.from_contents(schema)),
            (definitions.contents["$id"], definitions),
        ]
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _path(parts: Iterable[Any]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return text or "(root)"


def _describe(error: jsonschema.ValidationError) -> list[tuple[str, str]]:
    """(path, message) pairs; an unknown field is named in the path itself."""
    path = list(error.absolute_path)
    if (
        error.validator == "additionalProperties"
        and isinstance(error.instance, dict)
        and isinstance(error.schema, Mapping)  # a schema that names fields is an object
    ):
        known = error.schema.get("properties", {})
        return [
            (_path([*path, key]), "unknown field") for key in error.instance if key not in known
        ]
    return [(_path(path), error.message)]


def _label(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    parts = [manifest.get("kind", "?"), meta.get("namespace"), meta.get("name", "?")]
    return "/".join(str(p) for p in parts if p)


def validate_manifest(
    manifest: dict[str, Any],
    version: str,
    *,
    strict: bool = True,
    unknown_kinds: Literal["error", "skip"] = "error",
) -> list[str]:
    """Problems of one manifest against Kubernetes `version` ("1.31"); empty when valid."""
    label = f"{_label(manifest)} (k8s {version})"
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [f"{label}: (root): apiVersion and kind are required"]
    validator = _validator(version, api_version, kind, strict)
    if validator is None:
        if unknown_kinds == "skip":
            return []
        return [f"{label}: (root): no schema for {kind} in {api_version}"]
    found = sorted(pair for error in validator.iter_errors(manifest) for pair in _describe(error))
    return [f"{label}: {path}: {message}" for path, message in found]


@functools.cache
def _checker_releases() -> tuple[str, str]:
    return (
        importlib.metadata.version("kubernetes-validate"),
        importlib.metadata.version("jsonschema"),
    )


def valid_digest(manifest: dict[str, Any], version: str, strict: bool, unknown_kinds: str) -> str:
    """What a check of ``manifest`` against Kubernetes ``version`` depends on, as one digest:
    the object, the schemas (kubernetes-validate's release and the minor's full version), the
    validator's release and the options. A digest found valid once stays valid."""
    basis = [
        *_checker_releases(),
        available_versions().get(version, version),
        strict,
        unknown_kinds,
        manifest,
    ]
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def validate_manifests(
    manifests: Iterable[dict[str, Any]],
    versions: Sequence[str] | None = None,
    *,
    strict: bool = True,
    unknown_kinds: Literal["error", "skip"] = "error",
    known_valid: MutableSet[str] | None = None,
) -> list[str]:
    """Problems of every manifest against every Kubernetes minor in `versions`.

    `versions` defaults to `default_versions()`. `unknown_kinds="skip"` passes kinds without
    a schema (custom resources); by default they are problems, which also catches a wrong
    apiVersion. An empty list means every object is valid for every version.

    ``known_valid`` holds the `valid_digest` of each check that passed before: those are not
    checked again, and each check that passes now is added. (The sandbox keeps it across runs:
    the schema check was most of the time of an `up` that changes one pod.)
    """
    minors = sorted(versions or default_versions(), key=Version)
    problems = []
    for manifest in manifests:
        for version in minors:
            if known_valid is None:
                problems += validate_manifest(
                    manifest, version, strict=strict, unknown_kinds=unknown_kinds
                )
                continue
            digest = valid_digest(manifest, version, strict, unknown_kinds)
            if digest in known_valid:
                continue
            found = validate_manifest(manifest, version, strict=strict, unknown_kinds=unknown_kinds)
            problems += found
            if not found:
                known_valid.add(digest)
    return problems
