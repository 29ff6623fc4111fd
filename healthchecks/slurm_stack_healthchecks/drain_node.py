"""``healthcheck drain-node``: a worker pod's preStop hook (scale-down, eviction, pod deletion,
update), run as the entrypoint's ``drain-node`` role.

The node takes no new job; its running jobs get the pool's wait (``DRAIN_WAIT_SECONDS``; empty:
as long as they run); then ``DRAIN_POLICY`` acts on what is left: ``requeue`` (batch jobs run
again elsewhere, a job Slurm cannot requeue is cancelled) or ``cancel``, each with an
AdminComment that sacct shows. When the pool's update Job marked the node for another pod
template than this pod's (``POD_TEMPLATE_HASH``), the stop is an update and ``UPDATE_POLICY``
and ``UPDATE_WAIT_SECONDS`` apply instead. Last, the dynamic node record is deleted, so no ghost
stays and the name comes back clean. An elastic pool's node that Slurm gave back (or powers up
again) stays in Slurm for its next pod: no drain, no delete.

A failed Slurm query (slurmctld restarting) is never taken for "no jobs": the hook keeps
asking. The whole hook ends within the pool's wait plus ``DRAIN_CLEANUP_SECONDS``, whatever
fails: every Slurm call gets only the time left (a call to a slurmctld that is gone or frozen
waits out MessageTimeout, about 12 s, and the hook once made up to 30 of them first).

Three layers: pure decisions (:func:`plan_stop`, :func:`mark_seconds`, :func:`update_mark`,
:func:`waiting`, :func:`time_left`, :func:`wait_is_over`, :func:`policy_acts`,
:func:`cleanup_deadline`, :func:`admin_comment`), the loop that carries them out
(:func:`drain_node`) against a :class:`SlurmCalls` and a :class:`Clock`, and the thin adapter
that runs the Slurm commands (:class:`SlurmClient`). The real-Slurm proofs are
tests/cluster/test_drain.py.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from .elastic import Slurm as ElasticSlurm
from .elastic import given_back
from .runner import CommandError, CommandNotFound, CommandResult, run_command

DRAIN_REASON = "k8s: pod terminating"
# The pool's update Job (the entrypoint's `mark-pool-update` role) writes this and the new
# template's hash into the Comment of each node it marks.
UPDATE_MARK = "slurm-stack:update-to="
# How long the hook asks for the node's update mark when its wait does not say less.
UPDATE_MARK_SECONDS = 60
# After the pool's wait: the policy's requeue or cancel, slurmd's clean-up (KillWait) and the
# node's delete (slurm_stack/k8s/workers.py, DRAIN_CLEANUP_SECONDS, renders the same).
DEFAULT_CLEANUP_SECONDS = 50
# The elastic given-back question gets this long of its own, before the pool's wait begins.
GIVEN_BACK_SECONDS = 10
POLL_SECONDS = 2
DELETE_RETRY_SECONDS = 1
# The least a Slurm call is given, even past a deadline.
MIN_CALL_SECONDS = 1
DEFAULT_SLURMD_SPOOL = "/var/spool/slurmd"
# As the entrypoint's `log` helper writes: `slurm-stack[<role>]: <message>`.
LOG_PREFIX = "slurm-stack[drain-node]: "

REQUEUE, CANCEL, WAIT = "requeue", "cancel", "wait"
CANNOT_REQUEUE = "cancelled: Slurm cannot requeue it (not a batch job, or --no-requeue)"

Log = Callable[[str], None]


# --- The pod's settings ---------------------------------------------------------------------


class SettingsError(ValueError):
    """An environment variable the hook cannot use."""


@dataclass(frozen=True)
class Settings:
    """What the pool's rendering gives the slurmd container (slurm_stack/k8s/workers.py).

    A wait of ``None`` is an empty variable: as long as the jobs run. An empty or unset policy
    is the default, as the shell's ``${VAR:-default}`` read it."""

    drain_policy: str = REQUEUE
    drain_wait: int | None = None
    update_policy: str = WAIT
    update_wait: int | None = None
    template_hash: str = ""
    cleanup_seconds: int = DEFAULT_CLEANUP_SECONDS
    slurmd_spool: str = DEFAULT_SLURMD_SPOOL

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Read the variables; :class:`SettingsError` for a number that is not one."""
        cleanup = _seconds(environ, "DRAIN_CLEANUP_SECONDS")
        return cls(
            drain_policy=environ.get("DRAIN_POLICY") or REQUEUE,
            drain_wait=_seconds(environ, "DRAIN_WAIT_SECONDS"),
            update_policy=environ.get("UPDATE_POLICY") or WAIT,
            update_wait=_seconds(environ, "UPDATE_WAIT_SECONDS"),
            template_hash=environ.get("POD_TEMPLATE_HASH", ""),
            cleanup_seconds=DEFAULT_CLEANUP_SECONDS if cleanup is None else cleanup,
            slurmd_spool=environ.get("SLURMD_SPOOL") or DEFAULT_SLURMD_SPOOL,
        )

    @property
    def slurm_conf(self) -> str:
        """The config slurmd fetched from slurmctld (configless): the one its clients read."""
        return f"{self.slurmd_spool}/conf-cache/slurm.conf"


_WHOLE_SECONDS = re.compile(r"[0-9]+")


def _seconds(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name, "")
    if value == "":
        return None
    if not _WHOLE_SECONDS.fullmatch(value):
        raise SettingsError(f"{name} is not a whole number of seconds: {value!r}")
    return int(value)


# --- Decisions --------------------------------------------------------------------------------


def mark_seconds(settings: Settings) -> int:
    """How long the hook asks for the node's update mark: 60 s, or the shorter of the pool's
    waits, so that neither wait is outrun."""
    waits = [w for w in (settings.drain_wait, settings.update_wait) if w is not None]
    return min([UPDATE_MARK_SECONDS, *waits])


_MARK = re.compile(rf"Comment={re.escape(UPDATE_MARK)}([0-9a-f]*)")


def update_mark(record: str) -> str:
    """The template the update Job marked the node for, from its ``scontrol show node``
    record (any layout: one line or many); empty when it is not marked."""
    found = _MARK.search(record)
    return found[1] if found else ""


@dataclass(frozen=True)
class Stop:
    """How this pod's stop treats its node: the policy for the jobs left after ``wait``
    seconds (None: as long as they run), the drain's reason, and the words every AdminComment
    ends with. ``update_to``: the template of an update; empty for a plain stop."""

    policy: str
    wait: int | None
    reason: str
    why: str
    update_to: str = ""


def plan_stop(node: str, settings: Settings, target: str) -> Stop:
    """A plain stop, or an update when the node is marked for another template than the pod's
    own (``target``: the mark, empty when none was read)."""
    if target and target != settings.template_hash:
        policy, wait = settings.update_policy, settings.update_wait
        reason = f"k8s: pod updating to template {target}"
        why = f"node {node} was updated to pod template {target}"
        update_to = target
    else:
        policy, wait = settings.drain_policy, settings.drain_wait
        reason, why, update_to = DRAIN_REASON, f"node {node} left the cluster (its pod stopped)", ""
    if wait is not None:
        why = f"{why} after the pool's {wait}s wait"
    return Stop(policy, wait, reason, why, update_to)


def wait_text(wait: int | None) -> str:
    """A wait as the log says it (the shell's ``${wait}``): empty for none."""
    return "" if wait is None else str(wait)


def waiting(deadline: float | None, now: float) -> bool:
    """Whether the jobs' wait goes on: always without a deadline."""
    return deadline is None or now < deadline


def time_left(deadline: float | None, now: float) -> float | None:
    """What a Slurm call may take: the time to ``deadline``, at least MIN_CALL_SECONDS; None
    (as long as it takes) without a deadline."""
    if deadline is None:
        return None
    return max(float(MIN_CALL_SECONDS), deadline - now)


def wait_is_over(jobs: Sequence[str] | None) -> bool:
    """Whether the node is free of jobs: a failed query (None) is never "no jobs"."""
    return jobs is not None and not jobs


def cleanup_deadline(now: float, deadline: float | None, cleanup_seconds: int) -> float:
    """When the policy's work and the node's delete must be done: the clean-up time from now,
    but never later than the clean-up time after the wait's deadline."""
    until = now + cleanup_seconds
    if deadline is not None:
        until = min(until, deadline + cleanup_seconds)
    return until


def policy_acts(policy: str, jobs: Sequence[str] | None) -> bool:
    """Whether the policy acts on the node's jobs after the wait: never under `wait`; else
    when jobs are left, or when Slurm could not say (then the jobs are asked for again)."""
    return policy != WAIT and (jobs is None or bool(jobs))


def tries_requeue(policy: str) -> bool:
    return policy == REQUEUE


def cancelled_what(policy: str) -> str:
    """Why a job was cancelled: Slurm refused the requeue, or the policy is not `requeue`."""
    return CANNOT_REQUEUE if policy == REQUEUE else f"cancelled (drain policy {policy})"


def admin_comment(policy: str, why: str, requeued: bool) -> str:
    """The AdminComment of a job the policy ended."""
    what = "requeued" if requeued else cancelled_what(policy)
    return f"slurm-stack: {what}: {why}"


def jobs_left_line(node: str, wait: int | None, jobs: Sequence[str] | None, policy: str) -> str:
    return f"jobs still on {node} after {wait_text(wait)}s: {' '.join(jobs or [])}; policy {policy}"


# --- The loop ---------------------------------------------------------------------------------


class SlurmCalls(Protocol):
    """The Slurm calls of the hook. ``timeout``: seconds the call may take (None: no limit).
    A call that fails, or is killed at its timeout, returns False or None."""

    def given_back(self, node: str, timeout: float) -> bool: ...

    def show_node(self, node: str, timeout: float | None) -> str | None: ...

    def drain(self, node: str, reason: str, timeout: float | None) -> bool: ...

    def node_jobs(self, node: str, timeout: float | None) -> list[str] | None: ...

    def requeue(self, job: str, timeout: float | None) -> bool: ...

    def set_admin_comment(self, job: str, comment: str, timeout: float | None) -> bool: ...

    def cancel(self, job: str, timeout: float | None) -> bool: ...

    def delete_node(self, node: str, timeout: float | None) -> bool: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def ask_update_target(node: str, deadline: float, slurm: SlurmCalls, clock: Clock, log: Log) -> str:
    """The template the pool's update Job marked the node for; empty when it is not marked, or
    when slurmctld (perhaps restarting, in an update of the controller too) did not answer
    before ``deadline``."""
    while (record := slurm.show_node(node, time_left(deadline, clock.now()))) is None:
        if clock.now() >= deadline:
            log("slurmctld did not answer for the node's update mark; stopping as a plain stop")
            return ""
        clock.sleep(POLL_SECONDS)
    return update_mark(record)


def end_jobs_left_on(
    node: str, stop: Stop, until: float, slurm: SlurmCalls, clock: Clock, log: Log
) -> None:
    """The policy on the jobs Slurm lists on the node now (none when it cannot say)."""
    for job in slurm.node_jobs(node, time_left(until, clock.now())) or []:
        if tries_requeue(stop.policy) and slurm.requeue(job, time_left(until, clock.now())):
            comment = admin_comment(stop.policy, stop.why, requeued=True)
            slurm.set_admin_comment(job, comment, time_left(until, clock.now()))
            log(f"requeued job {job}")
            continue
        comment = admin_comment(stop.policy, stop.why, requeued=False)
        slurm.set_admin_comment(job, comment, time_left(until, clock.now()))
        if slurm.cancel(job, time_left(until, clock.now())):
            log(f"cancelled job {job}: {cancelled_what(stop.policy)}")
        else:
            log(f"could not cancel job {job}")


def drain_node(node: str, settings: Settings, slurm: SlurmCalls, clock: Clock, log: Log) -> int:
    """The whole hook; its exit status (0: the pod may stop, whatever Slurm did)."""
    started = clock.now()
    if slurm.given_back(node, GIVEN_BACK_SECONDS):
        log(f"Slurm has given node {node} back; its pod stops with nothing to drain")
        return 0
    target = ask_update_target(node, started + mark_seconds(settings), slurm, clock, log)
    stop = plan_stop(node, settings, target)
    if stop.update_to:
        log(
            f"an update to pod template {stop.update_to}: policy {stop.policy}, "
            f"wait {wait_text(stop.wait) or 'as long as jobs run'}"
        )
    deadline = None if stop.wait is None else started + stop.wait
    while not slurm.drain(node, stop.reason, time_left(deadline, clock.now())):
        if not waiting(deadline, clock.now()):
            break
        clock.sleep(POLL_SECONDS)
    while waiting(deadline, clock.now()):
        if wait_is_over(slurm.node_jobs(node, time_left(deadline, clock.now()))):
            break
        clock.sleep(POLL_SECONDS)
    until = cleanup_deadline(clock.now(), deadline, settings.cleanup_seconds)
    if stop.policy != WAIT:
        jobs = slurm.node_jobs(node, time_left(until, clock.now()))
        if policy_acts(stop.policy, jobs):
            log(jobs_left_line(node, stop.wait, jobs, stop.policy))
            end_jobs_left_on(node, stop, until, slurm, clock, log)
    # scontrol delete fails while a job still holds the node (completing): retry.
    while not slurm.delete_node(node, time_left(until, clock.now())):
        if clock.now() >= until:
            log(f"could not delete node {node}; it stays (down) until a pod of that name registers")
            return 0
        clock.sleep(DELETE_RETRY_SECONDS)
    log(f"deleted node {node}")
    return 0


# --- The adapter ------------------------------------------------------------------------------


class Execute(Protocol):
    """Runs a command (no shell), killed after ``timeout`` seconds (None: no limit); raises
    :class:`~.runner.CommandError` when it cannot run or was killed."""

    def __call__(
        self, argv: Sequence[str], *, timeout: float | None, stdin: str | None = None
    ) -> CommandResult: ...


class SlurmClient:
    """The Slurm commands of the hook, each killed at its timeout. What the commands say on
    stderr reaches the hook's stderr, except for the queries and the requeue and delete,
    whose failures the hook expects and handles (a job that cannot be requeued, a node still
    completing a job)."""

    def __init__(
        self, execute: Execute = run_command, out: TextIO | None = None, err: TextIO | None = None
    ) -> None:
        self.execute = execute
        self.out, self.err = out or sys.stdout, err or sys.stderr

    def _run(self, argv: Sequence[str], timeout: float | None, *, quiet: bool) -> CommandResult:
        try:
            return self.execute(argv, timeout=timeout)
        except CommandNotFound as exc:
            if not quiet:
                self._say(self.err, f"{exc}\n")
            return CommandResult(tuple(argv), 127, "", "")
        except CommandError:  # killed at its timeout, silently as coreutils' timeout does
            return CommandResult(tuple(argv), 124, "", "")

    def _act(self, argv: Sequence[str], timeout: float | None, *, quiet: bool = False) -> bool:
        """A command whose output is not read: it reaches the hook's own."""
        result = self._run(argv, timeout, quiet=quiet)
        self._say(self.out, result.stdout)
        if not quiet:
            self._say(self.err, result.stderr)
        return result.returncode == 0

    @staticmethod
    def _say(stream: TextIO, text: str) -> None:
        if text:
            stream.write(text)
            stream.flush()

    def given_back(self, node: str, timeout: float) -> bool:
        # As `healthcheck elastic-given-back` answered: anything but a yes is a no.
        try:
            return given_back(ElasticSlurm(self.execute, timeout), node)
        except (CommandError, OSError, ValueError) as exc:
            self._say(self.err, f"elastic: could not read node {node}: {exc}\n")
            return False

    def show_node(self, node: str, timeout: float | None) -> str | None:
        result = self._run(["scontrol", "show", "node", node], timeout, quiet=True)
        return result.stdout if result.returncode == 0 else None

    def drain(self, node: str, reason: str, timeout: float | None) -> bool:
        argv = ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]
        return self._act(argv, timeout)

    def node_jobs(self, node: str, timeout: float | None) -> list[str] | None:
        result = self._run(["squeue", "-h", "-w", node, "-o", "%i"], timeout, quiet=True)
        return parse_job_ids(result.stdout) if result.returncode == 0 else None

    def requeue(self, job: str, timeout: float | None) -> bool:
        return self._act(["scontrol", "requeue", job], timeout, quiet=True)

    def set_admin_comment(self, job: str, comment: str, timeout: float | None) -> bool:
        return self._act(["scontrol", "update", f"JobId={job}", f"AdminComment={comment}"], timeout)

    def cancel(self, job: str, timeout: float | None) -> bool:
        return self._act(["scancel", job], timeout)

    def delete_node(self, node: str, timeout: float | None) -> bool:
        return self._act(["scontrol", "delete", f"NodeName={node}"], timeout, quiet=True)


def parse_job_ids(text: str) -> list[str]:
    """``squeue -h -o %i`` output: each job once, in sorted order (as ``sort -u`` gave it)."""
    return sorted(set(text.split()))


# --- The command ------------------------------------------------------------------------------


def main(environ: Mapping[str, str], err: TextIO = sys.stderr, node: str | None = None) -> int:
    """``healthcheck drain-node``: 0 once the hook is done (whatever Slurm did), 2 when the
    environment is unusable (then nothing is done)."""

    def log(message: str) -> None:
        err.write(f"{LOG_PREFIX}{message}\n")
        err.flush()

    try:
        settings = Settings.from_environ(environ)
    except SettingsError as exc:
        log(f"error: {exc}")
        return 2
    env = {**environ, "SLURM_CONF": settings.slurm_conf}

    def execute(
        argv: Sequence[str], *, timeout: float | None, stdin: str | None = None
    ) -> CommandResult:
        return run_command(argv, timeout=timeout, stdin=stdin, env=env)

    slurm = SlurmClient(execute, sys.stdout, err)
    return drain_node(node or socket.gethostname(), settings, slurm, MonotonicClock(), log)
