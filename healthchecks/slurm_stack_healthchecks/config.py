"""The per-node JSON config of the quick checks, and its validation.

Default path ``/run/slurm/healthcheck.json`` (``--config`` overrides it). One JSON object; only
``checks`` is required, unknown keys are errors (they are usually typos)::

    {
      "checks": ["gpu_driver", "gpu_count", "gpu_ecc", "gpu_xid", "jail", "munge", "disk"],
      "expected_gpus": 8,                  # int >= 0; GPUs the driver must list (gpu_count)
      "gpu_type": "h100",                  # str or null; the pool's GPU model, informational
      "jail_marker": "/mnt/jail/.slurm-stack-populated",  # absolute path (jail)
      "munge_socket": "/run/munge/munge.socket.2",        # absolute path (munge)
      "disk_paths": ["/tmp", "/var/spool/slurmd"],        # absolute paths (disk)
      "min_free_disk_percent": 5,          # number in [0, 100) (disk)
      "nvidia_smi_timeout_seconds": 5,     # number > 0; per nvidia-smi call
      "command_timeout_seconds": 5,        # number > 0; munge, dmesg, scontrol, jail probe
      "dcgm": false,                       # bool; adds the dcgm check (`dcgmi diag -r 1`)
      "dcgm_timeout_seconds": 30,          # number > 0 (dcgm)
      "xid_source": "kmsg",                # "kmsg" (read /dev/kmsg) or "dmesg" (run `dmesg`)
      "xid_window_seconds": 3600,          # number > 0, or null = since boot (gpu_xid)
      "fatal_xids": [48, 62, 63, ...],     # ints; replaces the default set of xid.FATAL_XIDS
      "results_dir": "/mnt/jail/var/lib/slurm-stack/healthchecks"  # absolute path or null
    }

With ``results_dir``, each run also writes the node's results there for the exporter (see
:mod:`.results_file`); without it (or null) nothing is written.

``"dcgm": true`` enables the ``dcgm`` check without listing it in ``checks``. Check names are
validated against the registry by :func:`load_config`'s ``known_checks``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .xid import FATAL_XIDS

DEFAULT_CONFIG_PATH = Path("/run/slurm/healthcheck.json")


class ConfigError(Exception):
    """The config file is missing, is not JSON, or does not match the schema."""


@dataclass(frozen=True)
class Config:
    """A validated config; field meanings are in the module docstring."""

    checks: tuple[str, ...]
    expected_gpus: int = 0
    gpu_type: str | None = None
    jail_marker: str = "/mnt/jail/.slurm-stack-populated"
    munge_socket: str = "/run/munge/munge.socket.2"
    disk_paths: tuple[str, ...] = ("/tmp",)
    min_free_disk_percent: float = 5.0
    nvidia_smi_timeout_seconds: float = 5.0
    command_timeout_seconds: float = 5.0
    dcgm: bool = False
    dcgm_timeout_seconds: float = 30.0
    xid_source: str = "kmsg"
    xid_window_seconds: float | None = 3600.0
    fatal_xids: frozenset[int] = FATAL_XIDS
    results_dir: str | None = None

    @property
    def enabled_checks(self) -> tuple[str, ...]:
        """``checks`` in order, plus ``dcgm`` when ``"dcgm": true``."""
        if self.dcgm and "dcgm" not in self.checks:
            return (*self.checks, "dcgm")
        return self.checks


def load_config(path: Path, known_checks: Collection[str]) -> Config:
    """Read and validate ``path``; raises :class:`ConfigError` naming every problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config {path}: not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    try:
        return parse_config(raw, known_checks)
    except ConfigError as exc:
        raise ConfigError(f"config {path}: {exc}") from None


def parse_config(raw: Any, known_checks: Collection[str]) -> Config:
    """Validate an already-decoded JSON value; raises :class:`ConfigError`."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a JSON object, got {_kind(raw)}")
    v = _Validator(raw)
    values: dict[str, Any] = {
        "checks": v.checks(known_checks),
        "expected_gpus": v.integer("expected_gpus", minimum=0),
        "gpu_type": v.string("gpu_type", nullable=True),
        "jail_marker": v.path("jail_marker"),
        "munge_socket": v.path("munge_socket"),
        "disk_paths": v.paths("disk_paths"),
        "min_free_disk_percent": v.number("min_free_disk_percent", minimum=0, below=100),
        "nvidia_smi_timeout_seconds": v.number("nvidia_smi_timeout_seconds", positive=True),
        "command_timeout_seconds": v.number("command_timeout_seconds", positive=True),
        "dcgm": v.boolean("dcgm"),
        "dcgm_timeout_seconds": v.number("dcgm_timeout_seconds", positive=True),
        "xid_source": v.choice("xid_source", ("kmsg", "dmesg")),
        "xid_window_seconds": v.number("xid_window_seconds", positive=True, nullable=True),
        "fatal_xids": v.xids("fatal_xids"),
        "results_dir": v.path("results_dir", nullable=True),
    }
    for key in sorted(set(raw) - set(values)):
        v.errors.append(f"{key}: unknown key")
    if v.errors:
        raise ConfigError("; ".join(v.errors))
    present = {k: val for k, val in values.items() if k in raw}
    return Config(**present)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


class _Validator:
    """Collects every schema error instead of stopping at the first one."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.errors: list[str] = []

    def _bad(self, key: str, want: str) -> None:
        value = self.raw[key]
        self.errors.append(f"{key}: must be {want}, got {json.dumps(value)} ({_kind(value)})")

    def checks(self, known: Collection[str]) -> tuple[str, ...] | None:
        if "checks" not in self.raw:
            self.errors.append("checks: required (a list of check names)")
            return None
        value = self.raw["checks"]
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            self._bad("checks", "a list of check names")
            return None
        for i, name in enumerate(value):
            if name not in known:
                self.errors.append(
                    f"checks[{i}]: unknown check {name!r} (known: {', '.join(sorted(known))})"
                )
        if len(set(value)) != len(value):
            self.errors.append("checks: lists a check twice")
        return tuple(value)

    def integer(self, key: str, *, minimum: int) -> int | None:
        value = self.raw.get(key)
        if key in self.raw and (
            isinstance(value, bool) or not isinstance(value, int) or value < minimum
        ):
            self._bad(key, f"an integer >= {minimum}")
        return value

    def number(
        self,
        key: str,
        *,
        positive: bool = False,
        minimum: float | None = None,
        below: float | None = None,
        nullable: bool = False,
    ) -> float | None:
        value = self.raw.get(key)
        if key not in self.raw or (value is None and nullable):
            return value
        if (
            not isinstance(value, bool)
            and isinstance(value, (int, float))
            and (not positive or value > 0)
            and (minimum is None or value >= minimum)
            and (below is None or value < below)
        ):
            return float(value)
        want = "a number > 0" if positive else f"a number in [{minimum:g}, {below:g})"
        self._bad(key, want + (" or null" if nullable else ""))
        return None

    def string(self, key: str, *, nullable: bool = False) -> str | None:
        value = self.raw.get(key)
        if (
            key in self.raw
            and not (isinstance(value, str) and value)
            and not (nullable and value is None)
        ):
            self._bad(key, "a non-empty string" + (" or null" if nullable else ""))
        return value

    def boolean(self, key: str) -> bool | None:
        value = self.raw.get(key)
        if key in self.raw and not isinstance(value, bool):
            self._bad(key, "true or false")
        return value

    def choice(self, key: str, options: tuple[str, ...]) -> str | None:
        value = self.raw.get(key)
        if key in self.raw and value not in options:
            self._bad(key, "one of " + ", ".join(json.dumps(o) for o in options))
        return value

    def path(self, key: str, *, nullable: bool = False) -> str | None:
        value = self.raw.get(key)
        if value is None and nullable:
            return None
        if key in self.raw and not (isinstance(value, str) and value.startswith("/")):
            self._bad(key, "an absolute path" + (" or null" if nullable else ""))
        return value

    def paths(self, key: str) -> tuple[str, ...] | None:
        value = self.raw.get(key)
        if key not in self.raw:
            return None
        if not (
            isinstance(value, list)
            and value
            and all(isinstance(p, str) and p.startswith("/") for p in value)
        ):
            self._bad(key, "a non-empty list of absolute paths")
            return None
        return tuple(value)

    def xids(self, key: str) -> frozenset[int] | None:
        value = self.raw.get(key)
        if key not in self.raw:
            return None
        if not (
            isinstance(value, list)
            and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in value)
        ):
            self._bad(key, "a list of positive integers (XID codes)")
            return None
        return frozenset(value)
