"""Metrics on real Slurm, read by a real Prometheus configured from the rendered ServiceMonitors
and PrometheusRule: every target up, job metrics that follow jobs, a drain by the NCCL
benchmark seen as a metric and as firing alerts, every dashboard query answered, and the alert
rules' own unit tests under promtool."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from slurm_stack.sandbox.prometheus import SandboxPrometheus, rule_groups
from slurm_stack.sandbox.prometheus import ensure_image as prometheus_image
from tests.cluster.conftest import Cluster, wait_for

RULE_TESTS = Path(__file__).parent / "metrics-rules.test.yaml"
FAKE_GPU_TOOLS = Path(__file__).parents[2] / "images" / "fake-gpu"
GPU_NODE = "itest-gpu-0"


@pytest.fixture(scope="module")
def metrics(cluster: Cluster) -> Cluster:
    """The itest stack: it renders the exporter, ServiceMonitors and a PrometheusRule."""
    return cluster


@pytest.fixture(scope="module")
def prometheus(metrics: Cluster) -> SandboxPrometheus:
    return metrics.sandbox.prometheus()


def _value(prometheus: SandboxPrometheus, expr: str) -> float | None:
    result = prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


def test_every_target_is_up(metrics: Cluster, prometheus: SandboxPrometheus) -> None:
    def targets() -> list[dict]:  # type: ignore[type-arg]
        return prometheus.get("/api/v1/targets")["data"]["activeTargets"]

    wait_for(
        "every target scraped and up",
        lambda: targets() and all(t["health"] == "up" for t in targets()),
        timeout=60,
    )
    jobs = sorted({(t["labels"]["service"], t["scrapeUrl"].rsplit(":", 1)[1]) for t in targets()})
    expected = [("itest-metrics", "9341/metrics")]
    if metrics.sandbox.spec.controller.metrics.enabled:
        expected += [
            ("itest-controller", f"6817/metrics/{path}")
            for path in ("jobs", "nodes", "partitions", "scheduler")
        ]
    assert jobs == sorted(expected), jobs


def test_job_metrics_follow_a_job(metrics: Cluster, prometheus: SandboxPrometheus) -> None:
    completed = 'slurm_stack_scheduler_jobs{event="completed"}'
    wait_for("a first scrape", lambda: _value(prometheus, completed) is not None, timeout=60)
    before = _value(prometheus, completed)
    job = metrics.ok(metrics.login("sbatch --parsable -p main --wrap 'sleep 15'")).strip()
    running = 'slurm_stack_jobs{partition="main",state="running"}'
    # Other tests' jobs may run and end meanwhile: each step waits for this job itself too.
    wait_for(
        f"job {job} running and seen running",
        lambda: metrics.job_state(job) == "RUNNING" and (_value(prometheus, running) or 0) >= 1,
        timeout=120,
    )

    def ended() -> str | None:
        state = metrics.ctl(f"sacct -j {job} -X -n -P -o State").stdout.strip()
        return state if state and state not in ("PENDING", "RUNNING") else None

    assert wait_for(f"job {job} ended in sacct", ended, timeout=90) == "COMPLETED"
    wait_for(
        f"job {job} counted as completed",
        lambda: (_value(prometheus, completed) or 0) > (before or 0),
        timeout=60,
    )


def test_a_drain_by_the_benchmark_is_a_metric_and_fires_its_alerts(
    metrics: Cluster, prometheus: SandboxPrometheus
) -> None:
    tool = metrics.jail / "usr" / "local" / "bin" / "all_reduce_perf"
    shutil.copy(FAKE_GPU_TOOLS / "all_reduce_perf", tool)
    tool.chmod(0o755)
    answers = metrics.jail / "etc" / "fake-gpu"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / f"busbw-{GPU_NODE}").write_text("120\n")  # the h100 threshold is 350
    wait_for(f"{GPU_NODE} idle", lambda: metrics.node_states().get(GPU_NODE) == "idle")
    metrics.sandbox.run_cron_job("itest-nccl-benchmark")
    try:
        drained = f'slurm_stack_node_drained{{node="{GPU_NODE}",owner="nccl"}}'
        wait_for("the drain as a metric", lambda: _value(prometheus, drained) == 1, timeout=120)
        [series] = prometheus.query(drained)
        assert series["metric"]["reason"] == "healthcheck: nccl busbw 120.0<350 GB/s"
        busbw = f'slurm_stack_nccl_busbw_gbps{{node="{GPU_NODE}",gpu_type="h100"}}'
        wait_for("the verdict's bandwidth", lambda: _value(prometheus, busbw) == 120, timeout=60)

        def firing() -> set[str]:
            alerts = prometheus.get("/api/v1/alerts")["data"]["alerts"]
            return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}

        wanted = {"SlurmNodeDrainedByHealthCheck", "SlurmNcclBandwidthLow"}
        wait_for(f"{wanted} firing", lambda: wanted <= firing(), timeout=60)
        jobs = metrics.ok(
            metrics.ctl("sacct -a -n -X -P --name=nccl-benchmark -o NodeList,State")
        ).split()
        assert f"{GPU_NODE}|FAILED" in jobs, jobs
    finally:
        metrics.ok(metrics.ctl(f"scontrol update NodeName={GPU_NODE} State=RESUME"))


def test_each_nodes_quick_checks_are_series_and_a_failed_check_shows(
    metrics: Cluster, prometheus: SandboxPrometheus
) -> None:
    """Every node's quick checks reach Prometheus with their result and duration, through
    the results each node leaves in the jail; a failing GPU count shows as that check's 0."""
    passed = "slurm_stack_healthcheck_passed"

    def checks_by_node() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for series in prometheus.query(passed):
            found.setdefault(series["metric"]["node"], set()).add(series["metric"]["check"])
        return found

    cpu_checks = {"jail", "munge", "disk"}
    expected = {
        "itest-cpu-0": cpu_checks,
        "itest-cpu-1": cpu_checks,
        GPU_NODE: cpu_checks | {"gpu_driver", "gpu_count", "gpu_ecc", "gpu_xid"},
        "itest-gpu-1": cpu_checks | {"gpu_driver", "gpu_count", "gpu_ecc", "gpu_xid"},
    }
    wait_for("every node's checks scraped", lambda: checks_by_node() == expected, timeout=90)
    durations = prometheus.query(f'slurm_stack_healthcheck_duration_seconds{{node="{GPU_NODE}"}}')
    assert len(durations) == len(expected[GPU_NODE])
    assert all(0 <= float(d["value"][1]) < 10 for d in durations), durations
    last_run = _value(
        prometheus,
        f'time() - slurm_stack_healthcheck_last_run_timestamp_seconds{{node="{GPU_NODE}"}}',
    )
    assert last_run is not None and last_run < 120, last_run

    # Every node's checks are fresh: the stale-checks alert's condition holds for none.
    [stale] = [
        rule["expr"]
        for group in rule_groups(metrics.sandbox._manifests)
        for rule in group["rules"]
        if rule["alert"] == "SlurmHealthChecksStale"
    ]
    assert prometheus.query(stale) == []

    # Users see the results in the jail and cannot change them.
    results = metrics.ok(metrics.login(f"cat /var/lib/slurm-stack/healthchecks/{GPU_NODE}.json"))
    assert json.loads(results)["node"] == GPU_NODE
    planted = metrics.login("touch /var/lib/slurm-stack/healthchecks/itest-cpu-0.json")
    assert planted.returncode != 0 and "Permission denied" in planted.stderr
    # The exporter sees that directory of the jail and nothing else of it.
    exporter = metrics.sandbox.pod_of("exporter")
    seen = metrics.sandbox.exec(
        exporter, ["sh", "-c", "ls /mnt/jail; ls /var/lib/slurm-stack/healthchecks"]
    )
    assert "No such file" in seen.stderr and f"{GPU_NODE}.json" in seen.stdout, seen

    answers = metrics.sandbox.state.root / "fake-gpu" / GPU_NODE
    (answers / "gpus.out").write_text("")
    (answers / "gpus.rc").write_text("6\n")
    (answers / "gpus.err").write_text("No devices were found\n")
    failing = f'{passed}{{node="{GPU_NODE}",check="gpu_count"}}'
    try:
        wait_for(
            "the failed GPU count scraped", lambda: _value(prometheus, failing) == 0, timeout=90
        )
        assert _value(prometheus, f'{passed}{{node="itest-gpu-1",check="gpu_count"}}') == 1
    finally:
        for file in list(answers.iterdir()):
            file.unlink()
    wait_for("the GPU count passing again", lambda: _value(prometheus, failing) == 1, timeout=90)
    wait_for(
        f"{GPU_NODE} resumed by its checks",
        lambda: metrics.node_states().get(GPU_NODE) == "idle",
        timeout=60,
    )


def test_every_dashboard_query_returns_data(
    metrics: Cluster, prometheus: SandboxPrometheus
) -> None:
    # A pending job, so that the pending-reason panel has something to show.
    job = metrics.ok(metrics.login("sbatch --parsable -p main --begin=now+1hour --wrap true"))
    try:
        manifests = metrics.sandbox._manifests
        [config_map] = [
            m
            for m in manifests
            if m["kind"] == "ConfigMap" and m["metadata"]["labels"].get("grafana_dashboard") == "1"
        ]
        [text] = config_map["data"].values()
        dashboard = json.loads(text)
        expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        assert len(expressions) >= 10
        pending = 'slurm_stack_jobs_pending{reason="BeginTime"}'
        wait_for(
            "the pending job scraped", lambda: (_value(prometheus, pending) or 0) >= 1, timeout=60
        )
        empty = [expr for expr in expressions if not prometheus.query(expr)]
        assert empty == [], f"dashboard queries without data: {empty}"
    finally:
        metrics.login(f"scancel {job.strip()}")


def test_the_alert_rules_pass_their_promtool_tests(metrics: Cluster, tmp_path: Path) -> None:
    groups = rule_groups(metrics.sandbox._manifests)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    shutil.copy(RULE_TESTS, tmp_path / "rules.test.yml")
    image = prometheus_image(metrics.sandbox.podman)
    run = subprocess.run(
        ["podman", "run", "--rm", "--network=none", "--volume", f"{tmp_path}:/work:ro",
         "--workdir", "/work", "--entrypoint", "promtool", image,
         "test", "rules", "rules.test.yml"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout + run.stderr
