"""What each supported Slurm major knows, so renderers never emit a key a version lacks."""

from dataclasses import dataclass
from typing import Literal

SlurmVersion = Literal["24.11", "26.05"]
SUPPORTED_VERSIONS: tuple[SlurmVersion, ...] = ("24.11", "26.05")
DEFAULT_VERSION: SlurmVersion = "26.05"

# Debian suite whose slurm-wlm packages give each major.
DEBIAN_SUITE: dict[SlurmVersion, str] = {"24.11": "trixie", "26.05": "forky"}


@dataclass(frozen=True)
class VersionedKey:
    """A slurm.conf key that exists only from (or until) some Slurm release.

    The option tables read from Slurm's source (slurm_stack/spec/data, slurm_options) say the
    same for the majors they cover; tests/test_slurm_option_tables.py holds them together."""

    key: str
    since: str | None = None
    removed_in: str | None = None  # the daemons no longer take it (gone, defunct or fatal)
    deprecated_in: str | None = None  # still read, with a warning, for ``replacement``
    replacement: str | None = None


# Keys whose presence depends on the major. Compared as (year, month) tuples.
VERSIONED_SLURM_CONF_KEYS: tuple[VersionedKey, ...] = (
    VersionedKey("MetricsType", since="25.11"),
    VersionedKey("MetricsParameters", since="25.11"),
    VersionedKey("NamespaceType", since="25.11"),
    VersionedKey("JobContainerType", deprecated_in="25.11", replacement="NamespaceType"),
    VersionedKey("PrologTimeout", since="25.05"),
    VersionedKey("EpilogTimeout", since="25.05"),
    VersionedKey("AccountingStorageUser", removed_in="25.11"),
)


def _as_tuple(version: str) -> tuple[int, int]:
    year, month = version.split(".")
    return int(year), int(month)


def at_least(version: str, minimum: str) -> bool:
    """True when Slurm ``version`` is ``minimum`` or newer."""
    return _as_tuple(version) >= _as_tuple(minimum)


def key_problem(key: str, version: str) -> str | None:
    """Why slurm.conf ``key`` cannot be used on ``version``, or None when it can."""
    for entry in VERSIONED_SLURM_CONF_KEYS:
        if entry.key.lower() != key.lower():
            continue
        if entry.since and not at_least(version, entry.since):
            return f"{entry.key} needs Slurm {entry.since} or newer (slurmVersion is {version})"
        if entry.removed_in and at_least(version, entry.removed_in):
            hint = f"; use {entry.replacement}" if entry.replacement else ""
            return f"{entry.key} was removed in Slurm {entry.removed_in}{hint}"
        if entry.deprecated_in and at_least(version, entry.deprecated_in):
            return (
                f"{entry.key} was replaced by {entry.replacement} in Slurm "
                f"{entry.deprecated_in} (slurmctld warns that it will be removed); use "
                f"{entry.replacement}"
            )
    return None
