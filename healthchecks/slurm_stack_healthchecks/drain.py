"""Whether to drain, resume or leave a node alone: a pure function of its state and the results.

Drain reasons we own start with ``healthcheck:`` or ``k8s:``. The quick checks and the NCCL
benchmark each own their own reasons (``healthcheck: nccl ...`` belongs to the benchmark), and
the node-state controller owns ``k8s:`` (a cordoned or NotReady Kubernetes node), so none ever
resumes a node another drained, and none ever touches a node drained, downed or failed with
anybody else's reason.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from .result import CheckResult
from .slurm_node import NodeState

PREFIX = "healthcheck:"
NCCL_PREFIX = f"{PREFIX} nccl"
K8S_PREFIX = "k8s:"
MAX_REASON_LENGTH = 120
_SEPARATOR = "; "


class Owner(enum.Enum):
    """Who is deciding: the quick checks, the NCCL benchmark or the node-state controller."""

    QUICK = "quick"
    NCCL = "nccl"
    K8S = "k8s"

    def owns(self, reason: str | None) -> bool:
        """Whether ``reason`` is one this owner set."""
        if not reason:
            return False
        if self is Owner.NCCL:
            return reason.startswith(NCCL_PREFIX)
        if self is Owner.K8S:
            return reason.startswith(K8S_PREFIX)
        return reason.startswith(PREFIX) and not reason.startswith(NCCL_PREFIX)


class Action(enum.Enum):
    """What to do to the node."""

    NONE = "none"
    DRAIN = "drain"
    RESUME = "resume"


@dataclass(frozen=True)
class Decision:
    """An action, the reason to drain with (for ``DRAIN``) and why, for the log line."""

    action: Action
    reason: str | None
    why: str


def _clean(text: str) -> str:
    # ";" separates failures; "=" and quotes would confuse scontrol's and our log's key=value.
    return " ".join(text.replace(";", ",").replace("=", ":").replace('"', "'").split())


def drain_reason(results: Iterable[CheckResult], prefix: str = PREFIX) -> str | None:
    """``"healthcheck: gpu_count 7/8; gpu_xid 79@0000:18:00"`` for the failed results, or
    ``None`` when all passed; at most :data:`MAX_REASON_LENGTH` characters (failures that do
    not fit are counted as ``+N more``)."""
    failures = [_clean(r.text) for r in results if not r.ok]
    if not failures:
        return None
    for shown in range(len(failures), 0, -1):
        hidden = len(failures) - shown
        parts = failures[:shown] + ([f"+{hidden} more"] if hidden else [])
        reason = f"{prefix} {_SEPARATOR.join(parts)}"
        if len(reason) <= MAX_REASON_LENGTH:
            return reason
    return reason[:MAX_REASON_LENGTH].rstrip()  # the first failure alone is too long


def decide(node: NodeState | None, wanted_reason: str | None, owner: Owner) -> Decision:
    """Decide for a node in state ``node`` (``None``: unknown) when the checks want
    ``wanted_reason`` (``None``: everything passed).

    * state unknown: do nothing (we cannot rule out somebody else's drain);
    * drained, or down/failed with a reason, that ``owner`` does not own: do nothing;
    * checks fail: drain, unless already drained with exactly this reason;
    * checks pass: resume if drained with a reason ``owner`` owns, else nothing.
    """
    if node is None:
        return Decision(Action.NONE, None, "node state unknown")
    mine = owner.owns(node.reason)
    if (node.drained or node.reason) and not mine:
        return Decision(Action.NONE, None, f"held by other reason: {node.reason or '(none)'}")
    if wanted_reason is not None:
        if node.drained and node.reason == wanted_reason:
            return Decision(Action.NONE, None, "already drained with this reason")
        return Decision(Action.DRAIN, wanted_reason, "checks failed")
    if node.drained:
        return Decision(Action.RESUME, None, "checks pass again")
    return Decision(Action.NONE, None, "healthy")
