"""The metrics exporter and what reads it: its Deployment and Service, the Prometheus Operator's
ServiceMonitors and PrometheusRule, and a Grafana dashboard ConfigMap (docs/metrics.md)."""

import json

from slurm_stack import paths
from slurm_stack.k8s.common import Manifest, env, metadata, resources, selector_labels
from slurm_stack.k8s.jail import jail_volume
from slurm_stack.k8s.jobs import client_pod
from slurm_stack.spec.models import ClusterSpec
from slurm_stack.spec.versions import at_least

COMPONENT = "exporter"
EXPORTER_PORT = 9341
PORT_NAME = "metrics"
MONITORING_API = "monitoring.coreos.com/v1"
# The label Grafana's dashboard sidecar (grafana/helm-charts, sidecar.dashboards.label) looks
# for by default.
DASHBOARD_LABEL = "grafana_dashboard"
# slurmctld's own endpoints (doc/html/metrics.shtml, "HTTP Endpoints").
SLURMCTLD_METRIC_PATHS = (
    "/metrics/nodes",
    "/metrics/jobs",
    "/metrics/partitions",
    "/metrics/scheduler",
)


def exporter_name(spec: ClusterSpec) -> str:
    """The exporter's Deployment and ServiceAccount."""
    return f"{spec.name}-exporter"


def metrics_service_name(spec: ClusterSpec) -> str:
    """The Service a scraper reaches the exporter through."""
    return f"{spec.name}-metrics"


def slurmctld_metrics_enabled(spec: ClusterSpec) -> bool:
    """Whether slurmctld serves its own OpenMetrics endpoints."""
    return spec.controller.metrics.enabled and at_least(spec.slurm_version, "25.11")


def reads_healthcheck_results(spec: ClusterSpec) -> bool:
    """Whether the nodes' quick checks leave results for the exporter to serve."""
    return spec.health_checks.quick.enabled


def exporter_deployment(spec: ClusterSpec, config_map: str) -> Manifest:
    """One exporter pod: a Slurm client as the SlurmUser, serving /metrics."""
    settings = env(
        EXPORTER_ACCOUNTING="1" if spec.accounting.enabled else "0",
        EXPORTER_PARTITIONS=",".join(p.name for p in spec.effective_partitions),
        EXPORTER_POOLS=",".join(pool.name for pool in spec.worker_pools),
        EXPORTER_PORT=str(EXPORTER_PORT),
    )
    if reads_healthcheck_results(spec):
        settings += env(EXPORTER_HEALTHCHECK_RESULTS=paths.HEALTHCHECK_RESULTS_MOUNT)
    pod = client_pod(spec, config_map, "exporter", settings, restart_policy="Always")
    [exporter] = pod["containers"]
    if reads_healthcheck_results(spec):
        # Only the results directory of the jail, read-only: the exporter has no business
        # with the rest of it (users' files among them).
        pod["volumes"].append(jail_volume(spec, read_only=True))
        exporter["volumeMounts"].append(
            {
                "name": "jail",
                "mountPath": paths.HEALTHCHECK_RESULTS_MOUNT,
                "subPath": paths.HEALTHCHECK_RESULTS_IN_JAIL,
                "readOnly": True,
            }
        )
    exporter["ports"] = [{"name": PORT_NAME, "containerPort": EXPORTER_PORT}]
    exporter["resources"] = resources(spec.metrics.resources)
    # A scrape runs Slurm's commands; readiness only asks that the server listens.
    exporter["readinessProbe"] = {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": 10}
    # A server that stops listening is restarted.
    exporter["livenessProbe"] = {
        "tcpSocket": {"port": PORT_NAME},
        "periodSeconds": 30,
        "failureThreshold": 3,
    }
    name = exporter_name(spec)
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
            "template": {
                "metadata": {"labels": metadata(spec, name, COMPONENT)["labels"]},
                "spec": pod,
            },
        },
    }


def metrics_service(spec: ClusterSpec) -> Manifest:
    """The exporter's ClusterIP Service; its labels are what the ServiceMonitor selects."""
    return {
        "metadata": metadata(spec, metrics_service_name(spec), COMPONENT),
        "spec": {
            "selector": selector_labels(spec, COMPONENT),
            "ports": [{"name": PORT_NAME, "port": EXPORTER_PORT, "targetPort": PORT_NAME}],
        },
    }


def service_monitors(spec: ClusterSpec) -> list[Manifest]:
    """ServiceMonitors: the exporter's Service, and the controller's with slurmctld's own
    endpoints. The operator names each target's job after its Service and adds namespace,
    service, pod and endpoint labels."""
    interval = f"{spec.metrics.scrape_interval_seconds}s"
    timeout = f"{min(spec.metrics.scrape_interval_seconds, 30)}s"
    monitors = [
        {
            "apiVersion": MONITORING_API,
            "kind": "ServiceMonitor",
            "metadata": metadata(spec, metrics_service_name(spec), COMPONENT),
            "spec": {
                "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
                "namespaceSelector": {"matchNames": [spec.namespace]},
                "endpoints": [
                    {
                        "port": PORT_NAME,
                        "path": "/metrics",
                        "interval": interval,
                        "scrapeTimeout": timeout,
                    }
                ],
            },
        }
    ]
    if slurmctld_metrics_enabled(spec):
        monitors.append(
            {
                "apiVersion": MONITORING_API,
                "kind": "ServiceMonitor",
                "metadata": metadata(spec, f"{spec.name}-slurmctld-metrics", "controller"),
                "spec": {
                    "selector": {"matchLabels": selector_labels(spec, "controller")},
                    "namespaceSelector": {"matchNames": [spec.namespace]},
                    "endpoints": [
                        {
                            "port": "slurmctld",
                            "path": path,
                            "interval": interval,
                            "scrapeTimeout": timeout,
                        }
                        for path in SLURMCTLD_METRIC_PATHS
                    ],
                },
            }
        )
    return monitors


def _selector(spec: ClusterSpec, extra: str = "") -> str:
    """This cluster's exporter series: what the ServiceMonitor's targets are labelled."""
    own = f'namespace="{spec.namespace}",service="{metrics_service_name(spec)}"'
    return "{" + own + (f",{extra}" if extra else "") + "}"


def alert_rules(spec: ClusterSpec) -> list[Manifest]:
    """Alerting rules, each on this cluster's series only."""
    own = _selector(spec)
    by_check = _selector(spec, 'owner=~"healthcheck|nccl"')
    down = _selector(spec, 'state="down"')
    idle = _selector(spec, 'state="idle"')
    on_resources = _selector(spec, 'reason="Resources"')
    rules: list[Manifest] = [
        _alert(
            "SlurmNodeDrainedByHealthCheck",
            f"slurm_stack_node_drained{by_check} == 1",
            None,
            "warning",
            "Node {{ $labels.node }} ({{ $labels.pool }}) is drained by a health check",
            "Reason: {{ $labels.reason }}. Resume it once fixed: scontrol update "
            "NodeName={{ $labels.node }} State=RESUME (docs/operations.md).",
        ),
        _alert(
            "SlurmNodesDown",
            f"sum by (pool) (slurm_stack_nodes{down}) > 0",
            "10m",
            "warning",
            "{{ $value }} nodes of pool {{ $labels.pool }} are down or not responding",
            "slurmctld has not heard from these nodes; see sinfo -R.",
        ),
        _alert(
            "SlurmElasticStartFailing",
            f"sum by (pool) (slurm_stack_nodes_elastic_failed{own}) > 0",
            "2m",
            "warning",
            "{{ $value }} nodes of pool {{ $labels.pool }} failed to power up or down: see "
            "sinfo -R and kubectl describe pod",
            "Their Slurm reasons start with elastic:; sinfo -R lists those of down nodes, "
            "scontrol show node <node> any node's. For a node that did not start, "
            f"kubectl -n {spec.namespace} describe pod <node> shows its pod's events (while the "
            "pod exists): scheduling, image pull, probes.",
        ),
        _alert(
            "SlurmControllerUnreachable",
            f"slurm_stack_slurmctld_up{own} == 0 or absent(slurm_stack_slurmctld_up{own})",
            "5m",
            "critical",
            f"slurmctld of cluster {spec.name} does not answer",
            "The exporter's sinfo fails, or the exporter is not scraped.",
        ),
        _alert(
            "SlurmJobsPendingOnIdleNodes",
            f"sum(slurm_stack_jobs_pending{on_resources}) > 0 "
            f"and on() sum(slurm_stack_nodes{idle}) > 0",
            "30m",
            "warning",
            "Jobs wait for resources while nodes are idle",
            "Jobs have pended on Resources for 30 minutes while some nodes stay idle: their "
            "requests may fit no node (GPUs, memory, partition).",
        ),
    ]
    if spec.accounting.enabled:
        rules.append(
            _alert(
                "SlurmdbdUnreachable",
                f"slurm_stack_slurmdbd_up{own} == 0",
                "5m",
                "critical",
                f"slurmdbd of cluster {spec.name} does not answer",
                "sacctmgr ping fails: accounting records queue in slurmctld.",
            )
        )
    if reads_healthcheck_results(spec) and spec.health_checks.quick.node_states == ["ANY"]:
        # Checks that run in every node state have a fresh result on every node that runs
        # slurmd; with fewer states, a busy node rightly has an old one.
        stale_after = 3 * spec.health_checks.quick.interval_seconds + 60
        rules.append(
            _alert(
                "SlurmHealthChecksStale",
                f"time() - slurm_stack_healthcheck_last_run_timestamp_seconds{own} > {stale_after}",
                "5m",
                "warning",
                "The quick checks of {{ $labels.node }} have not run for "
                "{{ $value | humanizeDuration }}",
                f"Their interval is {spec.health_checks.quick.interval_seconds} s: slurmd on the "
                "node is down, or its HealthCheckProgram hangs or cannot write its results.",
            )
        )
    if spec.nccl_enabled:
        rules.append(
            _alert(
                "SlurmNcclBandwidthLow",
                # Both series carry the same labels: matched one to one, all kept.
                f"slurm_stack_nccl_busbw_gbps{own} < slurm_stack_nccl_threshold_gbps{own}",
                None,
                "warning",
                "NCCL bus bandwidth of {{ $labels.node }} is under its threshold",
                "The latest benchmark measured {{ $value }} GB/s; the node is drained.",
            )
        )
    return rules


def _alert(
    name: str, expr: str, duration: str | None, severity: str, summary: str, description: str
) -> Manifest:
    rule: Manifest = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def prometheus_rule(spec: ClusterSpec) -> Manifest:
    """The cluster's alerts as a PrometheusRule."""
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": metadata(spec, f"{spec.name}-alerts", COMPONENT),
        "spec": {"groups": [{"name": f"slurm-stack-{spec.name}", "rules": alert_rules(spec)}]},
    }


def dashboard_panels(spec: ClusterSpec) -> list[tuple[str, str, list[str]]]:
    """(title, unit, expressions) of each panel."""
    own = _selector(spec)
    last = _selector(spec, 'stat="last"')
    running = _selector(spec, 'power=~"up|powering_down"')
    panels = [
        ("Nodes by state", "short", [f"sum by (state) (slurm_stack_nodes{own})"]),
        # A pool's nodes that came up and are not yet powered down: its pods, less those
        # still starting.
        ("Elastic pool size", "short", [f"sum by (pool) (slurm_stack_nodes_by_power{running})"]),
        (
            "Drained nodes by who drained them",
            "short",
            [f"sum by (owner) (slurm_stack_nodes_drained{own})"],
        ),
        (
            "GPUs allocated and total by pool",
            "short",
            [
                f"sum by (pool) (slurm_stack_gpus_allocated{own})",
                f"sum by (pool) (slurm_stack_gpus{own})",
            ],
        ),
        ("Jobs by state", "short", [f"sum by (state) (slurm_stack_jobs{own})"]),
        ("Pending jobs by reason", "short", [f"sum by (reason) (slurm_stack_jobs_pending{own})"]),
        ("Scheduler cycle", "s", [f"slurm_stack_scheduler_cycle_seconds{last}"]),
        ("slurmctld up", "short", [f"slurm_stack_slurmctld_up{own}"]),
        ("Exporter scrape time", "s", [f"slurm_stack_exporter_scrape_seconds{own}"]),
    ]
    if reads_healthcheck_results(spec):
        panels += [
            (
                "Nodes failing each quick check",
                "short",
                [
                    f"count by (check) (slurm_stack_healthcheck_passed{own} == 0) or "
                    f"0 * count by (check) (slurm_stack_healthcheck_passed{own})"
                ],
            ),
            (
                "Slowest node's time per quick check",
                "s",
                [f"max by (check) (slurm_stack_healthcheck_duration_seconds{own})"],
            ),
        ]
    if spec.accounting.enabled:
        panels.append(("slurmdbd up", "short", [f"slurm_stack_slurmdbd_up{own}"]))
        if spec.nccl_enabled:
            panels.append(
                (
                    "NCCL bus bandwidth by node (GB/s)",
                    "short",
                    [
                        f"slurm_stack_nccl_busbw_gbps{own}",
                        f"slurm_stack_nccl_threshold_gbps{own}",
                    ],
                )
            )
    return panels


def dashboard(spec: ClusterSpec) -> Manifest:
    """The Grafana dashboard model: one time-series panel per entry of dashboard_panels."""
    panels = []
    for index, (title, unit, expressions) in enumerate(dashboard_panels(spec)):
        panels.append(
            {
                "id": index + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + i), "expr": expr} for i, expr in enumerate(expressions)
                ],
            }
        )
    return {
        "title": f"Slurm cluster {spec.name}",
        "uid": f"slurm-stack-{spec.namespace}-{spec.name}"[:40],
        "tags": ["slurm", "slurm-stack"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]
        },
        "panels": panels,
    }


def dashboard_config_map(spec: ClusterSpec) -> Manifest:
    """The dashboard as a ConfigMap Grafana's sidecar picks up by its label."""
    return {
        "metadata": metadata(
            spec, f"{spec.name}-dashboard", COMPONENT, extra_labels={DASHBOARD_LABEL: "1"}
        ),
        "data": {f"slurm-stack-{spec.name}.json": json.dumps(dashboard(spec), indent=2) + "\n"},
    }
