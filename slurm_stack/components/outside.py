"""OutsideAccess: what hosts outside Kubernetes need from the stack (docs/hybrid.md)."""

import pulumi
from pulumi_kubernetes.core.v1 import Service

from slurm_stack.components.kube import child_options, register
from slurm_stack.k8s.outside import controller_outside_services
from slurm_stack.naming import controller_pod_hosts
from slurm_stack.spec.models import ClusterSpec


def _load_balancer_address(status: object) -> str:
    """The address a LoadBalancer Service's status gives (an IP, or a host name on clouds
    that hand out names); empty while the cloud has given none."""
    ingress = getattr(getattr(status, "load_balancer", None), "ingress", None) or []
    return str(ingress[0].ip or ingress[0].hostname or "") if ingress else ""


class OutsideAccess(pulumi.ComponentResource):
    """A LoadBalancer Service per slurmctld for the outside hosts, and what a host needs to
    join: each controller's name in slurm.conf and the address that reaches it."""

    controllers: pulumi.Output[list[dict[str, str]]]
    """Per controller, primary first: `slurmctldHost` (its name), `inClusterAddress` (the
    address slurm.conf gives, which a host maps to `address`), `address` (the load
    balancer's)."""

    def __init__(
        self, name: str, spec: ClusterSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("slurm-stack:index:OutsideAccess", name, None, opts)
        services = [
            register(Service, f"{name}-{i}", manifest, child_options(self))
            for i, manifest in enumerate(controller_outside_services(spec))
        ]
        hosts = controller_pod_hosts(spec.name, spec.namespace, spec.controller.replicas)
        addresses = [service.status.apply(_load_balancer_address) for service in services]
        self.controllers = pulumi.Output.all(*addresses).apply(
            lambda found: [
                {"slurmctldHost": host, "inClusterAddress": in_cluster, "address": address}
                for (host, in_cluster), address in zip(hosts, found, strict=True)
            ]
        )
        self.register_outputs({"controllers": self.controllers})
