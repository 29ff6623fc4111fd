"""HealthChecks: the NCCL benchmark CronJob (quick checks run inside slurmd)."""

import pulumi
from pulumi_kubernetes.batch.v1 import CronJob
from pulumi_kubernetes.core.v1 import ServiceAccount

from slurm_stack.components.kube import child_options, register
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.jobs import nccl_cronjob
from slurm_stack.spec.models import ClusterSpec


class HealthChecks(pulumi.ComponentResource):
    """The periodic NCCL all_reduce_perf benchmark that drains slow GPU nodes."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        config_map: str,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:HealthChecks", name, None, opts)
        account = register(
            ServiceAccount,
            f"{name}-nccl-service-account",
            service_account(spec, "nccl-benchmark"),
            child_options(self),
        )
        cronjob = register(
            CronJob,
            f"{name}-nccl",
            nccl_cronjob(spec, config_map),
            child_options(self, depends_on=[account, *depends_on]),
        )
        self.register_outputs({"ncclCronJob": cronjob.metadata.name})
