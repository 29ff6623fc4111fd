"""RestApi: slurmrestd's Deployment and Service (docs/rest-api.md)."""

import pulumi
from pulumi_kubernetes.apps.v1 import Deployment
from pulumi_kubernetes.core.v1 import Service, ServiceAccount

from slurm_stack.components.kube import child_options, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.rest_api import (
    COMPONENT,
    rest_api_deployment,
    rest_api_service,
    rest_api_url,
)
from slurm_stack.spec.models import ClusterSpec


class RestApi(pulumi.ComponentResource):
    """Slurm's REST API, answering requests that carry a user's token."""

    url: pulumi.Output[str]
    """The API's address inside the Kubernetes cluster, `http://<service>:6820`."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        config_map: str,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:RestApi", name, None, opts)
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT),
            child_options(self),
        )
        deployment = register(
            Deployment,
            f"{name}-slurmrestd",
            rest_api_deployment(spec, config_map),
            child_options(self, depends_on=[account, *depends_on], timeout=TIMEOUTS["rest-api"]),
        )
        service = register(
            Service,
            f"{name}-service",
            rest_api_service(spec),
            child_options(self, depends_on=[deployment], timeout=TIMEOUTS["rest-api-service"]),
        )
        self.url = service.metadata.apply(lambda _: rest_api_url(spec))
        self.register_outputs({"url": self.url})
