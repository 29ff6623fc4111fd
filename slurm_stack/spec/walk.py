"""Which model or item type a piece of raw stack config is validated as, read from the
models' annotations, for the passes that walk raw config alongside pydantic."""

import types
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def unwrap(annotation: Any) -> Any:
    """`Annotated[T, ...]` -> `T`."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def model_for(annotation: Any, value: Any) -> type[BaseModel] | None:
    """The model ``value`` is validated as: the annotation's, or a union member's (picked by
    the union's `type` tag, as pydantic picks a discriminated union's member)."""
    annotation = unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    members = [unwrap(m) for m in typing.get_args(annotation)]
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    if len(models) == 1:
        return models[0]
    tag = value.get("type") if isinstance(value, dict) else None
    for member in models:
        field = member.model_fields.get("type")
        if field is not None and tag in typing.get_args(field.annotation):
            return member
    return None


def item_annotation(annotation: Any) -> Any:
    """The type of a list's items or a mapping's values; Any when not a list or mapping."""
    annotation = unwrap(annotation)
    if typing.get_origin(annotation) in (list, dict):
        return typing.get_args(annotation)[-1]
    return Any


@cache
def fields_by_key(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
    """The keys a model takes in stack config (camelCase, and the snake_case name) mapped to
    (field name, field info); built once per model (callers must not change the mapping)."""
    keys: dict[str, tuple[str, FieldInfo]] = {}
    for name, info in model.model_fields.items():
        keys[name] = (name, info)
        if info.alias:
            keys[info.alias] = (name, info)
    return keys
