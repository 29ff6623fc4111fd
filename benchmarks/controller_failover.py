"""How long clients wait while a backup controller takes over, and while the primary takes
control back, on real Slurm.

    .venv/bin/python benchmarks/controller_failover.py [--keep]

Boots its own copy of `tests/cluster/Pulumi.ha.yaml` (a primary and a backup slurmctld,
SlurmctldTimeout 10 s) in the sandbox. `sinfo` runs in the login pod again and again (every
0.2 s after each answer) while the primary's pod is killed and left gone, as a StatefulSet
leaves the pod of a lost node, and then while it comes back. Prints `name: value` lines:
A batch job on both nodes runs across the kill; the primary is killed once it has saved
that job (Slurm saves within seconds of a change; what it had not saved, the backup does
not know) and the job must complete under the backup.
- takeover_seconds: from the kill until `sinfo` answers again: a backup in standby refuses
  clients, so that answer is the backup's, in control;
- takeover_sinfo_gap_seconds: the longest time without a `sinfo` answer until then;
- handback_seconds: from the primary's pod's return until `scontrol ping` says both are UP;
- handback_sinfo_gap_seconds: the longest time without a `sinfo` answer from the return
  until the first answer after that;
- slurmctld_timeout_seconds: the configured wait (takeoverAfterSeconds).
Runs as root; uses its own state directory and removes it at the end unless --keep.
"""

import argparse
import itertools
import shutil
import tempfile
import threading
import time
from pathlib import Path

import yaml

from slurm_stack.sandbox.session import Sandbox

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "tests" / "cluster" / "Pulumi.ha.yaml"
STATE = Path("/var/lib/slurm-stack/failover-sandbox")
NAME = "failover"


def stack_file(directory: Path) -> Path:
    document = yaml.safe_load(STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    config["name"], config["namespace"] = NAME, f"slurm-{NAME}"
    path = directory / f"Pulumi.{NAME}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class Answers:
    """`sinfo` in the login pod in a loop: the times of its answers."""

    def __init__(self, sandbox: Sandbox, login: str) -> None:
        self.sandbox, self.login = sandbox, login
        self.times: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.sandbox.exec(self.login, ["sinfo", "-h"], timeout=120).returncode == 0:
                self.times.append(time.monotonic())
            time.sleep(0.2)

    def after(self, moment: float) -> bool:
        """Whether an answer came after ``moment``."""
        return bool(self.times) and self.times[-1] > moment

    def longest_gap(self, start: float, end: float) -> float:
        """The longest stretch in [start, end] without an answer."""
        inside = [t for t in self.times if start <= t <= end]
        edges = [start, *inside, end]
        return max(b - a for a, b in itertools.pairwise(edges))


def ping(sandbox: Sandbox, login: str) -> dict[str, str]:
    out = sandbox.exec(login, ["scontrol", "ping"], timeout=120).stdout
    words = [line.split() for line in out.splitlines()]
    return {w[w.index("at") + 1]: w[-1] for w in words if "at" in w and len(w) > 3}


def saved_since(sandbox: Sandbox, primary: str, moment: float) -> bool:
    argv = ["stat", "-c", "%.9Y", "/var/spool/slurmctld/node_state"]
    out = sandbox.exec(primary, argv).stdout.strip()
    return bool(out) and float(out) > moment


def wait(what: str, condition, timeout: float = 300) -> float:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the sandbox afterwards")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="failover-"))
    sandbox = Sandbox(stack_file(directory), state_base=STATE)
    sandbox.down(delete_data=True)
    sandbox = Sandbox(stack_file(directory), state_base=STATE)
    primary, backup = f"{NAME}-controller-0", f"{NAME}-controller-1"
    try:
        sandbox.up()
        login = sandbox.pod_of("login")
        wait("both controllers", lambda: ping(sandbox, login) == {primary: "UP", backup: "UP"})
        answers = Answers(sandbox, login)

        # A batch job on both nodes runs across the kill; the primary has saved it (and so
        # the nodes) before it dies: Slurm saves within seconds of a change, and the backup
        # knows what the primary last saved (docs/controller-ha.md).
        before = float(sandbox.exec(primary, ["date", "+%s.%N"]).stdout)
        job = sandbox.ssh("sbatch --parsable -N2 -o /dev/null --wrap 'srun sleep 30'").stdout
        wait("the primary's job state saved", lambda: saved_since(sandbox, primary, before))
        killed = time.monotonic()
        sandbox.kill_pod(primary, come_back=False)
        # In standby the backup refuses clients' requests: the first answer after the kill
        # is the backup's, in control.
        took_over = wait("an answer from the backup", lambda: answers.after(killed))
        wait("the backup alone", lambda: ping(sandbox, login) == {primary: "DOWN", backup: "UP"})
        job_id = job.strip()
        wait(
            f"job {job_id} completed under the backup",
            lambda: "COMPLETED" in sandbox.ssh(f"scontrol show job {job_id}").stdout,
        )
        returned = time.monotonic()
        sandbox.restore()
        handed_back = wait(
            "both again", lambda: ping(sandbox, login) == {primary: "UP", backup: "UP"}
        )
        wait("an answer after the handback", lambda: answers.after(handed_back))
        settled = time.monotonic()
        answers.stop.set()
        answers.thread.join(timeout=180)
        print(f"slurmctld_timeout_seconds: {sandbox.spec.controller.takeover_after_seconds}")
        print(f"takeover_seconds: {took_over - killed:.1f}")
        print(f"takeover_sinfo_gap_seconds: {answers.longest_gap(killed, took_over):.1f}")
        print(f"handback_seconds: {handed_back - returned:.1f}")
        print(f"handback_sinfo_gap_seconds: {answers.longest_gap(returned, settled):.1f}")
    finally:
        if not args.keep:
            sandbox.down(delete_data=True)
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
