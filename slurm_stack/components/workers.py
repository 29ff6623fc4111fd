"""WorkerPool: slurmd pods of one pool, each a dynamic Slurm node."""

import pulumi
from pulumi_kubernetes.apps.v1 import StatefulSet
from pulumi_kubernetes.core.v1 import Service, ServiceAccount
from pulumi_kubernetes.policy.v1 import PodDisruptionBudget

from slurm_stack.components.kube import child_options, register
from slurm_stack.components.timeouts import pool_delete_timeout
from slurm_stack.k8s.common import Manifest
from slurm_stack.k8s.disruption import pool_disruption_budget
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.workers import COMPONENT, pool_service, scaled_by_slurm
from slurm_stack.spec.models import ClusterSpec
from slurm_stack.spec.models import WorkerPool as PoolSpec


class WorkerPool(pulumi.ComponentResource):
    """A pool's StatefulSet, headless Service and PodDisruptionBudget.

    `pulumi up` does not wait for worker pods (the StatefulSet is awaited only until it
    exists): GPU nodes may take long to provision, and a node's readiness is Slurm's to judge
    (`sinfo`). Its deletion is awaited, for as long as the pool's pods may take to drain.
    Scaling is a replica count; nodes register themselves, slurm.conf does not change. An
    elastic pool's count is Slurm's after creation (docs/elastic.md).
    """

    statefulset: StatefulSet

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        pool: PoolSpec,
        manifest: Manifest,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        """``manifest`` is the pool's StatefulSet (`k8s.workers.pool_statefulset`), built
        once by the caller, which also names its template in the pool's update Job."""
        super().__init__("slurm-stack:index:WorkerPool", name, None, opts)
        register(Service, f"{name}-service", pool_service(spec, pool), child_options(self))
        register(
            PodDisruptionBudget,
            f"{name}-disruption-budget",
            pool_disruption_budget(spec, pool),
            child_options(self),
        )
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT, pool),
            child_options(self),
        )
        self.statefulset = register(
            StatefulSet,
            name,
            manifest,
            child_options(
                self,
                depends_on=[account, *depends_on],
                delete_timeout=pool_delete_timeout(pool),
                # An elastic pool's live size is Slurm's (the scaler's): an update leaves it.
                ignore_changes=[REPLICAS_PROPERTY] if scaled_by_slurm(manifest) else None,
            ),
        )
        self.register_outputs(
            {"statefulSet": self.statefulset.metadata.name, "replicas": pool.initial_replicas}
        )


# The StatefulSet's replica count as Pulumi names the property (ignoreChanges paths).
REPLICAS_PROPERTY = "spec.replicas"
