"""The elastic scaler's access to the Kubernetes API: a Role for the controller's account, and
the token mounted in the slurmctld container alone.

slurmctld runs the scaler (ResumeProgram, SuspendProgram, ResumeFailProgram) as its
SlurmUser in the controller pod (docs/elastic.md). It may read and set the size of the
elastic pools' StatefulSets through their `scale` subresource (the StatefulSet itself, its
template and its other fields stay out of reach), and delete the pods of those pools'
nodes, which it does for a node that Slurm powers up while its old pod still runs ("parked"
below a busy node: the StatefulSet starts it afresh). Nothing else: no other pool, no Secret,
no pod of another component, nothing outside the namespace. The token's volume is in
elastic_access.py.
"""

from slurm_stack import naming
from slurm_stack.k8s.common import Manifest, metadata
from slurm_stack.k8s.controller import COMPONENT as CONTROLLER
from slurm_stack.k8s.identity import service_account_name
from slurm_stack.spec.models import ClusterSpec

RBAC_API = "rbac.authorization.k8s.io"


def scaler_name(spec: ClusterSpec) -> str:
    """The Role and RoleBinding."""
    return f"{spec.name}-elastic-scaler"


def scaler_role(spec: ClusterSpec) -> Manifest:
    """get and patch of the elastic pools' `statefulsets/scale`, delete of their pods, each by
    name."""
    pools = [naming.pool_name(spec.name, pool.name) for pool in spec.elastic_pools]
    pods = [
        f"{naming.pool_name(spec.name, pool.name)}-{ordinal}"
        for pool in spec.elastic_pools
        for ordinal in range(pool.most_replicas)
    ]
    return {
        "metadata": metadata(spec, scaler_name(spec), CONTROLLER),
        "rules": [
            {
                "apiGroups": ["apps"],
                "resources": ["statefulsets/scale"],
                "resourceNames": pools,
                "verbs": ["get", "patch"],
            },
            {"apiGroups": [""], "resources": ["pods"], "resourceNames": pods, "verbs": ["delete"]},
        ],
    }


def scaler_binding(spec: ClusterSpec) -> Manifest:
    """The Role, to the controller's ServiceAccount."""
    return {
        "metadata": metadata(spec, scaler_name(spec), CONTROLLER),
        "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": scaler_name(spec)},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": service_account_name(spec, CONTROLLER),
                "namespace": spec.namespace,
            }
        ],
    }
