"""A host program: its own provider and namespace, with a Slurm cluster composed into them.

`pulumi config set gpu-platform:kubeconfig <path-or-contents>` picks the target cluster.
"""

import pulumi
from pulumi_kubernetes import Provider
from pulumi_kubernetes.core.v1 import Namespace

from slurm_stack import SlurmCluster

config = pulumi.Config()
provider = Provider("platform", kubeconfig=config.get("kubeconfig"))

# Deleting a namespace deletes everything in it, the cluster's retained claims (jail,
# controller state, database) included: protect it like them.
namespace = Namespace(
    "research",
    metadata={"name": "research", "labels": {"team": "research"}},
    opts=pulumi.ResourceOptions(provider=provider, protect=True, retain_on_delete=True),
)

# The same structure as `slurm-stack:cluster` in a stack file; validated before anything is
# created, with errors that name each bad key.
spec = {
    "name": "research",
    "namespace": "research",
    "workerPools": [
        {"name": "cpu", "replicas": 4},
        {"name": "a100", "replicas": 2, "gpus": 8, "gpuType": "a100"},
    ],
    "jail": {"storageClass": "nfs", "size": "500Gi"},
    "login": {
        "service": {
            "type": "LoadBalancer",
            # Who may reach SSH: replace the placeholder with your office's or VPN's ranges.
            # Left empty, the load balancer accepts connections from the whole internet.
            "loadBalancerSourceRanges": ["198.51.100.0/24"],
        }
    },
}

cluster = SlurmCluster(
    "research",
    spec,
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[namespace]),
)

pulumi.export("sshCommand", cluster.ssh_command)
pulumi.export("configHash", cluster.config_hash)
