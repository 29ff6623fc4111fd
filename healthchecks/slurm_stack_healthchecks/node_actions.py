"""Reading a node's state, deciding and acting on it: what every drain owner does per node."""

from __future__ import annotations

from .drain import Action, Decision, Owner, decide
from .runner import Runner
from .slurm_node import (
    NodeError,
    NodeNotRegistered,
    NodeState,
    drain_node,
    get_node_state,
    resume_node,
)


def decide_and_apply(
    runner: Runner,
    node: str,
    wanted: str | None,
    owner: Owner,
    timeout: float,
    dry_run: bool,
    state: NodeState | None = None,
) -> tuple[Decision, str | None]:
    """Read ``node``'s state (unless given), decide (:func:`.drain.decide`) and drain or
    resume it; the decision and the error that stopped it, if any. Nothing changes with
    ``dry_run``."""
    if state is None:
        try:
            state = get_node_state(runner, node, timeout)
        except NodeNotRegistered:
            # Nothing to drain or resume yet; the next run, once registered, acts on the result.
            return Decision(Action.NONE, None, "node not registered yet"), None
        except NodeError as exc:
            return decide(None, wanted, owner), str(exc)
    decision = decide(state, wanted, owner)
    if dry_run:
        return decision, None
    try:
        if decision.action is Action.DRAIN and decision.reason is not None:
            drain_node(runner, node, decision.reason, timeout)
        elif decision.action is Action.RESUME:
            resume_node(runner, node, timeout)
    except NodeError as exc:
        return decision, str(exc)
    return decision, None
