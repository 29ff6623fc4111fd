"""Read `Pulumi.yaml` and `Pulumi.<stack>.yaml` the way the Pulumi CLI hands config to a program."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Stand-in for `secure:` values, which only the Pulumi CLI can decrypt.
SECRET_PLACEHOLDER = "offline-secret-placeholder"


@dataclass(frozen=True)
class StackConfig:
    """A stack's config as the program sees it: string values, JSON for objects."""

    project: str
    stack: str
    config: dict[str, str]
    secret_keys: list[str]


def stack_file(stack: str, project_dir: Path) -> Path:
    """The stack file of ``stack`` beside Pulumi.yaml."""
    return project_dir / f"Pulumi.{stack}.yaml"


def project_name(project_dir: Path, default: str = "slurm-stack") -> str:
    """The `name` in Pulumi.yaml (the config namespace), if there is one."""
    path = project_dir / "Pulumi.yaml"
    if not path.exists():
        return default
    return str((yaml.safe_load(path.read_text()) or {}).get("name", default))


def load_stack_config(path: Path, project: str) -> StackConfig:
    """Parse a stack file; `secure:` values become placeholders marked secret."""
    document = yaml.safe_load(path.read_text()) or {}
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a mapping with a 'config' key")
    stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in (document.get("config") or {}).items():
        full_key = key if ":" in key else f"{project}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[full_key] = SECRET_PLACEHOLDER
            secret_keys.append(full_key)
        else:
            config[full_key] = _as_config_string(value)
    return StackConfig(project, stack, config, secret_keys)


def _as_config_string(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
