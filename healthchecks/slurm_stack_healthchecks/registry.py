"""The registry of checks and the loop that runs the enabled ones."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .result import CheckResult

if TYPE_CHECKING:
    from .context import Context

CheckFn = Callable[["Context"], CheckResult]

_REGISTRY: dict[str, CheckFn] = {}


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    """Decorator registering ``fn`` as the check called ``name``."""

    def register(fn: CheckFn) -> CheckFn:
        if name in _REGISTRY:
            raise ValueError(f"check {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn

    return register


def names() -> frozenset[str]:
    """Every registered check name."""
    _load_builtin_checks()
    return frozenset(_REGISTRY)


def run_checks(ctx: Context, enabled: Iterable[str]) -> list[CheckResult]:
    """Run the ``enabled`` checks in order; each result carries how long its check took.

    A check that raises is a failure of that check (``"<name> error <Type>"``): a health check
    must report, not crash, and a broken check is not evidence that the node is healthy.
    """
    _load_builtin_checks()
    results = []
    for name in enabled:
        started = time.monotonic()
        try:
            result = _REGISTRY[name](ctx)
        except Exception as exc:
            result = CheckResult.failed(name, f"error {type(exc).__name__}")
        results.append(dataclasses.replace(result, seconds=time.monotonic() - started))
    return results


def _load_builtin_checks() -> None:
    from . import checks  # noqa: F401  (importing registers them)
