"""Users: the declared accounts, their keys, and the Job that applies them to the jail."""

import pulumi
from pulumi_kubernetes.batch.v1 import Job
from pulumi_kubernetes.core.v1 import ConfigMap, ServiceAccount

from slurm_stack.components.kube import by_content, child_options, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.users import COMPONENT, users_config_map, users_job
from slurm_stack.render import content_hash, users_config_files
from slurm_stack.spec.models import ClusterSpec


class Users(pulumi.ComponentResource):
    """The users ConfigMap (login pods read keys from it) and the users Job, which runs once
    per version of the users after the controller, accounting and the jail are ready."""

    config_map: ConfigMap
    """Login pods mount this; create it before them."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        slurm_config_map: str,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:Users", name, None, opts)
        files = users_config_files(spec)
        self.config_map = register(
            ConfigMap, f"{name}-config", users_config_map(spec, files), child_options(self)
        )
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT),
            child_options(self),
        )
        digest = content_hash(files)
        job = register(
            Job,
            by_content(f"{name}-sync", digest),
            users_job(spec, slurm_config_map, digest),
            child_options(
                self,
                depends_on=[self.config_map, account, *depends_on],
                timeout=TIMEOUTS["users"],
                previously=f"{name}-sync",
            ),
        )
        self.register_outputs({"usersJob": job.metadata.name})
