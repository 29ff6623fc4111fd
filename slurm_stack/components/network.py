"""NetworkPolicies: the flows Slurm uses, and nothing else, to the cluster's pods."""

from collections.abc import Sequence

import pulumi
from pulumi_kubernetes.networking.v1 import NetworkPolicy

from slurm_stack.components.kube import child_options, register
from slurm_stack.k8s.network import deny_ingress_policy, egress_policy, ingress_policies
from slurm_stack.spec.models import ClusterSpec


class NetworkPolicies(pulumi.ComponentResource):
    """Default-deny ingress for the cluster's pods, an ingress policy per component, and the
    egress limits of login and worker pods (SlurmCluster creates none when `networkPolicy`
    is disabled)."""

    policies: list[NetworkPolicy]

    def __init__(self, name: str, spec: ClusterSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("slurm-stack:index:NetworkPolicies", name, None, opts)

        def add(
            manifest: dict, depends_on: Sequence[pulumi.Resource] | None = None
        ) -> NetworkPolicy:
            suffix = manifest["metadata"]["name"].removeprefix(f"{spec.name}-")
            options = child_options(self, depends_on=depends_on)
            return register(NetworkPolicy, f"{name}-{suffix}", manifest, options)

        allows = [add(manifest) for manifest in [*ingress_policies(spec), egress_policy(spec)]]
        # The deny comes after the allows (and goes before them): running pods of a cluster
        # that turns policies on never lose a flow in between.
        self.policies = [add(deny_ingress_policy(spec), depends_on=allows), *allows]
        self.register_outputs({"policies": [p.metadata.name for p in self.policies]})
