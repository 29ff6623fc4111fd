"""Jail: the shared root filesystem volume and the Job that populates it once."""

import pulumi
from pulumi_kubernetes.batch.v1 import Job
from pulumi_kubernetes.core.v1 import PersistentVolumeClaim, ServiceAccount

from slurm_stack.components.kube import by_content, child_options, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.jail import COMPONENT, jail_pvc, populate_job
from slurm_stack.spec.models import ClusterSpec


class Jail(pulumi.ComponentResource):
    """The RWX jail claim (protected) and populate-jail; `up` waits for population."""

    populated: Job
    """Login and worker pods depend on this Job having completed."""

    def __init__(self, name: str, spec: ClusterSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("slurm-stack:index:Jail", name, None, opts)
        depends_on: list[pulumi.Resource] = [
            register(
                ServiceAccount,
                f"{name}-populate-service-account",
                service_account(spec, COMPONENT),
                child_options(self),
            )
        ]
        claim_manifest = jail_pvc(spec)
        if claim_manifest is not None:
            depends_on.append(
                register(
                    PersistentVolumeClaim,
                    f"{name}-volume",
                    claim_manifest,
                    child_options(self, keep=True),
                )
            )
        # Copying a whole root filesystem onto network storage can take a while.
        job = populate_job(spec)
        self.populated = register(
            Job,
            by_content(f"{name}-populate", job["metadata"]["name"].rsplit("-", 1)[1]),
            job,
            child_options(
                self,
                depends_on=depends_on,
                timeout=TIMEOUTS["populate-jail"],
                previously=f"{name}-populate",
            ),
        )
        self.register_outputs({"populateJob": self.populated.metadata.name})
