"""The metrics exporter on outputs recorded from a sandbox cluster: a node drained by the NCCL
benchmark, one drained by an administrator, running and pending jobs, a GPU node in use."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from slurm_stack_healthchecks.exporter import (
    ExporterConfig,
    SlurmCollector,
    collect_samples,
    drain_owner,
    parse_nccl,
    parse_nodes,
    parse_sdiag,
    state_class,
)
from slurm_stack_healthchecks.result import CheckResult
from slurm_stack_healthchecks.results_file import write_results

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
