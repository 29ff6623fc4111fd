"""A change of `controller.replicas` on a deployed stack: refused.

One controller keeps its state on a ReadWriteOnce claim, a primary and a backup share a
ReadWriteMany one; a claim's access modes cannot change once it exists (Kubernetes refuses
the update, and Pulumi would replace the protected claim, which it refuses too). Moving the
state to a new claim is not something the stack does, so the change is refused before any
resource, naming what would be needed. The last deployed count is the stack's own
`controllerReplicas` output; a stack deployed before that output existed had one controller.
"""

from typing import Any

from slurm_stack.spec.errors import SpecIssue
from slurm_stack.version_change import VERSION_OUTPUT

REPLICAS_OUTPUT = "controllerReplicas"


def deployed_controller_replicas(outputs: dict[str, Any]) -> int | None:
    """How many slurmctld pods the last update ran; None on the first `up`."""
    replicas = outputs.get(REPLICAS_OUTPUT)
    if isinstance(replicas, int | float) and not isinstance(replicas, bool):
        return int(replicas)
    return 1 if VERSION_OUTPUT in outputs else None


def controller_replicas_issue(deployed: int | None, wanted: int) -> SpecIssue | None:
    """Why the stack cannot go from ``deployed`` controllers to ``wanted``, or None."""
    if deployed is None or deployed == wanted:
        return None
    return SpecIssue(
        "controller.replicas",
        f"this stack runs {deployed} slurmctld pod{'s' if deployed > 1 else ''}; changing "
        f"to {wanted} would need the controller's state moved to a claim of another access "
        f"mode (ReadWriteOnce for one, ReadWriteMany for a primary and a backup), which "
        f"Kubernetes cannot change on an existing claim. Keep replicas: {deployed} "
        "(docs/controller-ha.md says why)",
    )
