"""What hosts outside Kubernetes (`externalNodes`) connect to: a Service per slurmctld.

Every node's slurm.conf names each slurmctld by its in-cluster address (SlurmctldHost); an
outside host maps those names to the Services' load balancer addresses (its /etc/hosts, which
the join script writes: docs/hybrid.md). One Service per controller pod, selected by the
StatefulSet's pod-name label: with a backup, a host must reach the primary and the backup
each, as SlurmctldHost lists them.
"""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import Manifest, metadata
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "controller"
# The label a StatefulSet's controller puts on each of its pods (kubernetes.io/docs/
# reference/labels-annotations-taints/#statefulset-kubernetes-io-pod-name).
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


def outside_service_name(cluster: str, ordinal: int) -> str:
    """`<cluster>-controller-<ordinal>-outside`."""
    return f"{naming.controller_name(cluster)}-{ordinal}-outside"


def controller_outside_services(spec: ClusterSpec) -> list[Manifest]:
    """A LoadBalancer Service per slurmctld pod, admitting only the outside ranges."""
    outside = spec.external_nodes
    if outside is None:
        return []
    services = []
    for ordinal in range(spec.controller.replicas):
        pod = f"{naming.controller_name(spec.name)}-{ordinal}"
        services.append(
            {
                "metadata": metadata(
                    spec,
                    outside_service_name(spec.name, ordinal),
                    COMPONENT,
                    annotations=outside.controller_service.annotations,
                ),
                "spec": {
                    "type": outside.controller_service.type,
                    "selector": {POD_NAME_LABEL: pod},
                    "ports": [
                        {
                            "name": "slurmctld",
                            "port": paths.SLURMCTLD_PORT,
                            "targetPort": paths.SLURMCTLD_PORT,
                            "protocol": "TCP",
                        }
                    ],
                    # Local keeps the host's own address as the source: slurmctld records it
                    # as the node's address and connects back to it (a node's address is
                    # learned as it registers), and the NetworkPolicy's ipBlock matches it.
                    "externalTrafficPolicy": "Local",
                    "loadBalancerSourceRanges": list(outside.address_ranges),
                },
            }
        )
    return services
