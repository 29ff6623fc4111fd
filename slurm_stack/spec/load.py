"""Turn the raw `slurm-stack:cluster` value into a ClusterSpec, or fail with every issue."""

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from slurm_stack.spec.errors import CONFIG_KEY, KeyProblem, SpecError, SpecIssue, join_path
from slurm_stack.spec.models import ClusterSpec
from slurm_stack.spec.relations import relation_issues
from slurm_stack.spec.rules import RuleContext, cross_field_issues
from slurm_stack.spec.text import text_issues
from slurm_stack.spec.walk import model_for, unwrap


def load_spec(
    raw: Any,
    *,
    db_password_provided: bool = False,
    ldap_password_provided: bool = False,
    registry_auth_provided: bool = False,
    config_key: str = CONFIG_KEY,
) -> ClusterSpec:
    """Validate ``raw`` (a dict from stack config) and fill defaults.

    Raises SpecError listing every invalid value with its full key path.
    """
    if not isinstance(raw, dict):
        raise SpecError(
            [SpecIssue("", "must be an object (set it in Pulumi.<stack>.yaml under config)")],
            config_key,
        )
    context = RuleContext(db_password_provided, ldap_password_provided, registry_auth_provided)
    text = list(text_issues(raw, ClusterSpec))
    issues = [*text, *cross_field_issues(raw, context)]
    spec = None
    refused = {issue.path for issue in text}
    invalid = set(refused)
    try:
        spec = ClusterSpec.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors():
            issue = _issue_from(error)
            invalid.add(join_path(*_strip_union_tags(tuple(error["loc"]))))
            # A string the text rule refused is named once, by that rule.
            if issue.path not in refused:
                issues.append(issue)
    issues.extend(relation_issues(raw, ClusterSpec, invalid))
    if issues or spec is None:
        raise SpecError(issues, config_key)
    return spec


def _issue_from(error: Any) -> SpecIssue:
    loc = tuple(error["loc"])
    path_parts = _strip_union_tags(loc)
    message = str(error["msg"]).removeprefix("Value error, ")
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, KeyProblem):
        path_parts = [*path_parts, *cause.key]
    if error["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        renamed = getattr(model, "renamed_keys", {}).get(loc[-1])
        if renamed:
            message = f"this key was renamed: use {renamed}"
        else:
            valid = _valid_keys(model)
            message = "unknown key" + (f"; valid keys here: {', '.join(valid)}" if valid else "")
    elif error["type"] == "missing":
        message = "required"
    elif isinstance(error.get("input"), str | int | float | bool):
        shown = repr(error["input"])
        if len(shown) <= 60 and shown not in message:
            message = f"{message} (got {shown})"
    return SpecIssue(join_path(*path_parts), message)


def _strip_union_tags(loc: tuple[Any, ...]) -> list[Any]:
    """Pydantic puts a discriminated union's tag in the location; the user never wrote it."""
    parts: list[Any] = []
    model: Any = ClusterSpec
    for part in loc:
        if part == "[key]":  # pydantic's marker for an invalid mapping key
            continue
        step = _step(model, part)
        if step is _UNION_TAG:
            model = _union_member(model, part)
            continue
        parts.append(part)
        model = step
    return parts


_UNION_TAG = object()


def _field_type(model: type[BaseModel], alias: str) -> Any:
    for name, field in model.model_fields.items():
        if alias in (field.alias, name):
            return field.annotation
    return None


def _step(model: Any, part: Any) -> Any:
    """The type found one location step below ``model``, or _UNION_TAG for a union tag."""
    model = unwrap(model)
    origin = typing.get_origin(model)
    if origin in (list, dict):
        return typing.get_args(model)[-1]
    if origin in (typing.Union, types.UnionType):
        members = [unwrap(m) for m in typing.get_args(model) if m is not type(None)]
        for member in members:
            if isinstance(member, type) and issubclass(member, BaseModel):
                tag = member.model_fields.get("type")
                if tag is not None and part in typing.get_args(tag.annotation):
                    return _UNION_TAG if len(members) > 1 else _step(member, part)
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        return _step(models[0], part) if len(models) == 1 else None
    if isinstance(model, type) and issubclass(model, BaseModel) and isinstance(part, str):
        return _field_type(model, part)
    return None


def _model_at(loc: tuple[Any, ...]) -> Any:
    """The model (or other type) the location ``loc`` points into."""
    model: Any = ClusterSpec
    for part in loc:
        step = _step(model, part)
        if step is _UNION_TAG:
            model = _union_member(model, part)
            continue
        model = step
    return unwrap(model)


def _valid_keys(annotation: Any) -> list[str]:
    model = model_for(annotation, None)
    if model is not None:
        return sorted(field.alias or name for name, field in model.model_fields.items())
    return []


def _union_member(model: Any, tag: Any) -> Any:
    model = unwrap(model)
    for member in typing.get_args(model):
        member = unwrap(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            field = member.model_fields.get("type")
            if field is not None and tag in typing.get_args(field.annotation):
                return member
    return None
