"""A node's Slurm state via ``scontrol``: reading it, draining and resuming."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .runner import CommandError, CommandResult, Runner

SCONTROL = "scontrol"

_STATE_RE = re.compile(r"(?:^|\s)State=(?P<state>\S+)")
# The reason runs up to the " [user@time]" scontrol appends; the fallback (no suffix) stops at
# the next " Key=" field.
_REASON_RE = re.compile(r"(?:^|\s)Reason=(?P<reason>.*?) \[[^\]\s@]+@[^\]\s]+\](?=\s|$)")
_REASON_BARE_RE = re.compile(r"(?:^|\s)Reason=(?P<reason>.*?)\s*(?=\s[A-Za-z_]+=|$)")
_NAME_RE = re.compile(r"^NodeName=(?P<name>\S+)")
_FEATURES_RE = re.compile(r"(?:^|\s)AvailableFeatures=(?P<features>\S*)")
_TOPOLOGY_RE = re.compile(r"(?:^|\s)Topology=(?P<topology>\S+)")


class NodeError(Exception):
    """``scontrol`` could not tell or change the node's state."""


class NodeNotRegistered(NodeError):
    """slurmctld has no record of the node yet: slurmd runs the first check while it is
    still registering a dynamic node."""


@dataclass(frozen=True)
class NodeState:
    """What the checks' decision needs: the state flags and the current reason."""

    state: str
    reason: str | None
    features: tuple[str, ...] = ()
    """AvailableFeatures, in Slurm's order."""
    topology: str | None = None
    """The node's ``Topology=`` (Slurm 25.05 and newer show it when set)."""

    @property
    def flags(self) -> frozenset[str]:
        """``IDLE+DRAIN`` → ``{"IDLE", "DRAIN"}``."""
        return frozenset(self.state.upper().split("+"))

    @property
    def drained(self) -> bool:
        """Drained or draining (the DRAIN flag, whatever the base state)."""
        return bool(self.flags & {"DRAIN", "DRAINED", "DRAINING"})


def parse_node_oneliner(text: str) -> NodeState:
    """Parse ``scontrol --oneliner show node NAME``; raises :class:`NodeError` without State=."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    state = _STATE_RE.search(line)
    if state is None:
        raise NodeError(f"no State= in scontrol output: {line[:80]!r}")
    reason = _REASON_RE.search(line) or _REASON_BARE_RE.search(line)
    features = _FEATURES_RE.search(line)
    listed = features["features"] if features else ""
    topology = _TOPOLOGY_RE.search(line)
    return NodeState(
        state["state"],
        reason["reason"] if reason and reason["reason"] else None,
        tuple(f for f in listed.split(",") if f and f != "(null)"),
        topology["topology"] if topology else None,
    )


def get_node_states(runner: Runner, timeout: float) -> dict[str, NodeState]:
    """Every node slurmctld knows, by name, from one ``scontrol show nodes``; raises
    :class:`NodeError`."""
    try:
        result = runner([SCONTROL, "--oneliner", "show", "nodes"], timeout=timeout)
    except CommandError as exc:
        raise NodeError(str(exc)) from None
    if result.returncode != 0:
        raise NodeError(f"scontrol show nodes exited {result.returncode}: {_first(result)}")
    states = {}
    for line in result.stdout.splitlines():
        name = _NAME_RE.match(line)
        if name:
            states[name["name"]] = parse_node_oneliner(line)
    return states


def get_node_state(runner: Runner, node: str, timeout: float) -> NodeState:
    """The node's current state and reason; raises :class:`NodeError`."""
    try:
        result = runner([SCONTROL, "--oneliner", "show", "node", node], timeout=timeout)
    except CommandError as exc:
        raise NodeError(str(exc)) from None
    if result.returncode != 0:
        if f"Node {node} not found" in f"{result.stdout}\n{result.stderr}":
            raise NodeNotRegistered(_first(result))
        raise NodeError(f"scontrol show node exited {result.returncode}: {_first(result)}")
    return parse_node_oneliner(result.stdout)


def drain_node(runner: Runner, node: str, reason: str, timeout: float) -> None:
    """``scontrol update NodeName=<node> State=DRAIN Reason=<reason>``; raises
    :class:`NodeError`."""
    _update(runner, node, ["State=DRAIN", f"Reason={reason}"], timeout)


def place_node(
    runner: Runner, node: str, features: list[str] | None, topology: str | None, timeout: float
) -> None:
    """Set the node's features (available and active alike) and/or its ``Topology=``;
    raises :class:`NodeError`."""
    fields = []
    if features is not None:
        listed = ",".join(features)
        fields += [f"AvailableFeatures={listed}", f"ActiveFeatures={listed}"]
    if topology is not None:
        fields.append(f"Topology={topology}")
    if fields:
        _update(runner, node, fields, timeout)


def resume_node(runner: Runner, node: str, timeout: float) -> None:
    """``scontrol update NodeName=<node> State=RESUME``; raises :class:`NodeError`."""
    _update(runner, node, ["State=RESUME"], timeout)


def _update(runner: Runner, node: str, fields: list[str], timeout: float) -> None:
    # No shell: the reason is one argv element, spaces and all.
    try:
        result = runner([SCONTROL, "update", f"NodeName={node}", *fields], timeout=timeout)
    except CommandError as exc:
        raise NodeError(str(exc)) from None
    if result.returncode != 0:
        raise NodeError(f"scontrol update exited {result.returncode}: {_first(result)}")


def _first(result: CommandResult) -> str:
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[0][:100] if lines else ""
