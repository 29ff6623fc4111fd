"""The metrics exporter on outputs recorded from a sandbox cluster: a node drained by the NCCL
benchmark, one drained by an administrator, running and pending jobs, a GPU node in use. And on
an elastic pool's nodes in every power state, as Slurm 24.11 and 26.05 print them."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from slurm_stack_healthchecks.exporter import (
    METRICS,
    POWER_STATES,
    ExporterConfig,
    SlurmCollector,
    collect_samples,
    drain_owner,
    parse_nccl,
    parse_nodes,
    parse_sdiag,
    power_state,
    state_class,
)
from slurm_stack_healthchecks.result import CheckResult
from slurm_stack_healthchecks.results_file import write_results

from slurm_stack.k8s.metrics import alert_rules, dashboard_panels
from slurm_stack.spec import load_spec
from tests.conftest import ROOT
from tests.healthchecks.hc_helpers import HEALTHCHECKS_DIR, FakeRunner, done, fixture

CONFIG = ExporterConfig(("cpu", "gpu"), ("main", "gpu"), accounting=True)


def _recorded(**overrides: object) -> FakeRunner:
    script = {
        ("sinfo",): done(fixture("exporter-sinfo.txt")),
        ("squeue",): done(fixture("exporter-squeue.txt")),
        ("sdiag",): done(fixture("exporter-sdiag.txt")),
        ("sacctmgr",): done("slurmdbd(primary) at itest-accounting.slurm-itest.svc is UP\n"),
        ("sacct",): done(fixture("exporter-sacct-nccl.txt")),
    }
    script.update({(name,): value for name, value in overrides.items()})  # type: ignore[misc]
    return FakeRunner(script)  # type: ignore[arg-type]


def _series(runner: FakeRunner, config: ExporterConfig = CONFIG) -> dict[tuple, float]:
    """name and sorted labels → value, as a scraper reads them from the text exposition."""
    registry = CollectorRegistry()
    registry.register(SlurmCollector(runner, config))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    return {
        (sample.name, *sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("idle", "idle"),
        ("allocated", "alloc"),
        ("mixed", "mixed"),
        ("drained", "drain"),
        ("draining", "drain"),
        ("idle*", "down"),
        ("down*", "down"),
        ("allocated+", "alloc"),
        ("idle~", "idle"),
        ("future", "other"),
    ],
)
def test_states_fall_into_classes(state: str, expected: str) -> None:
    assert state_class(state) == expected


# Long states (sinfo's StateLong, %T) as node_state_string prints them, identical in Slurm
# 24.11 and 26.05 (src/common/slurm_protocol_defs.c): one suffix at most, so a power flag and
# "not responding" never show together, and maint, reboot and fail states hide the power flags.
@pytest.mark.parametrize(
    ("state", "expected_class", "expected_power"),
    [
        ("idle", "idle", "up"),
        ("idle*", "down", "up"),
        ("allocated+", "alloc", "up"),
        ("idle~", "idle", "powered_down"),  # a CLOUD node with no pod: IDLE+CLOUD+POWERED_DOWN
        ("down~", "down", "powered_down"),
        ("drained~", "drain", "powered_down"),
        ("idle#", "idle", "powering_up"),
        ("mixed#", "mixed", "powering_up"),
        ("allocated#", "alloc", "powering_up"),
        ("down#", "down", "powering_up"),
        ("draining#", "drain", "powering_up"),
        ("idle%", "idle", "powering_down"),
        ("completing%", "alloc", "powering_down"),
        ("idle!", "idle", "powering_down"),  # a power down requested, not yet started
        ("allocated!", "alloc", "powering_down"),
        ("powered_down", "other", "powered_down"),  # the flag alone, no base state
        ("powering_up", "other", "powering_up"),
        ("maint", "other", "up"),
        ("reboot^", "other", "up"),
        ("fail", "down", "up"),
        ("IDLE~", "idle", "powered_down"),
    ],
)
def test_power_suffixes_keep_the_state_class(
    state: str, expected_class: str, expected_power: str
) -> None:
    assert (state_class(state), power_state(state)) == (expected_class, expected_power)


# An elastic gpu pool in every power state, as `sinfo` (NODES_ARGV) prints it: the same on both
# versions but for c-gpu-6, mixed, draining and powering up, which 24.11 prints as drained
# (its node_state_string counts only allocated and completing nodes as draining).
_ELASTIC_SINFO = """\
c-cpu-0|allocated|cpu|(null)|(null)|none|
c-cpu-1|idle|cpu|(null)|(null)|none|
c-gpu-0|mixed|gpu|gpu:h100:2|gpu:h100:1(IDX:0)|none|
c-gpu-1|allocated#|gpu|gpu:h100:2|gpu:h100:2(IDX:0-1)|none|
c-gpu-2|down~|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|{failed}|
c-gpu-2|down~|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|{failed}|
c-gpu-3|idle%|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|none|
c-gpu-4|idle~|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|none|
c-gpu-5|idle!|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|none|
c-gpu-6|{mixed_draining}#|gpu|gpu:h100:2|gpu:h100:1(IDX:0)|disk replaced, ticket 4711|
c-gpu-7|idle#|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|none|
c-gpu-8|down#|gpu|gpu:h100:2|gpu:h100:0(IDX:N/A)|elastic: resume of c-gpu-8 failed|
"""
_START_FAILED = "elastic: pod c-gpu-2 did not register within 300s (startTimeoutSeconds)"
ELASTIC_SINFO = {
    version: _ELASTIC_SINFO.format(failed=_START_FAILED, mixed_draining=mixed_draining)
    for version, mixed_draining in (("24.11", "drained"), ("26.05", "draining"))
}


@pytest.mark.parametrize("version", sorted(ELASTIC_SINFO))
def test_an_elastic_pools_nodes_by_power_state_and_failure(version: str) -> None:
    nodes = {n.name: n for n in parse_nodes(ELASTIC_SINFO[version], ["cpu", "gpu"])}
    assert len(nodes) == 11  # c-gpu-2 is listed twice, counted once
    power = {name: node.power for name, node in nodes.items()}
    assert power == {
        "c-cpu-0": "up",
        "c-cpu-1": "up",
        "c-gpu-0": "up",
        "c-gpu-1": "powering_up",
        "c-gpu-2": "powered_down",
        "c-gpu-3": "powering_down",
        "c-gpu-4": "powered_down",
        "c-gpu-5": "powering_down",
        "c-gpu-6": "powering_up",
        "c-gpu-7": "powering_up",
        "c-gpu-8": "powering_up",
    }
    assert [n for n in nodes if nodes[n].elastic_failed] == ["c-gpu-2", "c-gpu-8"]
    assert nodes["c-gpu-2"].reason == _START_FAILED
    # The existing classes read through the power suffix.
    assert (nodes["c-gpu-4"].state, nodes["c-gpu-2"].state) == ("idle", "down")
    assert (nodes["c-gpu-6"].state, nodes["c-gpu-6"].drain_owner) == ("drain", "other")
    assert nodes["c-gpu-8"].drain_owner is None  # down, not drained

    series = _series(_recorded(sinfo=done(ELASTIC_SINFO[version])))
    by_power = {
        (labels["pool"], labels["power"]): value
        for (name, *pairs), value in series.items()
        if name == "slurm_stack_nodes_by_power"
        for labels in [dict(pairs)]
    }
    assert by_power == {
        ("cpu", "up"): 2,
        ("cpu", "powering_up"): 0,
        ("cpu", "powering_down"): 0,
        ("cpu", "powered_down"): 0,
        ("gpu", "up"): 1,
        ("gpu", "powering_up"): 4,
        ("gpu", "powering_down"): 2,
        ("gpu", "powered_down"): 2,
    }
    assert series[("slurm_stack_nodes_elastic_failed", ("pool", "gpu"))] == 2
    assert series[("slurm_stack_nodes_elastic_failed", ("pool", "cpu"))] == 0
    # The existing series are unchanged in meaning: powered-down idle nodes are idle.
    assert series[("slurm_stack_nodes", ("pool", "gpu"), ("state", "idle"))] == 4
    assert series[("slurm_stack_nodes", ("pool", "gpu"), ("state", "down"))] == 2
    assert series[("slurm_stack_nodes", ("pool", "gpu"), ("state", "drain"))] == 1
    assert series[("slurm_stack_nodes_drained", ("owner", "other"), ("pool", "gpu"))] == 1
    assert series[("slurm_stack_gpus", ("pool", "gpu"))] == 18
    assert series[("slurm_stack_gpus_allocated", ("pool", "gpu"))] == 4


def test_a_pool_without_power_saving_is_all_up_and_every_power_state_has_a_series() -> None:
    series = _series(_recorded(), ExporterConfig(("cpu", "gpu", "spare"), ()))
    for pool, nodes in (("cpu", 2), ("gpu", 2), ("spare", 0)):
        for power in POWER_STATES:
            key = ("slurm_stack_nodes_by_power", ("pool", pool), ("power", power))
            assert series[key] == (nodes if power == "up" else 0)
        assert series[("slurm_stack_nodes_elastic_failed", ("pool", pool))] == 0
    failed = _series(_recorded(sinfo=done("", 1, "slurm_load_node: Unable to contact")))
    assert not [key for key in failed if key[0].startswith("slurm_stack_nodes_")]


def test_every_alert_and_panel_reads_series_the_exporter_serves() -> None:
    raw = yaml.safe_load((ROOT / "tests" / "cluster" / "Pulumi.itest.yaml").read_text())
    spec = load_spec(raw["config"]["slurm-stack:cluster"])
    expressions = [rule["expr"] for rule in alert_rules(spec)]
    expressions += [expr for _, _, exprs in dashboard_panels(spec) for expr in exprs]
    read = {name for expr in expressions for name in re.findall(r"\bslurm_stack_\w+", expr)}
    assert {"slurm_stack_nodes_by_power", "slurm_stack_nodes_elastic_failed"} <= read
    assert read <= set(METRICS), read - set(METRICS)


def test_drain_owners_follow_our_reason_prefixes() -> None:
    assert drain_owner("healthcheck: nccl busbw 120.0<350 GB/s") == "nccl"
    assert drain_owner("healthcheck: gpu_count 7/8") == "healthcheck"
    assert drain_owner("gres/gpu count reported lower than configured (1 < 2)") == "other"


def test_nodes_are_counted_once_whatever_their_partitions() -> None:
    nodes = {n.name: n for n in parse_nodes(fixture("exporter-sinfo.txt"), ["cpu", "gpu"])}
    assert list(nodes) == ["itest-cpu-0", "itest-cpu-1", "itest-gpu-0", "itest-gpu-1"]
    assert (nodes["itest-gpu-0"].state, nodes["itest-gpu-0"].drain_owner) == ("drain", "nccl")
    assert nodes["itest-cpu-1"].reason == "disk replaced, ticket 4711"
    assert (nodes["itest-gpu-1"].gpus_total, nodes["itest-gpu-1"].gpus_alloc) == (2, 2)


def test_sdiag_cycle_times_are_seconds() -> None:
    stats = parse_sdiag(fixture("exporter-sdiag.txt"))
    assert set(stats.cycles) >= {("main", "last"), ("main", "max"), ("backfill", "last")}
    assert all(0 <= seconds < 10 for seconds in stats.cycles.values())
    assert stats.jobs["submitted"] >= 1 and "server_threads" in stats.gauges


def test_the_latest_nccl_verdict_per_node() -> None:
    results = {r.node: r for r in parse_nccl(fixture("exporter-sacct-nccl.txt"))}
    assert (results["itest-gpu-0"].busbw, results["itest-gpu-0"].passed) == (120.0, False)
    assert (results["itest-gpu-1"].busbw, results["itest-gpu-1"].threshold) == (410.0, 350.0)
    later = "2026-11-27T03:00:00|itest-gpu-0|nccl-verdict result=pass gpu_type=h100 busbw=380.5 "
    results = {
        r.node: r
        for r in parse_nccl(fixture("exporter-sacct-nccl.txt") + later + "threshold=350\n")
    }
    assert results["itest-gpu-0"].busbw == 380.5
    errored = (
        '2026-11-27T04:00:00|itest-gpu-1|nccl-verdict result=error node=itest-gpu-1 error="x"\n'
    )
    assert parse_nccl(errored) == []  # no bandwidth, no series


def test_a_scrape_reports_nodes_jobs_gpus_drains_scheduler_and_nccl() -> None:
    series = _series(_recorded())
    assert series[("slurm_stack_slurmctld_up",)] == 1
    assert series[("slurm_stack_slurmdbd_up",)] == 1
    assert series[("slurm_stack_nodes", ("pool", "cpu"), ("state", "alloc"))] == 1
    assert series[("slurm_stack_nodes", ("pool", "cpu"), ("state", "drain"))] == 1
    assert series[("slurm_stack_nodes", ("pool", "gpu"), ("state", "idle"))] == 0
    assert series[("slurm_stack_nodes_drained", ("owner", "nccl"), ("pool", "gpu"))] == 1
    assert series[("slurm_stack_nodes_drained", ("owner", "other"), ("pool", "cpu"))] == 1
    drained = [key for key in series if key[0] == "slurm_stack_node_drained"]
    assert (
        "slurm_stack_node_drained",
        ("node", "itest-gpu-0"),
        ("owner", "nccl"),
        ("pool", "gpu"),
        ("reason", "healthcheck: nccl busbw 120.0<350 GB/s"),
    ) in drained and len(drained) == 2
    assert series[("slurm_stack_gpus", ("pool", "gpu"))] == 4
    assert series[("slurm_stack_gpus_allocated", ("pool", "gpu"))] == 2
    assert series[("slurm_stack_jobs", ("partition", "main"), ("state", "running"))] == 2
    assert series[("slurm_stack_jobs", ("partition", "gpu"), ("state", "pending"))] == 1
    assert series[("slurm_stack_jobs_pending", ("partition", "gpu"), ("reason", "Resources"))] == 1
    assert (
        "slurm_stack_scheduler_cycle_seconds",
        ("scheduler", "main"),
        ("stat", "last"),
    ) in series
    assert (
        series[("slurm_stack_nccl_busbw_gbps", ("gpu_type", "h100"), ("node", "itest-gpu-0"))]
        == 120
    )
    assert series[("slurm_stack_exporter_errors", ("query", "sinfo"))] == 0


def test_an_empty_partition_still_has_its_job_series() -> None:
    series = _series(_recorded(squeue=done("")))
    for partition in ("main", "gpu"):
        for state in ("pending", "running"):
            assert series[("slurm_stack_jobs", ("partition", partition), ("state", state))] == 0


def test_a_failed_query_leaves_its_series_out_and_counts_an_error() -> None:
    runner = _recorded(sinfo=done("", 1, "slurm_load_node: Unable to contact slurm controller"))
    series = _series(runner)
    assert series[("slurm_stack_slurmctld_up",)] == 0
    assert not [key for key in series if key[0] == "slurm_stack_nodes"]  # absent, not zero
    assert series[("slurm_stack_exporter_errors", ("query", "sinfo"))] == 1
    down = _series(_recorded(sacctmgr=done("", 1, "sacctmgr: error: ...")))
    assert down[("slurm_stack_slurmdbd_up",)] == 0


def test_without_accounting_slurmdbd_is_not_asked() -> None:
    runner = _recorded()
    samples = collect_samples(runner, ExporterConfig(("cpu",), ()))
    assert {argv[0] for argv in runner.argvs()} == {"sinfo", "squeue", "sdiag"}
    assert "slurm_stack_slurmdbd_up" not in {s.name for s in samples}


def test_each_nodes_latest_quick_checks_are_series(tmp_path: Path) -> None:
    checks = [CheckResult("munge", True, "", 0.01), CheckResult("gpu_count", False, "0/2", 0.3)]
    write_results(tmp_path, "itest-gpu-0", checks, finished=1764150000.0, seconds=0.5)
    write_results(tmp_path, "itest-cpu-0", checks[:1], finished=1764150001.0, seconds=0.1)
    write_results(tmp_path, "itest-gone-9", checks, finished=1.0, seconds=0.1)  # not in sinfo
    (tmp_path / "itest-cpu-1.json").symlink_to(tmp_path / "itest-gpu-0.json")  # planted
    config = ExporterConfig(("cpu", "gpu"), ("main",), healthcheck_results=tmp_path)
    series = _series(_recorded(), config)
    gpu = (("node", "itest-gpu-0"), ("pool", "gpu"))
    assert series[("slurm_stack_healthcheck_passed", ("check", "gpu_count"), *gpu)] == 0
    assert series[("slurm_stack_healthcheck_passed", ("check", "munge"), *gpu)] == 1
    assert series[("slurm_stack_healthcheck_duration_seconds", ("check", "gpu_count"), *gpu)] == 0.3
    assert series[("slurm_stack_healthcheck_last_run_timestamp_seconds", *gpu)] == 1764150000.0
    assert series[("slurm_stack_healthcheck_run_seconds", *gpu)] == 0.5
    cpu = (("node", "itest-cpu-0"), ("pool", "cpu"))
    assert series[("slurm_stack_healthcheck_passed", ("check", "munge"), *cpu)] == 1
    nodes = {dict(key[1:]).get("node") for key in series if key[0].startswith("slurm_stack_hea")}
    assert nodes == {"itest-gpu-0", "itest-cpu-0"}  # no file for gpu-1, none read for gone-9
    assert series[("slurm_stack_exporter_errors", ("query", "healthcheck_results"))] == 1


def test_without_a_results_directory_there_are_no_per_check_series() -> None:
    series = _series(_recorded())
    assert not [key for key in series if key[0].startswith("slurm_stack_healthcheck")]
    assert ("slurm_stack_exporter_errors", ("query", "healthcheck_results")) not in series


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_command_serves_metrics_over_http(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The wrapper as the exporter pod runs it, with stand-in Slurm commands first on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sinfo", fixture("exporter-sinfo.txt")), ("squeue", ""), ("sdiag", "")):
        (bin_dir / f"{name}.out").write_text(text)
        (bin_dir / name).write_text(f'#!/bin/sh\ncat "{bin_dir}/{name}.out"\n')
        (bin_dir / name).chmod(0o755)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurm_stack_healthchecks", "exporter"],
        cwd=HEALTHCHECKS_DIR,
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "EXPORTER_PORT": str(port),
            "EXPORTER_POOLS": "cpu,gpu",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
                    text = page.read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)
    assert 'slurm_stack_nodes{pool="gpu",state="drain"} 1.0' in text
    assert "python_gc" not in text  # the cluster's series only
    bad = subprocess.run(
        [sys.executable, "-m", "slurm_stack_healthchecks", "exporter"],
        cwd=HEALTHCHECKS_DIR,
        env={"PATH": "/usr/bin:/bin", "EXPORTER_PORT": "99999"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "EXPORTER_PORT must be a port number" in bad.stderr
