"""LoginPool: sshd StatefulSet chrooted into the jail, its config, and the SSH Service."""

import pulumi
from pulumi_kubernetes.apps.v1 import StatefulSet
from pulumi_kubernetes.core.v1 import ConfigMap, Service, ServiceAccount
from pulumi_kubernetes.policy.v1 import PodDisruptionBudget

from slurm_stack import naming
from slurm_stack.components.kube import by_content, child_options, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.common import config_map
from slurm_stack.k8s.disruption import login_disruption_budget
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.login import COMPONENT, login_service, login_statefulset
from slurm_stack.render import content_hash, login_config_files
from slurm_stack.spec.models import ClusterSpec


class LoginPool(pulumi.ComponentResource):
    """Login pods; `pulumi up` waits until they are Ready and the Service has an address."""

    endpoint: pulumi.Output[str]
    """Where users connect: `host:port` (LoadBalancer), `<node>:<nodePort>`, or the Service."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:LoginPool", name, None, opts)
        files = login_config_files(spec)
        digest = content_hash(files)
        config_name = f"{naming.login_name(spec.name)}-config-{digest}"
        config = register(
            ConfigMap,
            by_content(f"{name}-config", digest),
            config_map(spec, config_name, "login", files),
            child_options(self, previously=f"{name}-config"),
        )
        # A LoadBalancer gets its address from the cloud; allow for slow providers.
        service = register(
            Service,
            f"{name}-service",
            login_service(spec),
            child_options(self, timeout=TIMEOUTS["login-service"]),
        )
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT),
            child_options(self),
        )
        self.statefulset = register(
            StatefulSet,
            name,
            login_statefulset(spec, config_name),
            child_options(
                self, depends_on=[config, account, *depends_on], timeout=TIMEOUTS["login"]
            ),
        )
        register(
            PodDisruptionBudget,
            f"{name}-disruption-budget",
            login_disruption_budget(spec),
            child_options(self),
        )
        self.endpoint = _endpoint(spec, service)
        self.register_outputs({"endpoint": self.endpoint})


def _endpoint(spec: ClusterSpec, service: Service) -> pulumi.Output[str]:
    port = spec.login.service.port
    if spec.login.service.type == "LoadBalancer":

        def from_status(status: object) -> str:
            ingress = getattr(getattr(status, "load_balancer", None), "ingress", None) or []
            address = ingress[0].ip or ingress[0].hostname if ingress else None
            return f"{address}:{port}" if address else "pending"

        return service.status.apply(from_status)
    if spec.login.service.type == "NodePort":

        def from_spec(service_spec: object) -> str:
            ports = getattr(service_spec, "ports", None) or []
            node_port = ports[0].node_port if ports else None
            # externalTrafficPolicy Local: only nodes running a login pod answer.
            node = "<address-of-a-node-running-a-login-pod>"
            return f"{node}:{node_port or spec.login.service.node_port}"

        return service.spec.apply(from_spec)
    return pulumi.Output.from_input(
        f"{naming.service_host(naming.login_name(spec.name), spec.namespace)}:{port}"
    )
