"""The cluster's nodes via ``sinfo``: name, state, partitions, features and GPU Gres.

One line per node and partition (``--Node``), ``|``-separated (node names, features and Gres
never contain ``|``; features and Gres do contain commas)::

    gpu-0|idle|batch*|gpu,ib|gpu:h100:8(S:0-1)
    gpu-0|idle|debug|gpu,ib|gpu:h100:8(S:0-1)

``%T`` is the long state with its suffix flags (``idle*`` not responding, ``idle~`` powered
down, ``drained``, ``mixed``, ...); ``%P`` marks the default partition with ``*``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .runner import CommandError, Runner

SINFO_ARGV = ("sinfo", "--noheader", "--Node", "--all", "--format=%N|%T|%P|%f|%G")
_FIELDS = 5
# What sinfo prints for a field with no value.
NO_VALUE = frozenset({"", "(null)", "n/a", "none"})
# One Gres entry without its "(S:0-1)" / "(IDX:...)" suffix: name[:type]:count.
_GRES_RE = re.compile(r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))?:(?P<count>[^:()]+)(?:\(.*\))?$")


class SinfoError(Exception):
    """``sinfo`` (or ``squeue``) did not answer, or its output is not the requested format."""


@dataclass(frozen=True)
class GpuGres:
    """The GPUs a node's Gres declares: total count and the GPU types named (may be none)."""

    count: int
    types: tuple[str, ...]


@dataclass(frozen=True)
class NodeInfo:
    """A node as ``sinfo`` lists it (its lines for all partitions merged)."""

    name: str
    state: str
    partitions: tuple[str, ...]
    default_partition: bool
    features: tuple[str, ...]
    gres: str

    @property
    def partition(self) -> str | None:
        """The partition to submit to: the default one if the node is in it, else its first."""
        return self.partitions[0] if self.partitions else None


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses: ``gpu:h100:8(S:0,1),shard:4``."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += (char == "(") - (char == ")")
        current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def parse_gpu_gres(gres: str) -> GpuGres:
    """``gpu:8`` → 8 GPUs of no named type, ``gpu:h100:8(S:0-1)`` → 8 ``h100``; several
    ``gpu`` entries add up; ``(null)`` and other Gres (``shard``, ``mps``) count nothing.

    Raises :class:`ValueError` for a ``gpu`` entry whose count is not a number.
    """
    count, types = 0, []
    if gres.strip().lower() in NO_VALUE:
        return GpuGres(0, ())
    for entry in _split_top_level(gres):
        match = _GRES_RE.match(entry)
        if match is None:
            if entry.split(":", 1)[0] == "gpu":
                raise ValueError(f"unparsable gpu Gres {entry!r}")
            continue
        if match["name"] != "gpu":
            continue
        if not match["count"].isdigit():
            raise ValueError(f"unparsable gpu count in Gres {entry!r}")
        count += int(match["count"])
        if match["type"] and match["type"] not in types:
            types.append(match["type"])
    return GpuGres(count, tuple(types))


def parse_sinfo(text: str) -> list[NodeInfo]:
    """Parse :data:`SINFO_ARGV` output into one :class:`NodeInfo` per node, in listed order;
    raises :class:`SinfoError` on a line without the five fields."""
    first: dict[str, NodeInfo] = {}
    partitions: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.strip().split("|")
        if len(fields) != _FIELDS:
            raise SinfoError(f"unexpected sinfo line (want {_FIELDS} fields): {line[:80]!r}")
        name, state, partition, features, gres = (f.strip() for f in fields)
        is_default = partition.endswith("*")
        partition = partition.rstrip("*")
        known = partitions.setdefault(name, [])
        if partition.lower() not in NO_VALUE and partition not in known:
            known.insert(0 if is_default else len(known), partition)
        if name not in first:
            feature_list = () if features.lower() in NO_VALUE else tuple(features.split(","))
            first[name] = NodeInfo(name, state, (), is_default, feature_list, gres)
        elif is_default:
            first[name] = replace(first[name], default_partition=True)
    return [replace(node, partitions=tuple(partitions[name])) for name, node in first.items()]


def query(runner: Runner, argv: Sequence[str], timeout: float) -> str:
    """The output of a Slurm query command; raises :class:`SinfoError` naming the command."""
    try:
        result = runner(list(argv), timeout=timeout)
    except CommandError as exc:
        raise SinfoError(str(exc)) from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        first = lines[0][:100] if lines else ""
        raise SinfoError(f"{argv[0]} exited {result.returncode}: {first}")
    return result.stdout


def list_nodes(runner: Runner, timeout: float) -> list[NodeInfo]:
    """Every node ``sinfo`` lists (hidden partitions included); raises :class:`SinfoError`."""
    return parse_sinfo(query(runner, SINFO_ARGV, timeout))
