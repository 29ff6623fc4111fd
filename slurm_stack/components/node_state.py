"""NodeState: the controller that drains Slurm nodes of cordoned or NotReady Kubernetes nodes."""

import pulumi
from pulumi_kubernetes.apps.v1 import Deployment
from pulumi_kubernetes.core.v1 import ServiceAccount
from pulumi_kubernetes.rbac.v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding

from slurm_stack.components.kube import child_options, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.node_state import (
    COMPONENT,
    node_reader_binding,
    node_reader_cluster_role,
    node_state_deployment,
    pod_reader_binding,
    pod_reader_role,
)
from slurm_stack.spec.models import ClusterSpec


class NodeState(pulumi.ComponentResource):
    """Its ServiceAccount, what that account may read, and the Deployment that uses it."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        config_map: str,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:NodeState", name, None, opts)
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT),
            child_options(self),
        )
        grants = [
            register(
                ClusterRole,
                f"{name}-node-reader",
                node_reader_cluster_role(spec),
                child_options(self),
            ),
            register(Role, f"{name}-pod-reader", pod_reader_role(spec), child_options(self)),
        ]
        grants += [
            register(
                ClusterRoleBinding,
                f"{name}-node-reader-binding",
                node_reader_binding(spec),
                child_options(self, depends_on=[account, grants[0]]),
            ),
            register(
                RoleBinding,
                f"{name}-pod-reader-binding",
                pod_reader_binding(spec),
                child_options(self, depends_on=[account, grants[1]]),
            ),
        ]
        register(
            Deployment,
            f"{name}-controller",
            node_state_deployment(spec, config_map),
            child_options(
                self, depends_on=[account, *grants, *depends_on], timeout=TIMEOUTS["node-state"]
            ),
        )
        self.register_outputs({})
