"""Metrics: the exporter Deployment and Service, its dashboard, and (with the Prometheus
Operator's definitions installed) its ServiceMonitors and PrometheusRule."""

import pulumi
from pulumi_kubernetes.apps.v1 import Deployment
from pulumi_kubernetes.core.v1 import ConfigMap, Service, ServiceAccount

from slurm_stack.components.kube import child_options, custom_resource, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.metrics import (
    COMPONENT,
    dashboard_config_map,
    exporter_deployment,
    metrics_service,
    prometheus_rule,
    service_monitors,
)
from slurm_stack.spec.models import ClusterSpec


class Metrics(pulumi.ComponentResource):
    """The cluster's state as Prometheus metrics, and what scrapes, alerts on and shows them."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        config_map: str,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:Metrics", name, None, opts)
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, COMPONENT),
            child_options(self),
        )
        exporter = register(
            Deployment,
            f"{name}-exporter",
            exporter_deployment(spec, config_map),
            child_options(self, depends_on=[account, *depends_on], timeout=TIMEOUTS["exporter"]),
        )
        service = register(
            Service,
            f"{name}-service",
            metrics_service(spec),
            child_options(self, timeout=TIMEOUTS["exporter-service"]),
        )
        if spec.metrics.dashboard:
            register(
                ConfigMap, f"{name}-dashboard", dashboard_config_map(spec), child_options(self)
            )
        if spec.metrics.prometheus_operator:
            for manifest in [*service_monitors(spec), prometheus_rule(spec)]:
                custom_resource(
                    f"{name}-{manifest['metadata']['name']}-{manifest['kind'].lower()}",
                    manifest,
                    child_options(self, depends_on=[service]),
                )
        self.service_name = service.metadata.name
        self.register_outputs({"exporter": exporter.metadata.name, "service": self.service_name})
