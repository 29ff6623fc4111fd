"""The long-running commands stop at once on SIGTERM as a container's first process: PID 1 of
a namespace gets no signal it has no handler for, and a pod whose first process ignores
SIGTERM waits out its whole termination grace period on every stop (seen on a real node for
the node-state controller)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_stack_healthchecks.node_state import HEARTBEAT_FILE

from tests.healthchecks.hc_helpers import HEALTHCHECKS_DIR


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _environments() -> dict[str, dict[str, str]]:
    nothing_listens = str(_free_port())
    return {
        "exporter": {"EXPORTER_PORT": str(_free_port())},
        # An API server that does not answer: the controller logs each failed pass and runs on.
        "node-state": {
            "NODE_STATE_NAMESPACE": "slurm",
            "NODE_STATE_POD_SELECTOR": "app=slurm",
            "NODE_STATE_INTERVAL_SECONDS": "1",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": nothing_listens,
        },
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="a pid namespace of its own needs root")
@pytest.mark.parametrize(
    ("command", "running"), [("exporter", "serving /metrics"), ("node-state", "result=started")]
)
def test_as_a_containers_first_process_it_stops_on_sigterm(command: str, running: str) -> None:
    # The node-state controller touches its heartbeat file in /tmp after each pass (a pod's
    # own /tmp): one this test leaves behind on the host is removed afterwards.
    heartbeat = Path(HEARTBEAT_FILE)
    heartbeat_was_there = heartbeat.exists()
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-m",
         "slurm_stack_healthchecks", command],
        cwd=HEALTHCHECKS_DIR,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", **_environments()[command]},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = proc.stdout.readline()
        assert running in seen, seen
        first = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=True
        )
        os.kill(int(first.stdout.split()[0]), signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        if not heartbeat_was_there:
            heartbeat.unlink(missing_ok=True)
