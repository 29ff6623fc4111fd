"""The ``nvidia-smi`` queries the GPU checks run, and parsers for their CSV output."""

from __future__ import annotations

from dataclasses import dataclass

GPU_LIST_ARGS = ("--query-gpu=index,name,uuid,pci.bus_id", "--format=csv,noheader")
ECC_ARGS = (
    "--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
    "remapped_rows.pending,remapped_rows.failure",
    "--format=csv,noheader,nounits",
)
# nvidia-smi's exit status when the driver works but no GPU is present.
RC_NO_DEVICES = 6

# Values nvidia-smi prints for a field this GPU or driver does not report.
_NOT_REPORTED = frozenset({"[n/a]", "n/a", "[not supported]", "not supported"})
# What it prints in every field of a GPU that fell off the bus.
_LOST = "[gpu is lost]"


class ParseError(ValueError):
    """Output that does not look like the query's CSV."""


@dataclass(frozen=True)
class Gpu:
    """One row of the GPU list query."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str


@dataclass(frozen=True)
class EccStatus:
    """One row of the ECC query; ``None`` where the GPU does not report the field."""

    index: int
    uncorrected_volatile: int | None
    retired_pages_pending: bool | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    lost: bool = False

    def problems(self) -> list[str]:
        """Short descriptions of what is wrong with this GPU (empty when healthy)."""
        found = ["lost"] if self.lost else []
        if self.uncorrected_volatile:
            found.append(f"uncorrectable {self.uncorrected_volatile}")
        if self.retired_pages_pending:
            found.append("retire pending")
        if self.remapped_rows_pending:
            found.append("remap pending")
        if self.remapped_rows_failure:
            found.append("remap failed")
        return found


def _fields(line: str, count: int) -> list[str]:
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != count:
        raise ParseError(f"expected {count} fields, got {len(fields)}: {line.strip()[:80]!r}")
    return fields


def _index(value: str) -> int:
    if not value.isdigit():
        raise ParseError(f"bad GPU index {value!r}")
    return int(value)


def parse_gpu_list(text: str, *, strict: bool = True) -> list[Gpu]:
    """Rows of ``--query-gpu=index,name,uuid,pci.bus_id --format=csv,noheader``.

    ``strict=False`` skips lines that are not rows (error messages) instead of raising.
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            index, name, uuid, bus = _fields(line, 4)
            gpus.append(Gpu(_index(index), name, uuid, bus))
        except ParseError:
            if strict:
                raise
    return gpus


def _count(value: str) -> int | None:
    if value.lower() in _NOT_REPORTED:
        return None
    if not value.isdigit():
        raise ParseError(f"bad counter {value!r}")
    return int(value)


def _flag(value: str) -> bool | None:
    lowered = value.lower()
    if lowered in _NOT_REPORTED:
        return None
    if lowered in ("yes", "1"):
        return True
    if lowered in ("no", "0"):
        return False
    raise ParseError(f"bad flag {value!r}")


def parse_ecc(text: str) -> list[EccStatus]:
    """Rows of the :data:`ECC_ARGS` query; raises :class:`ParseError` on values it does not know.

    A GPU that fell off the bus prints ``[GPU is lost]`` in every field: ``lost=True``.
    """
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        index, uncorrected, retired, remap_pending, remap_failure = _fields(line, 5)
        if _LOST in (uncorrected.lower(), retired.lower()):
            rows.append(EccStatus(_index(index), None, None, None, None, lost=True))
            continue
        rows.append(
            EccStatus(
                _index(index),
                _count(uncorrected),
                _flag(retired),
                _flag(remap_pending),
                _flag(remap_failure),
            )
        )
    return rows
