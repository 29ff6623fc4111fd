"""The jinja2 environment shared by the text renderers."""

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("slurm_stack.render", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # config files, not HTML
    )


def render_template(name: str, **context: Any) -> str:
    """Render ``templates/<name>`` with ``context``; missing variables are errors."""
    return _environment().get_template(name).render(**context)
