"""The one human-readable log line per decision (slurmd captures stderr)."""

from __future__ import annotations

import json
from collections.abc import Iterable


def _value(value: object) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\\') and text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=False)


def format_line(tool: str, fields: Iterable[tuple[str, object | None]]) -> str:
    """``tool key=value key="value with spaces" ...``; ``None`` values are left out."""
    parts = [tool]
    parts += [f"{key}={_value(value)}" for key, value in fields if value is not None]
    return " ".join(parts)
