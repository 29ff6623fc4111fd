"""Checks that relate a model's own fields, run on every object of the stack config even
when some of its other fields are invalid.

A pydantic model validator runs only once every field of its model is valid, so one typo
beside a wrong combination would hide the combination until the next run. A relation names
the keys it reads instead, and runs whenever those keys are valid, on a model built from the
object's valid fields; every problem it yields is reported with all the others.
"""

import re
import typing
from collections.abc import Callable, Iterator
from functools import cache
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from slurm_stack.spec.errors import KeyProblem, SpecIssue, join_path
from slurm_stack.spec.walk import fields_by_key, item_annotation, model_for, unwrap

Check = Callable[[Any], Iterator[KeyProblem]]
C = TypeVar("C", bound=Check)
Path = tuple[str | int, ...]

_KEYS = "__relation_keys__"


def relation(*keys: str) -> Callable[[C], C]:
    """Mark a model method as a relation between ``keys``: camelCase, dotted below a nested
    model (`external.host`), `[*]` for every item of a list (`submounts[*].sizeLimit`). It
    yields a KeyProblem, keyed relative to the model, for each thing wrong, and runs only
    while none of ``keys`` is invalid."""

    def mark(check: C) -> C:
        setattr(check, _KEYS, keys)
        return check

    return mark


@cache
def relations_of(model: type[BaseModel]) -> list[tuple[tuple[str, ...], Check]]:
    """The model's relations (its own and inherited), in name order; read once per model,
    since a class's methods do not change (callers must not change the list)."""
    found: list[tuple[tuple[str, ...], Check]] = []
    for name in sorted(dir(model)):
        check = getattr(model, name, None)
        keys = getattr(check, _KEYS, None)
        if keys is not None and check is not None:
            found.append((keys, check))
    return found


def relation_issues(raw: Any, model: type[BaseModel], invalid: set[str]) -> Iterator[SpecIssue]:
    """Every problem the relations of ``model`` and the models below it find in ``raw``;
    ``invalid`` holds the paths (`workerPools[1].gpus`) of values already refused, whose
    relations are skipped."""
    yield from _visit(raw, model, (), invalid)


def _visit(value: Any, annotation: Any, path: Path, invalid: set[str]) -> Iterator[SpecIssue]:
    model = model_for(annotation, value)
    if model is not None and isinstance(value, dict):
        fields = fields_by_key(model)
        for key, item in value.items():
            if key in fields:
                yield from _visit(item, fields[key][1].annotation, (*path, key), invalid)
        runnable = [
            check
            for keys, check in relations_of(model)
            if not any(_refused(_tokens(key), path, invalid) for key in keys)
        ]
        if runnable:
            instance = _partial(model, value)
            for check in runnable:
                for problem in check(instance):
                    yield SpecIssue(join_path(*path, *problem.key), str(problem))
        return
    if isinstance(value, list | dict):
        items = enumerate(value) if isinstance(value, list) else value.items()
        for key, item in items:
            yield from _visit(item, item_annotation(annotation), (*path, key), invalid)


_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+|\*)\]")


def _tokens(path: str) -> list[str | int]:
    """`submounts[*].sizeLimit` -> ['submounts', '*', 'sizeLimit']; `a[2]` -> ['a', 2]."""
    return [name or (index if index == "*" else int(index)) for name, index in _TOKEN.findall(path)]


def _refused(key: list[str | int], path: Path, invalid: set[str]) -> bool:
    """Whether a value ``key`` names below ``path``, something inside it, or something it is
    inside was refused; `*` stands for any index."""
    pattern = [*path, *key]
    for bad in invalid:
        tokens = _tokens(bad)
        if all(
            want == got or (want == "*" and isinstance(got, int))
            for want, got in zip(pattern, tokens, strict=False)
        ):
            return True
    return False


def _partial(model: type[BaseModel], raw: dict[str, Any]) -> BaseModel:
    """``model`` built from the valid values of ``raw`` without validating the whole; keys
    that are absent or invalid take their defaults."""
    values: dict[str, Any] = {}
    for key, item in raw.items():
        field = fields_by_key(model).get(key)
        if field is None:
            continue
        name, info = field
        sub = model_for(info.annotation, item)
        if sub is not None:
            if isinstance(item, dict):
                values[name] = _partial(sub, item)
            continue
        if isinstance(item, list) and _holds_models(info.annotation):
            values[name] = [_partial_item(item_annotation(info.annotation), i) for i in item]
            continue
        try:
            values[name] = _adapter(model, name).validate_python(item)
        except ValidationError:
            continue
    return model.model_construct(**values)


def _holds_models(annotation: Any) -> bool:
    """Whether a list annotation's items are models (or a union of them)."""
    item = unwrap(item_annotation(annotation))
    members = typing.get_args(item) or (item,)
    return any(isinstance(m := unwrap(x), type) and issubclass(m, BaseModel) for x in members)


def _partial_item(annotation: Any, value: Any) -> BaseModel | None:
    """A list item as a partial model; None where it is not one (a relation reading it is
    skipped then, as its path was refused)."""
    model = model_for(annotation, value)
    return _partial(model, value) if model is not None and isinstance(value, dict) else None


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    # A type form built at run time, which a static type cannot describe.
    annotation: Any = (
        Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    )
    return TypeAdapter(annotation, config=ConfigDict(strict=True))
