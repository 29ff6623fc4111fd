"""Controller: slurmctld StatefulSet, its Service and its protected state volume."""

import pulumi
from pulumi_kubernetes.apps.v1 import StatefulSet
from pulumi_kubernetes.core.v1 import PersistentVolumeClaim, Service, ServiceAccount
from pulumi_kubernetes.rbac.v1 import Role, RoleBinding

from slurm_stack.components.kube import child_options, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.controller import (
    COMPONENT,
    controller_pods_service,
    controller_service,
    controller_statefulset,
    has_backup,
    state_pvc,
)
from slurm_stack.k8s.elastic import scaler_binding, scaler_role
from slurm_stack.k8s.identity import service_account
from slurm_stack.spec.models import ClusterSpec


class Controller(pulumi.ComponentResource):
    """slurmctld; `pulumi up` waits until it is Ready (its state survives restarts)."""

    statefulset: StatefulSet
    service: Service

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        config_hash: str,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:Controller", name, None, opts)
        state = register(
            PersistentVolumeClaim, f"{name}-state", state_pvc(spec), child_options(self, keep=True)
        )
        self.service = register(
            Service,
            f"{name}-service",
            controller_service(spec),
            child_options(self, timeout=TIMEOUTS["slurmctld-service"]),
        )
        pods_service = (
            [
                register(
                    Service,
                    f"{name}-pods-service",
                    controller_pods_service(spec),
                    child_options(self),
                )
            ]
            if has_backup(spec)
            else []
        )
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT),
            child_options(self),
        )
        grants = []
        if spec.elastic_pools:
            role = register(Role, f"{name}-elastic-scaler", scaler_role(spec), child_options(self))
            grants = [
                role,
                register(
                    RoleBinding,
                    f"{name}-elastic-scaler-binding",
                    scaler_binding(spec),
                    child_options(self, depends_on=[account, role]),
                ),
            ]
        self.statefulset = register(
            StatefulSet,
            name,
            controller_statefulset(spec, config_hash),
            child_options(
                self,
                depends_on=[state, account, *grants, *pods_service, *depends_on],
                timeout=TIMEOUTS["slurmctld"],
            ),
        )
        self.register_outputs(
            {"statefulSet": self.statefulset.metadata.name, "service": self.service.metadata.name}
        )
