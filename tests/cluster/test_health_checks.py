"""Quick health checks and the NCCL benchmark, draining and resuming real nodes."""

import shutil
from collections.abc import Iterator

import pytest

from slurm_stack.sandbox.images import ROOT
from tests.cluster.conftest import Cluster, wait_for

INTERVAL = 10  # healthChecks.quick.intervalSeconds of the test stack


@pytest.fixture
def fake_gpu(cluster: Cluster) -> Iterator[dict[str, object]]:
    """The answer files of each GPU pod's fake nvidia-smi; cleared afterwards."""
    dirs = {
        node: cluster.sandbox.state.root / "fake-gpu" / node
        for node in ("itest-gpu-0", "itest-gpu-1")
    }
    yield dirs
    for directory in dirs.values():
        for file in directory.iterdir():
            file.unlink()


def test_missing_gpu_drains_with_our_reason_and_recovery_resumes(
    cluster: Cluster, fake_gpu: dict[str, object]
) -> None:
    directory = fake_gpu["itest-gpu-0"]
    (directory / "gpus.out").write_text("")  # type: ignore[operator]
    (directory / "gpus.rc").write_text("6\n")  # type: ignore[operator]
    (directory / "gpus.err").write_text("No devices were found\n")  # type: ignore[operator]
    reason = wait_for(
        "itest-gpu-0 drained by the health check",
        lambda: (r := cluster.node_reason("itest-gpu-0")).startswith("healthcheck:") and r,
        timeout=3 * INTERVAL + 10,
    )
    assert "gpu_count 0/2" in reason or "gpu_driver" in reason, reason
    assert "DRAIN" in cluster.node_field("itest-gpu-0", "State")
    assert cluster.node_states()["itest-gpu-1"] == "idle"  # the healthy node is untouched

    for file in list(directory.iterdir()):  # type: ignore[attr-defined]
        file.unlink()
    wait_for(
        "itest-gpu-0 resumed",
        lambda: cluster.node_states().get("itest-gpu-0") == "idle",
        timeout=3 * INTERVAL + 10,
    )


def test_an_admins_drain_is_never_undone(cluster: Cluster) -> None:
    cluster.ok(cluster.ctl("scontrol update NodeName=itest-gpu-1 State=DRAIN Reason='admin: bios'"))
    try:
        # Two full intervals in which the passing checks could have resumed it.
        import time

        time.sleep(2 * INTERVAL + 2)
        assert cluster.node_reason("itest-gpu-1") == "admin: bios"
        assert "DRAIN" in cluster.node_field("itest-gpu-1", "State")
    finally:
        cluster.ok(cluster.ctl("scontrol update NodeName=itest-gpu-1 State=RESUME"))


def test_nccl_benchmark_drains_the_slow_node_and_leaves_the_fast_one(cluster: Cluster) -> None:
    wait_for("GPU nodes idle", lambda: cluster.all_idle(len(cluster.node_states())), timeout=60)
    # What a GPU jail image provides: all_reduce_perf on the PATH (here the fake one, whose
    # bus bandwidth per node comes from files in the jail).
    tool = cluster.jail / "usr" / "local" / "bin" / "all_reduce_perf"
    shutil.copy(ROOT / "images" / "fake-gpu" / "all_reduce_perf", tool)
    tool.chmod(0o755)
    answers = cluster.jail / "etc" / "fake-gpu"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "busbw-itest-gpu-0").write_text("120\n")  # threshold for h100 is 350
    (answers / "busbw-itest-gpu-1").write_text("410\n")

    cluster.sandbox.run_cron_job("itest-nccl-benchmark")

    try:
        reason = wait_for(
            "itest-gpu-0 drained by the NCCL verdict",
            lambda: (r := cluster.node_reason("itest-gpu-0")).startswith("healthcheck: nccl") and r,
            timeout=90,
        )
    except pytest.fail.Exception as failure:
        state = cluster.ctl(
            "sacct -a -n -X -P --name=nccl-benchmark -o JobID,NodeList,State,ExitCode,Comment; "
            "squeue -a; sinfo -N -h -o '%N %t %E'"
        )
        pytest.fail(f"{failure}\nbenchmark jobs, queue and nodes:\n{state.stdout}{state.stderr}")
    assert "120" in reason
    jobs = cluster.ok(cluster.ctl("sacct -n -X -P --name=nccl-benchmark -o NodeList,State"))
    wait_for(
        "both benchmark jobs finished",
        lambda: (
            len(
                [
                    line
                    for line in cluster.ctl(
                        "sacct -n -X -P --name=nccl-benchmark -o NodeList,State"
                    ).stdout.splitlines()
                    if "COMPLETED" in line or "FAILED" in line
                ]
            )
            >= 2
        ),
        timeout=90,
    )
    # The verdict line is the job's comment in accounting (AccountingStoreFlags=job_comment).
    comments = cluster.ok(
        cluster.ctl("sacct -a -n -X -P --name=nccl-benchmark -o NodeList,Comment")
    ).splitlines()
    assert any(
        line.startswith("itest-gpu-0|nccl-verdict result=fail ") and "busbw=120.00" in line
        for line in comments
    ), comments
    # sacct has a job's end before slurmctld has the node back: the node completes (epilog,
    # step cleanup) for a moment after, so its state is awaited, not sampled once.
    wait_for(
        f"itest-gpu-1 idle after its benchmark (jobs: {jobs!r})",
        lambda: cluster.node_states().get("itest-gpu-1") == "idle",
        timeout=30,
    )
    cluster.ok(cluster.ctl("scontrol update NodeName=itest-gpu-0 State=RESUME"))
