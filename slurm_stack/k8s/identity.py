"""ServiceAccounts: one per component, bound to no Role, and no pod mounts a token.

No slurm-stack pod talks to the Kubernetes API but the node-state controller's
(`nodeState.enabled`, k8s/node_state.py) and, with elastic pools, the controller pod's
slurmctld container (k8s/elastic.py, elastic_access.py); their accounts alone are bound to
Roles and they alone mount a token. Every pod still runs as some ServiceAccount (`default`
when none is named), so each component gets its own, with no RoleBinding or
ClusterRoleBinding for any other: a token of one grants nothing, and none is mounted
(`automountServiceAccountToken: false` on the account and on every other pod).

Each worker pool has an account of its own, like its StatefulSet, Service and budget: it
goes away with the pool, and an admin can grant one pool something outside the cluster (a
cloud's workload identity maps a ServiceAccount to a cloud role) without granting all pools.
"""

from slurm_stack import naming
from slurm_stack.k8s.common import POOL_LABEL, Manifest, metadata
from slurm_stack.spec.models import ClusterSpec, WorkerPool

# Account names by pod component (pools are named after the pool).
_NAMES = {
    "controller": naming.controller_name,
    "accounting": naming.accounting_name,
    "database": naming.database_name,
    "login": naming.login_name,
    "jail": lambda cluster: f"{cluster}-populate-jail",
    "users": lambda cluster: f"{cluster}-users",
    "reconfigure": lambda cluster: f"{cluster}-reconfigure",
    "pool-update": lambda cluster: f"{cluster}-pool-update",
    "nccl-benchmark": lambda cluster: f"{cluster}-nccl-benchmark",
    "exporter": lambda cluster: f"{cluster}-exporter",
    "rest": naming.rest_api_name,
    "node-state": naming.node_state_name,
}


def service_account_name(spec: ClusterSpec, component: str, pool: WorkerPool | None = None) -> str:
    """The ServiceAccount of a component's pods; each worker pool has its own."""
    if pool is not None:
        return naming.pool_name(spec.name, pool.name)
    return _NAMES[component](spec.name)


def service_account(spec: ClusterSpec, component: str, pool: WorkerPool | None = None) -> Manifest:
    """A component's ServiceAccount: no token mounted by default, no binding."""
    extra = {POOL_LABEL: pool.name} if pool is not None else None
    name = service_account_name(spec, component, pool)
    return {
        "metadata": metadata(spec, name, component, extra_labels=extra),
        "automountServiceAccountToken": False,
    }


def pod_identity(spec: ClusterSpec, component: str, pool: WorkerPool | None = None) -> Manifest:
    """PodSpec fields: the component's ServiceAccount, and no API token in the pod."""
    return {
        "serviceAccountName": service_account_name(spec, component, pool),
        "automountServiceAccountToken": False,
    }
