"""A fresh stack: every daemon's log is free of errors, and an idle pod stops in seconds.

This file runs before the others that use the itest stack (pytest runs files in name order),
so the logs it reads are those of a fresh boot plus one ordinary job and login session.
"""

import re
import subprocess
import time

from slurm_stack.k8s.accounting import innodb_buffer_pool_mib
from tests.cluster.conftest import Cluster, wait_for

ERROR_LINE = re.compile(r"\b(error|fatal)\b:?", re.IGNORECASE)
# slurmdbd's own check wants an InnoDB buffer pool of at least 2 GiB (half of 4 GiB,
# `_check_database_variables` in accounting_storage_mysql.c); the embedded MariaDB gets a
# quarter of its memory limit, so below an 8 GiB limit slurmdbd says so once at start.
SLURM_BUFFER_POOL_MIB = 2048
SMALL_BUFFER_POOL = "error: Database settings not recommended values: innodb_buffer_pool_size"
# slurmctld times 1000 gettimeofday() calls once at start and says so above 200 microseconds
# (controller.c). That measures the host's clock source and load at that instant, not the
# stack: on a 2-core CI machine booting a dozen pods one fresh-clone run measured 276.
SLOW_CLOCK_AT_START = "error: High latency for 1000 calls to gettimeofday()"


def expected_errors(cluster: Cluster) -> list[str]:
    """The error lines the host or this stack's settings explain (see the constants above)."""
    allowed = [SLOW_CLOCK_AT_START]
    if innodb_buffer_pool_mib(cluster.sandbox.spec) < SLURM_BUFFER_POOL_MIB:
        allowed.append(SMALL_BUFFER_POOL)
    return allowed


def error_lines(cluster: Cluster) -> dict[str, list[str]]:
    """The lines with `error` or `fatal` that each running container has printed."""
    found = {}
    for name in cluster.daemons():
        printed = cluster.sandbox.podman.run(["logs", name], check=False)
        lines = [
            line
            for line in (printed.stdout + printed.stderr).splitlines()
            if ERROR_LINE.search(line)
        ]
        if lines:
            found[name] = lines
    return found


def test_a_fresh_stack_logs_no_error(cluster: Cluster) -> None:
    # What users do first: a batch job and an interactive login with a terminal.
    job = cluster.ok(cluster.login("sbatch --parsable -N2 --wrap 'srun hostname'")).strip()
    assert cluster.wait_job(job) == "COMPLETED"
    argv = cluster.sandbox.ssh_command("sandbox")
    pty = subprocess.run([*argv, "-tt", "true"], capture_output=True, text=True, timeout=60)
    assert pty.returncode == 0, pty.stderr
    allowed = expected_errors(cluster)
    unexplained = {
        name: [line for line in lines if not any(a in line for a in allowed)]
        for name, lines in error_lines(cluster).items()
    }
    assert not {name: lines for name, lines in unexplained.items() if lines}, unexplained


# Far below the grace periods a daemon that ignored SIGTERM would wait out (30 s for a login
# pod, minutes for a worker), with room for a worker's preStop drain on a loaded machine: one
# fresh-clone run on 2 cores took 7.0 s to stop an idle worker.
IDLE_STOP_SECONDS = 12


def test_idle_pods_stop_within_seconds(cluster: Cluster) -> None:
    # The kubelet sends SIGTERM to each container and waits up to the grace period (30 s
    # for a login pod): every daemon of an idle pod must end on it (sackd and the node-state
    # controller included, which as PID 1 ignored it, the controller also on a real node),
    # and an idle worker's preStop drain has nothing to wait for.
    applier = cluster.sandbox.applier()
    took = {}
    pods = [cluster.sandbox.pod_of(c) for c in ("login", "node-state", "exporter")]
    try:
        for pod in (*pods, "itest-cpu-1"):
            started = time.monotonic()
            applier.remove_pod(pod)
            took[pod] = time.monotonic() - started
    finally:
        # Their StatefulSets bring them back, whatever happened: the session's other tests
        # need them.
        cluster.sandbox.up(build=False)
    slow = {pod: f"{seconds:.1f}s" for pod, seconds in took.items() if seconds >= IDLE_STOP_SECONDS}
    assert not slow, f"idle pods slow to stop: {slow}"
    assert cluster.ok(cluster.login("echo back")).strip() == "back"
    wait_for("itest-cpu-1 idle again", lambda: cluster.node_states().get("itest-cpu-1") == "idle")
