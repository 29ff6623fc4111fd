"""Write `slurm_stack/package/args.py`, the component package's typed arguments, from the spec.

The spec's pydantic models stay the one source of truth: this turns each model into a
TypedDict the Pulumi SDK's analyzer can read (`pulumi.provider.experimental`), with the
model's docstrings as the schema's descriptions. The analyzer has no Literal, Annotated or
union types, so a one-field Literal becomes an Enum, a Literal inside a list or map a string,
the submount variants one TypedDict with their fields merged, and `int | str` Any. Values
are still validated by the pydantic models (slurm_stack/package/convert.py).

Run `python -m slurm_stack.package.generate` after changing the spec: it rewrites args.py and
provider/schema.json (review its diff); tests/test_package.py fails while either is stale.
"""

import json
import re
import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from slurm_stack.spec.models import ClusterSpec

ARGS_FILE = Path(__file__).with_name("args.py")
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "provider" / "schema.json"
TOP_LEVEL = "SlurmClusterArgs"
WIDTH = 100

HEADER = '''"""Typed arguments of the component package's `slurm-stack:index:SlurmCluster`.

Generated from slurm_stack/spec/models.py by `python -m slurm_stack.package.generate`: do not
edit. Values are validated by the spec's models, with the same messages and key paths.
"""

from enum import StrEnum
from typing import Any, NotRequired, Required, TypedDict

import pulumi
'''

SECRETS = {
    "db_password": (
        "Password of the external accounting database's user (a secret): needed with "
        "`accounting.mode: external` unless `accounting.external.passwordSecret` names a "
        "Secret. The other modes generate one."
    ),
    "ldap_bind_password": (
        "Password of `directory.bindDn` (a secret): needed when, and only when, a bind DN is set."
    ),
    "container_registry_auth": (
        "Credentials for pulling container jobs' images (a secret): a Docker config JSON "
        "with an `auths` entry per registry (docs/containers.md); only with "
        "`containers.enabled`."
    ),
}
"""Inputs beside the spec: secrets, the only ones that may be outputs of other resources."""


@dataclass
class Field:
    """One TypedDict field: its Python name, annotation text and description."""

    name: str
    annotation: str
    required: bool
    doc: str


@dataclass
class Shape:
    """One generated class: a TypedDict (fields) or an Enum (members)."""

    name: str
    doc: str
    fields: list[Field] = field(default_factory=list)
    members: list[str] = field(default_factory=list)


class Generator:
    """Collects the classes reachable from ClusterSpec in definition order (used before use)."""

    def __init__(self) -> None:
        self.shapes: dict[str, Shape] = {}

    def typed_dict(self, model: type[BaseModel], name: str | None = None) -> str:
        name = name or model.__name__
        if name in self.shapes:
            return name
        shape = Shape(name, _doc(model.__doc__))
        fields = [
            Field(
                python_name,
                self.annotation(info.annotation, owner=name, key=_alias(python_name, info)),
                info.is_required(),
                _field_doc(info),
            )
            for python_name, info in model.model_fields.items()
        ]
        shape.fields = fields
        self.shapes[name] = shape
        return name

    def merged(self, name: str, variants: tuple[type[BaseModel], ...]) -> str:
        """One TypedDict for a discriminated union: every variant's fields, `type` an Enum."""
        if name in self.shapes:
            return name
        tags = [get_args(v.model_fields["type"].annotation)[0] for v in variants]
        shape = Shape(name, _union_doc(variants, tags))
        by_name: dict[str, Field] = {}
        used_by: dict[str, list[str]] = {}
        for variant, tag in zip(variants, tags, strict=True):
            for python_name, info in variant.model_fields.items():
                used_by.setdefault(python_name, []).append(tag)
                if python_name in by_name:
                    continue
                if python_name == "type":
                    annotation = self.enum(f"{name}Type", tags, "The kind of submount.")
                    doc = "The kind of submount: " + ", ".join(f"`{t}`" for t in tags) + "."
                else:
                    annotation = self.annotation(info.annotation, owner=name, key=python_name)
                    doc = _field_doc(info)
                by_name[python_name] = Field(python_name, annotation, info.is_required(), doc)
        for python_name, entry in by_name.items():
            tags_using = used_by[python_name]
            entry.required = entry.required and len(tags_using) == len(tags)
            if len(tags_using) != len(tags):
                only = "Only with type " + " or ".join(f"`{t}`" for t in tags_using) + "."
                entry.doc = f"{entry.doc} {only}".strip()
        shape.fields = list(by_name.values())
        self.shapes[name] = shape
        return name

    def enum(self, name: str, values: list[str], doc: str) -> str:
        if name not in self.shapes:
            self.shapes[name] = Shape(name, doc, members=values)
        return name

    def annotation(self, annotation: Any, *, owner: str, key: str, top: bool = True) -> str:
        """The TypedDict annotation text for a pydantic field annotation."""
        origin = get_origin(annotation)
        if origin is Annotated:
            return self.annotation(get_args(annotation)[0], owner=owner, key=key, top=top)
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                return self.annotation(members[0], owner=owner, key=key, top=top)
            models = tuple(_unannotated(m) for m in members)
            if all(isinstance(m, type) and issubclass(m, BaseModel) for m in models):
                return self.merged(_union_name(models), models)
            return "Any"  # e.g. a number of pods or a percentage
        if origin is Literal:
            values = list(get_args(annotation))
            if top and all(isinstance(v, str) for v in values):
                name = owner.removesuffix("Args") + _upper_first(key)
                return self.enum(name, values, f"Values of `{key}`.")
            return "str"  # the SDK's analyzer maps no enum inside a list or a map
        if origin is list:
            (item,) = get_args(annotation)
            return f"list[{self.annotation(item, owner=owner, key=key, top=False)}]"
        if origin is dict:
            _, value = get_args(annotation)
            return f"dict[str, {self.annotation(value, owner=owner, key=key, top=False)}]"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return self.typed_dict(annotation)
        if annotation in (str, int, float, bool):
            return annotation.__name__
        raise TypeError(f"{owner}.{key}: no package type for {annotation!r}")


def _unannotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _union_name(models: tuple[type[BaseModel], ...]) -> str:
    """`EmptyDirSubmount | MemorySubmount | ...` is a `Submount`: their common suffix."""
    names = [m.__name__ for m in models]
    suffix = names[0]
    while suffix and not all(n.endswith(suffix) for n in names):
        suffix = suffix[1:]
    suffix = suffix.lstrip("abcdefghijklmnopqrstuvwxyz")
    if not suffix:
        raise TypeError(f"no common name for {names}")
    return suffix


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _alias(python_name: str, info: FieldInfo) -> str:
    return info.alias or python_name


def _doc(text: str | None) -> str:
    return " ".join(textwrap.dedent(text or "").split())


def _field_doc(info: FieldInfo) -> str:
    doc = _doc(info.description)
    if not info.is_required():
        default = info.get_default(call_default_factory=True)
        shown = _shown_default(default)
        if shown is not None:
            doc = f"{doc} Default: {shown}." if doc else f"Default: {shown}."
    return doc


def _shown_default(default: Any) -> str | None:
    """A default worth showing in the schema: a scalar or a short list of scalars."""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, int | float):
        return str(default)
    if isinstance(default, str):
        return f"`{default}`"
    if isinstance(default, list) and default and all(isinstance(v, str) for v in default):
        return ", ".join(f"`{v}`" for v in default)
    return None


def _union_doc(variants: tuple[type[BaseModel], ...], tags: list[str]) -> str:
    kinds = " ".join(f"`{tag}`: {_doc(v.__doc__)}" for v, tag in zip(variants, tags, strict=True))
    return f"A directory mounted into the jail for every job and login. {kinds}"


def _docstring(text: str, indent: str) -> list[str]:
    """A docstring whose value is ``text`` exactly (the analyzer reads it raw, no dedent):
    one line when it fits, else adjacent literals in parentheses, which Python joins."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    single = f'{indent}"""{escaped}"""'
    if len(single) <= WIDTH:
        return [single]
    if len(f'{indent}("{escaped}")') <= WIDTH:  # as ruff format writes one that fits
        return [f'{indent}("{escaped}")']
    room = WIDTH - len(indent) - 6
    words = escaped.split(" ")
    lines, current = [], ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if len(candidate) + 1 > room and current:
            lines.append(current + " ")
            current = word
        else:
            current = candidate
    lines.append(current)
    return [f"{indent}(", *(f'{indent}    "{line}"' for line in lines), f"{indent})"]


def _class_docstring(text: str) -> list[str]:
    """A class docstring wrapped to the line length; the module's end joins it back into one
    line for the schema (ruff format would join adjacent literals into one long line)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    lines = textwrap.wrap(escaped, WIDTH - 4 - 6, break_long_words=False, break_on_hyphens=False)
    if len(lines) == 1:
        return [f'    """{lines[0]}"""']
    return [f'    """{lines[0]}', *(f"    {line}" for line in lines[1:-1]), f'    {lines[-1]}"""']


ONE_LINE_DOCS = """
# The SDK's analyzer takes a class docstring as written: one line each in the schema.
for _type in [v for v in list(globals().values()) if getattr(v, "__module__", "") == __name__]:
    if isinstance(_type, type):
        _type.__doc__ = " ".join((_type.__doc__ or "").split())
"""


def _render(generator: Generator) -> str:
    out = [HEADER]
    for shape in generator.shapes.values():
        out.append("")
        if shape.members:
            out.append(f"class {shape.name}(StrEnum):")
            out.extend(_class_docstring(shape.doc))
            out.append("")
            for value in shape.members:
                out.append(f"    {_member_name(value)} = {json.dumps(value)}")
        else:
            out.append(f"class {shape.name}(TypedDict, total=False):")
            out.extend(_class_docstring(shape.doc))
            out.append("")
            for entry in shape.fields:
                wrapper = "Required" if entry.required else "NotRequired"
                out.append(f"    {entry.name}: {wrapper}[{entry.annotation}]")
                if entry.doc:
                    out.extend(_docstring(entry.doc, "    "))
            if shape.name == TOP_LEVEL:
                for name, doc in SECRETS.items():
                    out.append(f"    {name}: NotRequired[pulumi.Input[str]]")
                    out.extend(_docstring(doc, "    "))
        out.append("")
    out.append(ONE_LINE_DOCS)
    return "\n".join(out).rstrip("\n") + "\n"


def _member_name(value: str) -> str:
    """`IfNotPresent` -> IF_NOT_PRESENT, `sched/backfill` -> SCHED_BACKFILL, `24.11` -> V_24_11."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", value)
    name = re.sub(r"[^A-Za-z0-9]+", "_", spaced).upper().strip("_")
    return name if name and not name[0].isdigit() else f"V_{name}"


def generate() -> str:
    """The text of args.py for the current spec models."""
    generator = Generator()
    generator.typed_dict(ClusterSpec, TOP_LEVEL)
    # The top level last, after everything it uses.
    top = generator.shapes.pop(TOP_LEVEL)
    top.doc = (
        "Arguments of a SlurmCluster: the cluster spec, as under `slurm-stack:cluster` in "
        "stack config, and the passwords (secrets)."
    )
    generator.shapes[TOP_LEVEL] = top
    return _render(generator)


def main() -> int:
    """Write args.py, then the schema the SDK's analyzer infers from it (a fresh
    interpreter: this one may hold the args.py from before)."""
    ARGS_FILE.write_text(generate())
    schema = subprocess.run(
        [sys.executable, "-c", SCHEMA_SCRIPT], check=True, capture_output=True, text=True
    ).stdout
    SCHEMA_FILE.write_text(schema)
    print(f"wrote {ARGS_FILE} and {SCHEMA_FILE}: review the diff")
    return 0


SCHEMA_SCRIPT = (
    "import sys; from slurm_stack.package.provider import schema_text; "
    "sys.stdout.write(schema_text())"
)


if __name__ == "__main__":
    raise SystemExit(main())
