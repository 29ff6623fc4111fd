"""The metrics objects: the exporter Deployment and Service, ServiceMonitors, PrometheusRule and
dashboard; and the scrape configuration the sandbox derives from them for its Prometheus."""

import json
import re
from typing import Any

import yaml

from slurm_stack.k8s.metrics import (
    alert_rules,
    dashboard,
    dashboard_config_map,
    exporter_deployment,
    metrics_service,
    prometheus_rule,
    service_monitors,
)
from slurm_stack.k8s.workers import healthcheck_config
from slurm_stack.offline import manifests
from slurm_stack.sandbox.plan import plan
from slurm_stack.sandbox.prometheus import (
    prometheus_address,
    rule_groups,
    scrape_configs,
    wants_prometheus,
)
from slurm_stack.spec import ClusterSpec, load_spec
from tests.conftest import ROOT
from tests.test_network_policy import run_dev

METRICS_STACK = ROOT / "tests" / "cluster" / "Pulumi.itest.yaml"


def _metrics_spec(**changes: Any) -> ClusterSpec:
    raw = yaml.safe_load(METRICS_STACK.read_text())["config"]["slurm-stack:cluster"]
    raw["metrics"].update(changes)
    return load_spec(raw)


def test_the_exporter_is_a_slurm_client_serving_on_its_named_port() -> None:
    spec = _metrics_spec()
    pod = exporter_deployment(spec, "itest-slurm-config-x")["spec"]["template"]["spec"]
    [exporter] = pod["containers"]
    assert exporter["command"][-1] == "exporter" and "/ops:" in exporter["image"]
    assert exporter["securityContext"]["runAsNonRoot"] is True
    assert exporter["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e["value"] for e in exporter["env"]}
    assert env["EXPORTER_POOLS"] == "cpu,gpu" and env["EXPORTER_PARTITIONS"] == "main,gpu"
    assert env["EXPORTER_ACCOUNTING"] == "1" and env["EXPORTER_PORT"] == "9341"
    assert exporter["ports"] == [{"name": "metrics", "containerPort": 9341}]
    assert pod["restartPolicy"] == "Always" and pod["automountServiceAccountToken"] is False
    service = metrics_service(spec)
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9341, "targetPort": "metrics"}]


def test_the_exporter_reads_only_the_nodes_health_check_results_of_the_jail() -> None:
    spec = _metrics_spec()
    pod = exporter_deployment(spec, "itest-slurm-config-x")["spec"]["template"]["spec"]
    [exporter] = pod["containers"]
    [jail_mount] = [m for m in exporter["volumeMounts"] if m["name"] == "jail"]
    assert jail_mount == {
        "name": "jail",
        "mountPath": "/var/lib/slurm-stack/healthchecks",
        "subPath": "var/lib/slurm-stack/healthchecks",
        "readOnly": True,
    }
    [jail] = [v for v in pod["volumes"] if v["name"] == "jail"]
    assert jail["persistentVolumeClaim"] == {"claimName": "itest-jail", "readOnly": True}
    env = {e["name"]: e["value"] for e in exporter["env"]}
    assert env["EXPORTER_HEALTHCHECK_RESULTS"] == "/var/lib/slurm-stack/healthchecks"
    # Each node writes its results where the exporter's subPath points, in the jail.
    for pool in spec.worker_pools:
        config = json.loads(healthcheck_config(spec, pool))
        assert config["results_dir"] == "/mnt/jail/var/lib/slurm-stack/healthchecks"

    raw = yaml.safe_load(METRICS_STACK.read_text())["config"]["slurm-stack:cluster"]
    raw["healthChecks"]["quick"] = {"enabled": False}
    raw["healthChecks"]["dcgm"] = {"quick": False}
    quiet = load_spec(raw)
    pod = exporter_deployment(quiet, "itest-slurm-config-x")["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"] if v["name"] == "jail"] == []
    titles = [p["title"] for p in dashboard(quiet)["panels"]]
    assert "Nodes failing each quick check" not in titles
    assert "Nodes failing each quick check" in [p["title"] for p in dashboard(spec)["panels"]]


def test_stale_health_checks_alert_only_where_checks_run_in_every_state() -> None:
    def alerts(**quick: Any) -> list[str]:
        raw = yaml.safe_load(METRICS_STACK.read_text())["config"]["slurm-stack:cluster"]
        raw["healthChecks"]["quick"].update(quick)
        return [rule["alert"] for rule in alert_rules(load_spec(raw))]

    assert "SlurmHealthChecksStale" in alerts()
    assert "SlurmHealthChecksStale" not in alerts(nodeStates=["IDLE"])
    [rule] = [r for r in alert_rules(_metrics_spec()) if r["alert"] == "SlurmHealthChecksStale"]
    # intervalSeconds 10 in the test stack: three intervals and a minute.
    assert rule["expr"].endswith("> 90") and rule["for"] == "5m"


def test_service_monitors_only_with_the_operator_and_slurmctlds_only_with_its_endpoint() -> None:
    spec = _metrics_spec()
    exporter, slurmctld = service_monitors(spec)
    assert exporter["apiVersion"] == "monitoring.coreos.com/v1"
    assert exporter["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "10s", "scrapeTimeout": "10s"}
    ]
    assert [e["path"] for e in slurmctld["spec"]["endpoints"]] == [
        "/metrics/nodes",
        "/metrics/jobs",
        "/metrics/partitions",
        "/metrics/scheduler",
    ]
    raw = yaml.safe_load(METRICS_STACK.read_text())["config"]["slurm-stack:cluster"]
    del raw["controller"]["metrics"]
    assert len(service_monitors(load_spec(raw))) == 1

    def kinds(run: Any) -> set[str]:
        return {m["kind"] for m in manifests(run.resources)}

    dev = run_dev(lambda c: None)
    assert {"Deployment", "ConfigMap"} <= kinds(dev)
    assert not {"ServiceMonitor", "PrometheusRule"} & kinds(dev)  # CRDs not assumed
    with_operator = run_dev(
        lambda c: c.update(metrics={"prometheusOperator": True}, labels={"release": "monitoring"})
    )
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds(with_operator)
    # The labels a Prometheus selects its ServiceMonitors and rules by come from `labels`.
    for manifest in manifests(with_operator.resources):
        if manifest["kind"] in ("ServiceMonitor", "PrometheusRule"):
            assert manifest["metadata"]["labels"]["release"] == "monitoring"
    off = run_dev(lambda c: c.update(metrics={"enabled": False, "dashboard": False}))
    assert not [m for m in manifests(off.resources) if "exporter" in m["metadata"]["name"]]


def test_every_alert_and_panel_reads_this_clusters_series_only() -> None:
    spec = _metrics_spec()
    own = 'namespace="slurm-itest",service="itest-metrics"'
    names = [rule["alert"] for rule in alert_rules(spec)]
    assert names == [
        "SlurmNodeDrainedByHealthCheck",
        "SlurmNodesDown",
        "SlurmElasticStartFailing",
        "SlurmControllerUnreachable",
        "SlurmJobsPendingOnIdleNodes",
        "SlurmdbdUnreachable",
        "SlurmHealthChecksStale",
        "SlurmNcclBandwidthLow",
    ]
    for rule in alert_rules(spec):
        for selector in re.findall(r"slurm_stack_\w+(\{[^}]*\})", rule["expr"]):
            assert own in selector, rule
    expressions = [t["expr"] for p in dashboard(spec)["panels"] for t in p["targets"]]
    for expr in expressions:
        assert own in expr, expr
    config_map = dashboard_config_map(spec)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    [text] = config_map["data"].values()
    assert json.loads(text)["panels"][0]["title"] == "Nodes by state"
    assert prometheus_rule(spec)["spec"]["groups"][0]["rules"] == alert_rules(spec)


def test_elastic_failures_alert_per_pool_and_the_pool_size_panel_counts_running_nodes() -> None:
    spec = _metrics_spec()
    own = 'namespace="slurm-itest",service="itest-metrics"'
    [rule] = [r for r in alert_rules(spec) if r["alert"] == "SlurmElasticStartFailing"]
    assert rule["expr"] == f"sum by (pool) (slurm_stack_nodes_elastic_failed{{{own}}}) > 0"
    assert rule["for"] == "2m" and rule["labels"] == {"severity": "warning"}
    assert "{{ $labels.pool }}" in rule["annotations"]["summary"]
    description = rule["annotations"]["description"]
    assert "sinfo -R" in description and "scontrol show node <node>" in description
    assert "kubectl -n slurm-itest describe pod <node>" in description
    [panel] = [p for p in dashboard(spec)["panels"] if p["title"] == "Elastic pool size"]
    assert [t["expr"] for t in panel["targets"]] == [
        f'sum by (pool) (slurm_stack_nodes_by_power{{{own},power=~"up|powering_down"}})'
    ]
    assert panel["fieldConfig"]["defaults"]["unit"] == "short"


def test_without_accounting_or_gpus_the_alerts_that_need_them_are_left_out() -> None:
    raw = yaml.safe_load(METRICS_STACK.read_text())["config"]["slurm-stack:cluster"]
    raw["accounting"] = {"enabled": False}
    raw["workerPools"] = [raw["workerPools"][0]]
    raw["partitions"] = [raw["partitions"][0]]
    raw["healthChecks"]["nccl"] = {"enabled": False}
    names = {rule["alert"] for rule in alert_rules(load_spec(raw))}
    assert not names & {"SlurmdbdUnreachable", "SlurmNcclBandwidthLow"}


def test_the_sandbox_scrapes_each_selected_pod_as_the_operator_labels_it() -> None:
    run = run_dev(lambda c: c.update(metrics={"prometheusOperator": True}))
    rendered = manifests(run.resources)
    assert wants_prometheus(rendered)
    sandbox_plan = plan(rendered, "/tmp/state")
    [config] = scrape_configs(rendered, sandbox_plan.hosts)
    assert config["job_name"] == "serviceMonitor/slurm-dev/dev-metrics/0"
    assert config["metrics_path"] == "/metrics"
    [target] = config["static_configs"]
    assert target["targets"] == [f"{sandbox_plan.hosts['dev-exporter-0']}:9341"]
    assert target["labels"] == {
        "job": "dev-metrics",
        "namespace": "slurm-dev",
        "service": "dev-metrics",
        "pod": "dev-exporter-0",
        "container": "exporter",
        "endpoint": "metrics",
    }
    assert [g["name"] for g in rule_groups(rendered)] == ["slurm-stack-dev"]
    # Not among the pods' addresses, nor the directory tests' LDAP server's (.5).
    address = prometheus_address(sandbox_plan.subnet)
    assert address.endswith(".6") and address not in sandbox_plan.hosts.values()


def test_the_sandbox_scrapes_every_pod_the_plan_runs_of_a_multi_replica_deployment() -> None:
    """The scrape targets come from the same pod names as the plan's pods: a Deployment of
    two replicas is two targets (it was once one, `-0`)."""
    run = run_dev(lambda c: c.update(metrics={"prometheusOperator": True}))
    rendered = manifests(run.resources)
    for manifest in rendered:
        if manifest["kind"] == "Deployment" and manifest["metadata"]["name"] == "dev-exporter":
            manifest["spec"]["replicas"] = 2
    sandbox_plan = plan(rendered, "/tmp/state")
    assert {"dev-exporter-0", "dev-exporter-1"} <= set(sandbox_plan.hosts)
    [config] = scrape_configs(rendered, sandbox_plan.hosts)
    pods = [target["labels"]["pod"] for target in config["static_configs"]]
    assert pods == ["dev-exporter-0", "dev-exporter-1"]
