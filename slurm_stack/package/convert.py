"""SlurmCluster arguments as the spec reads them: camelCase keys, plain JSON values.

Arguments arrive in three forms: a stack config mapping (camelCase keys), a Python mapping
typed as `SlurmClusterArgs` (snake_case keys, enum members), and the inputs of a construct
from another language, which the Pulumi SDK maps to snake_case and whose numbers travel as
floats (protobuf Struct has no integers). Each becomes the stack config form, so validation
and its messages are the spec's whatever the caller's language.
"""

import math
import types
from collections.abc import Mapping
from enum import Enum
from typing import Any, NotRequired, Required, Union, get_args, get_origin

import pulumi
from pulumi.provider.experimental.util import camel_case

from slurm_stack.package.args import SlurmClusterArgs
from slurm_stack.spec import load_spec
from slurm_stack.spec.errors import SpecError, SpecIssue, join_path
from slurm_stack.spec.models import ClusterSpec

SECRET_INPUTS = ("db_password", "ldap_bind_password", "container_registry_auth")
"""The arguments that are not part of the spec: secrets, which may be outputs."""


def spec_and_secrets(
    args: "SlurmClusterArgs | ClusterSpec | Mapping[str, Any]",
    db_password: pulumi.Input[str] | None = None,
    ldap_bind_password: pulumi.Input[str] | None = None,
    container_registry_auth: pulumi.Input[str] | None = None,
) -> tuple[ClusterSpec, dict[str, Any]]:
    """The validated spec, and the secret inputs (by Python name) given in ``args`` or as
    keywords. Raises SpecError naming every bad key."""
    given: dict[str, Any] = {
        "db_password": db_password,
        "ldap_bind_password": ldap_bind_password,
        "container_registry_auth": container_registry_auth,
    }
    if isinstance(args, ClusterSpec):
        return args, given
    raw, in_args = split_secrets(args)
    issues = []
    for key, value in in_args.items():
        if given[key] is not None:
            issues.append(SpecIssue(camel_case(key), "given twice: in args and as a keyword"))
        given[key] = value
    config, unreadable = spec_config(raw)
    issues.extend(unreadable)
    if issues:
        raise SpecError(issues)
    spec = load_spec(
        config,
        db_password_provided=given["db_password"] is not None,
        ldap_password_provided=given["ldap_bind_password"] is not None,
        registry_auth_provided=given["container_registry_auth"] is not None,
    )
    return spec, given


def split_secrets(args: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the spec part, the secret inputs by Python name), whichever key style ``args`` uses."""
    spec, secrets = {}, {}
    for key, value in args.items():
        python_name = _python_name(key)
        if python_name in SECRET_INPUTS:
            secrets[python_name] = value
        else:
            spec[key] = value
    return spec, secrets


def spec_config(args: Mapping[str, Any]) -> tuple[dict[str, Any], list[SpecIssue]]:
    """The stack config form of the spec part of ``args``, and the values that cannot be
    read now (outputs of other resources)."""
    issues: list[SpecIssue] = []
    config = _convert(args, SlurmClusterArgs, (), issues)
    return config, issues


def _python_name(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def _convert(value: Any, annotation: Any, path: tuple[str | int, ...], issues: list) -> Any:
    if isinstance(value, pulumi.Output):
        issues.append(
            SpecIssue(
                join_path(*path),
                "must be a plain value, not an output of another resource: the cluster's "
                "objects are rendered from it before anything is created",
            )
        )
        return None
    origin = get_origin(annotation)
    if origin in (Required, NotRequired):
        return _convert(value, get_args(annotation)[0], path, issues)
    if isinstance(annotation, type) and _is_typed_dict(annotation) and isinstance(value, Mapping):
        hints = annotation.__annotations__  # evaluated: args.py has no postponed annotations
        converted = {}
        for key, item in value.items():
            python_name = key if key in hints else _python_name(key)
            if python_name not in hints:  # unknown: the spec names it in its error
                converted[key] = item
                continue
            name = camel_case(python_name)
            converted[name] = _convert(item, hints[python_name], (*path, name), issues)
        return converted
    if origin is list and isinstance(value, list | tuple):
        (item_type,) = get_args(annotation)
        return [_convert(v, item_type, (*path, i), issues) for i, v in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        _, item_type = get_args(annotation)
        return {k: _convert(v, item_type, (*path, k), issues) for k, v in value.items()}
    if origin in (Union, types.UnionType):
        return value
    if isinstance(value, Enum):
        return value.value
    if annotation in (int, Any) and _integral_float(value):
        return int(value)
    return value


def _is_typed_dict(annotation: type) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "__required_keys__")


def _integral_float(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()
