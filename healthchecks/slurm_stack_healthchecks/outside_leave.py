"""An outside host's slurmd stops: its node leaves the cluster as a worker pod's does.

The join script (slurm_stack/render/join_script.py) installs this file on a host outside
Kubernetes as the stop hook of its slurmd (systemd's ExecStop, which runs before slurmd gets
SIGTERM). The node takes no new job; its running jobs get the pool's wait; then the pool's
policy acts on those left: `requeue` (a job Slurm cannot requeue is cancelled), `cancel`, or
`wait` (no deadline). Each job the policy ends gets an AdminComment that sacct shows. Last
the node's dynamic record is deleted, so no ghost stays in sinfo. A failed Slurm query is
never taken for "no jobs": it is asked again.

The host has Python but not the images' package: this file uses the standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

REASON = "outside: slurmd stopping"
# How long the policy's requeue or cancel takes to clear the node at most, and how often
# the hook asks Slurm.
SETTLE_SECONDS = 60
POLL_SECONDS = 1.0


class SlurmError(Exception):
    """A Slurm command failed; its words."""


Run = Callable[[Sequence[str]], str]


def run_command(argv: Sequence[str]) -> str:
    """Run a Slurm command; its stdout, or SlurmError with what it said."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{argv[0]}: {exc}") from exc
    if done.returncode != 0:
        raise SlurmError((done.stderr or done.stdout).strip() or f"{argv[0]} failed")
    return done.stdout


@dataclass(frozen=True)
class Policy:
    """The pool's drain: `requeue`, `cancel` or `wait`, and seconds before it acts (None:
    as long as the jobs run)."""

    name: str
    wait_seconds: int | None


def policy_acts(policy: Policy, waited: float) -> bool:
    """Whether the policy acts now on the jobs still running after ``waited`` seconds."""
    if policy.name == "wait" or policy.wait_seconds is None:
        return False
    return waited >= policy.wait_seconds


def how_to_end(policy: Policy, requeue_worked: bool) -> str:
    """What ended a job the policy acted on, as its AdminComment says."""
    if policy.name == "requeue" and requeue_worked:
        return "requeued"
    if policy.name == "requeue":
        return "cancelled: Slurm cannot requeue it (not a batch job, or --no-requeue)"
    return f"cancelled (drain policy {policy.name})"


class Node:
    """This host's Slurm node, through the Slurm commands."""

    def __init__(self, name: str, run: Run = run_command) -> None:
        self.name, self.run = name, run

    def jobs(self) -> list[str]:
        """Job ids on the node; SlurmError when Slurm cannot say."""
        out = self.run(["squeue", "-h", "-w", self.name, "-o", "%i"])
        return sorted({line.strip() for line in out.splitlines() if line.strip()})

    def known(self) -> bool:
        """Whether Slurm has a record of the node; SlurmError when Slurm cannot say."""
        try:
            self.run(["scontrol", "show", "node", self.name])
        except SlurmError as exc:
            if "not found" in str(exc):
                return False
            raise
        return True

    def drain(self) -> None:
        self.run(["scontrol", "update", f"NodeName={self.name}", "State=DRAIN", f"Reason={REASON}"])

    def end(self, job: str, policy: Policy) -> str:
        """End one job as the policy says; what was done."""
        requeued = False
        if policy.name == "requeue":
            try:
                self.run(["scontrol", "requeue", job])
                requeued = True
            except SlurmError:
                requeued = False
        what = how_to_end(policy, requeued)
        comment = f"AdminComment=slurm-stack: {what}: host {self.name} left the cluster"
        with contextlib.suppress(SlurmError):
            self.run(["scontrol", "update", f"JobId={job}", comment])
        if not requeued:
            self.run(["scancel", job])
        return what

    def delete(self) -> None:
        self.run(["scontrol", "delete", f"NodeName={self.name}"])


def leave(
    node: Node,
    policy: Policy,
    log: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Drain, wait, act, delete; True once the node's record is gone."""
    start = clock()
    while True:
        try:
            if not node.known():
                log(f"Slurm has no node {node.name}: nothing to leave")
                return True
            node.drain()
            break
        except SlurmError as exc:
            log(f"cannot drain {node.name} yet: {exc}")
            sleep(POLL_SECONDS)
    acted_at: float | None = None
    while True:
        try:
            jobs = node.jobs()
        except SlurmError as exc:
            log(f"cannot list the jobs on {node.name}: {exc}; asking again")
            sleep(POLL_SECONDS)
            continue
        if not jobs:
            break
        if acted_at is None and policy_acts(policy, clock() - start):
            acted_at = clock()
            for job in jobs:
                try:
                    log(f"job {job}: {node.end(job, policy)}")
                except SlurmError as exc:
                    log(f"job {job}: {exc}")
        if acted_at is not None and clock() - acted_at > SETTLE_SECONDS:
            log(f"jobs {' '.join(jobs)} are still on {node.name}; deleting it anyway")
            break
        sleep(POLL_SECONDS)
    try:
        node.delete()
    except SlurmError as exc:
        log(f"could not delete node {node.name}: {exc}")
        return False
    log(f"node {node.name} left the cluster")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """`leave NODE POLICY [WAIT_SECONDS]`: 0 once the node's record is deleted."""
    parser = argparse.ArgumentParser(prog="slurm-stack-leave", description=__doc__)
    parser.add_argument("node")
    parser.add_argument("policy", choices=("requeue", "cancel", "wait"))
    parser.add_argument("wait_seconds", nargs="?", type=int, default=None)
    args = parser.parse_args(argv)
    policy = Policy(args.policy, args.wait_seconds)

    def log(message: str) -> None:
        print(f"slurm-stack-leave: {message}", file=sys.stderr, flush=True)

    return 0 if leave(Node(args.node), policy, log) else 1


if __name__ == "__main__":
    sys.exit(main())
