"""One rule for every string of the spec, keys of maps included: no control character and no
surrounding whitespace.

Strings reach config files (slurm.conf, sshd_config, slurmdbd.conf, authorized_keys) and
Kubernetes names: a newline there would start a line of its own, and a trailing one passes a
`$`-anchored check. Only a field whose model marks it `MULTILINE` (a PEM certificate) may
hold line breaks, one marked `SCRIPT` (a site script) line breaks and tabs, and no field may
hold another control character. A list's items or a map's values take the marks of their
field, or their own: an annotation's value is marked `FREE_TEXT` in its type
(`Annotated[str, Field(json_schema_extra=FREE_TEXT)]`), a map key never is.
"""

import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

from slurm_stack.spec.errors import SpecIssue, join_path
from slurm_stack.spec.walk import fields_by_key, item_annotation, model_for

MULTILINE: JsonDict = {"multiline": True}
"""`json_schema_extra` of a field whose value may span lines."""

SCRIPT: JsonDict = {"multiline": True, "tabs": True}
"""`json_schema_extra` of a field that holds a script: lines, and tabs to indent them."""

FREE_TEXT: JsonDict = {"multiline": True, "tabs": True}
"""`json_schema_extra` of a value Kubernetes takes as any string, written into no file and
no name: an annotation's (a JSON document, a PEM bundle, a script a controller reads). Line
breaks, tabs and surrounding whitespace are kept; other control characters, which no such
value needs and `kubectl` would not show, are still refused."""

_LINE_BREAKS = "\n"


def text_issues(raw: Any, model: type[BaseModel]) -> Iterator[SpecIssue]:
    """Every string in ``raw`` (stack config for ``model``) that breaks the rule."""
    yield from _walk(raw, model, (), multiline=False)


def _walk(
    value: Any, annotation: Any, path: tuple[str | int, ...], multiline: bool, tabs: bool = False
) -> Iterator:
    if isinstance(value, str):
        problem = text_problem(value, multiline=multiline, tabs=tabs)
        if problem:
            yield SpecIssue(join_path(*path), problem)
        return
    model = model_for(annotation, value)
    if model is not None and isinstance(value, dict):
        fields = fields_by_key(model)
        for key, item in value.items():
            if key in fields:
                info = fields[key][1]
                extra = info.json_schema_extra
                lines = isinstance(extra, dict) and extra.get("multiline") is True
                tabs = isinstance(extra, dict) and extra.get("tabs") is True
                yield from _walk(item, info.annotation, (*path, key), lines, tabs)
        return
    item_type = item_annotation(annotation)
    marks = _marks(item_type)
    lines = multiline or marks.get("multiline") is True
    tabs = tabs or marks.get("tabs") is True
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, item_type, (*path, index), lines, tabs)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (problem := text_problem(key, multiline=False)):
                yield SpecIssue(join_path(*path, key), f"the key {problem}")
            yield from _walk(item, item_type, (*path, key), lines, tabs)


def _marks(annotation: Any) -> dict:
    """The `json_schema_extra` of a `Field` in an item type's `Annotated` metadata."""
    for meta in typing.get_args(annotation)[1:] if hasattr(annotation, "__metadata__") else ():
        if isinstance(meta, FieldInfo) and isinstance(meta.json_schema_extra, dict):
            return meta.json_schema_extra
    return {}


def text_problem(value: str, *, multiline: bool, tabs: bool = False) -> str | None:
    """What is wrong with ``value`` under the rule, or None."""
    allowed = (_LINE_BREAKS if multiline else "") + ("\t" if tabs else "")
    for char in value:
        if (ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0) and char not in allowed:
            return (
                f"contains the control character {char!r}: strings here are written into "
                "config files and names, where it would break the line"
            )
    if not multiline and value != value.strip():
        return f"{value!r} has leading or trailing whitespace"
    return None
