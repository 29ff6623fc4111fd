"""PodDisruptionBudgets: how many of the cluster's pods a Kubernetes node drain may evict at once.

Without them `kubectl drain --delete-emptydir-data` evicts every pod of a node together:
controller, accounting and all workers at once. The eviction API refuses an eviction that
would leave fewer healthy pods than a budget allows, so a drain proceeds pod by pod. An
evicted worker runs its preStop hook like a scaled-down one (the pool's drain policy).
"""

from slurm_stack import naming
from slurm_stack.k8s.common import Manifest, metadata, selector_labels
from slurm_stack.k8s.workers import COMPONENT as WORKER_COMPONENT
from slurm_stack.k8s.workers import pool_labels
from slurm_stack.spec.models import ClusterSpec, WorkerPool

# The pods every job depends on: one of them at a time, the next only once it is back.
SERVICE_COMPONENTS = ("controller", "accounting", "database")
COMPONENT_LABEL = "app.kubernetes.io/component"


def _budget(
    spec: ClusterSpec, name: str, component: str, selector: Manifest, max_unavailable: int | str
) -> Manifest:
    return {
        "metadata": metadata(spec, name, component),
        "spec": {
            "maxUnavailable": max_unavailable,
            "selector": selector,
            # A pod that is not ready serves nothing; evicting it costs no availability, and
            # a drain must not hang on a pod that crash-loops.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def pool_disruption_budget(spec: ClusterSpec, pool: WorkerPool) -> Manifest:
    """At most `drain.maxUnavailable` nodes of the pool evicted at once."""
    return _budget(
        spec,
        naming.pool_name(spec.name, pool.name),
        WORKER_COMPONENT,
        {"matchLabels": selector_labels(spec, WORKER_COMPONENT, **pool_labels(pool))},
        pool.drain.max_unavailable,
    )


def services_disruption_budget(spec: ClusterSpec) -> Manifest:
    """slurmctld, slurmdbd and the embedded MariaDB: one at a time.

    The disruption controller counts the replicas of every controller whose pods the
    selector matches, so one budget spans the three StatefulSets/Deployments.
    """
    common = selector_labels(spec, "controller")
    common.pop(COMPONENT_LABEL)
    return _budget(
        spec,
        naming.services_budget_name(spec.name),
        "controller",
        {
            "matchLabels": common,
            "matchExpressions": [
                {"key": COMPONENT_LABEL, "operator": "In", "values": list(SERVICE_COMPONENTS)}
            ],
        },
        1,
    )


def login_disruption_budget(spec: ClusterSpec) -> Manifest:
    """Login pods one at a time, so a drain never takes every SSH endpoint together."""
    return _budget(
        spec,
        naming.login_name(spec.name),
        "login",
        {"matchLabels": selector_labels(spec, "login")},
        1,
    )
