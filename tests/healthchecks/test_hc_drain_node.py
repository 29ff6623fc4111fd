"""A worker pod's preStop hook (drain_node.py): its decisions as tables, the whole hook against
a Slurm that lives on a fake clock (slurmctld up, stopped, frozen; jobs that end, that Slurm
cannot requeue, that hold the node while completing), the adapter's commands, and the command
itself with stand-in Slurm commands first on PATH. The real hook runs on real Slurm (24.11 and
26.05) in tests/cluster/test_drain.py."""

from __future__ import annotations

import copy
import io
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from slurm_stack_healthchecks import drain_node as dn
from slurm_stack_healthchecks.drain_node import (
    CANNOT_REQUEUE,
    DRAIN_REASON,
    Settings,
    SettingsError,
    SlurmClient,
    Stop,
    admin_comment,
    cleanup_deadline,
    drain_node,
    mark_seconds,
    parse_job_ids,
    plan_stop,
    policy_acts,
    time_left,
    update_mark,
    wait_is_over,
    waiting,
)
from slurm_stack_healthchecks.runner import CommandNotFound, CommandResult, CommandTimeout

from tests.healthchecks.hc_helpers import HEALTHCHECKS_DIR

NODE = "c-cpu-2"
PLAIN_WHY = f"node {NODE} left the cluster (its pod stopped)"

# --- Settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "settings"),
    [
        # Nothing set: requeue as long as jobs run, an update waits, 50 s of clean-up.
        ({}, Settings()),
        # Empty is unset, as the shell's ${VAR:-default} reads it.
        (
            {"DRAIN_POLICY": "", "UPDATE_POLICY": "", "DRAIN_CLEANUP_SECONDS": ""},
            Settings(),
        ),
        # What the rendering gives a pool (tests/test_disruption.py).
        (
            {
                "DRAIN_POLICY": "cancel",
                "DRAIN_WAIT_SECONDS": "120",
                "DRAIN_CLEANUP_SECONDS": "50",
                "UPDATE_POLICY": "requeue",
                "UPDATE_WAIT_SECONDS": "60",
                "POD_TEMPLATE_HASH": "0123abcdef",
                "SLURMD_SPOOL": "/var/spool/slurmd",
            },
            Settings("cancel", 120, "requeue", 60, "0123abcdef", 50, "/var/spool/slurmd"),
        ),
        # `wait` pools: empty waits.
        (
            {"DRAIN_POLICY": "wait", "DRAIN_WAIT_SECONDS": "", "UPDATE_WAIT_SECONDS": ""},
            Settings(drain_policy="wait"),
        ),
        # A zero wait is a wait (the policy acts at once), not "as long as jobs run".
        ({"DRAIN_WAIT_SECONDS": "0"}, Settings(drain_wait=0)),
        ({"DRAIN_CLEANUP_SECONDS": "7"}, Settings(cleanup_seconds=7)),
    ],
)
def test_the_settings_are_read_from_the_pods_environment(
    environ: dict[str, str], settings: Settings
) -> None:
    assert Settings.from_environ(environ) == settings


@pytest.mark.parametrize(
    "environ",
    [
        {"DRAIN_WAIT_SECONDS": "soon"},
        {"UPDATE_WAIT_SECONDS": "-5"},
        {"DRAIN_CLEANUP_SECONDS": "1.5"},
        {"DRAIN_WAIT_SECONDS": " 5"},
    ],
)
def test_a_wait_that_is_not_whole_seconds_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="is not a whole number of seconds"):
        Settings.from_environ(environ)


def test_slurm_conf_is_slurmds_conf_cache() -> None:
    assert Settings().slurm_conf == "/var/spool/slurmd/conf-cache/slurm.conf"
    assert Settings(slurmd_spool="/x").slurm_conf == "/x/conf-cache/slurm.conf"


# --- Decisions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("drain_wait", "update_wait", "seconds"),
    [
        (None, None, 60),
        (300, 86400, 60),
        (15, None, 15),
        (None, 20, 20),
        (30, 5, 5),
        (0, 300, 0),
        (60, 60, 60),
    ],
)
def test_the_update_mark_is_asked_for_no_longer_than_the_shorter_wait(
    drain_wait: int | None, update_wait: int | None, seconds: int
) -> None:
    settings = Settings(drain_wait=drain_wait, update_wait=update_wait)
    assert mark_seconds(settings) == seconds


# Node records as `scontrol show node` prints them (not -o): one field group per line. A
# Comment line appears only on a node that has one; the hash is hex (workers.template_hash).
MULTI_LINE = """NodeName=c-cpu-2 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=0.05
   AvailableFeatures=cpu
   ActiveFeatures=cpu
   Gres=(null)
   NodeAddr=10.88.0.14 NodeHostName=c-cpu-2 Version={version}
{comment}   OS=Linux 6.8.0-49-generic #49-Ubuntu SMP PREEMPT_DYNAMIC
   RealMemory=486 AllocMem=0 FreeMem=1024 Sockets=1 Boards=1
   State=MIXED+DYNAMIC_NORM ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=cpu
   BootTime=2026-11-28T12:00:00 SlurmdStartTime=2026-11-28T12:00:02
   CfgTRES=cpu=2,mem=486M,billing=2
"""


def multi_line(version: str, comment: str | None) -> str:
    return MULTI_LINE.format(version=version, comment=f"   Comment={comment}\n" if comment else "")


@pytest.mark.parametrize(
    ("record", "target"),
    [
        (multi_line("24.11.6", None), ""),
        (multi_line("26.05.0", None), ""),
        (multi_line("24.11.6", "slurm-stack:update-to=0123abcdef"), "0123abcdef"),
        (multi_line("26.05.0", "slurm-stack:update-to=0123abcdef"), "0123abcdef"),
        # `scontrol -o`: everything on one line.
        (
            " ".join(multi_line("26.05.0", "slurm-stack:update-to=beef").split()),
            "beef",
        ),
        # An admin's own comment is not a mark.
        (multi_line("24.11.6", "rack 4, ask bob"), ""),
        (multi_line("24.11.6", "(null)"), ""),
        # The mark without a hash marks nothing; the hash ends where hex ends.
        (multi_line("24.11.6", "slurm-stack:update-to="), ""),
        (multi_line("24.11.6", "slurm-stack:update-to=abc12 later"), "abc12"),
        ("", ""),
    ],
)
def test_the_update_mark_is_read_from_the_node_record(record: str, target: str) -> None:
    assert update_mark(record) == target


UPDATE_SETTINGS = Settings(
    drain_policy="cancel",
    drain_wait=120,
    update_policy="requeue",
    update_wait=300,
    template_hash="1111111111",
)


@pytest.mark.parametrize(
    ("settings", "target", "stop"),
    [
        # Not marked (or slurmctld did not say): a plain stop, the pool's drain.
        (
            UPDATE_SETTINGS,
            "",
            Stop("cancel", 120, DRAIN_REASON, f"{PLAIN_WHY} after the pool's 120s wait"),
        ),
        # Marked for this pod's own template: the pod runs it already, a plain stop.
        (
            UPDATE_SETTINGS,
            "1111111111",
            Stop("cancel", 120, DRAIN_REASON, f"{PLAIN_WHY} after the pool's 120s wait"),
        ),
        # Marked for another template: an update, the pool's update settings.
        (
            UPDATE_SETTINGS,
            "2222222222",
            Stop(
                "requeue",
                300,
                "k8s: pod updating to template 2222222222",
                f"node {NODE} was updated to pod template 2222222222 after the pool's 300s wait",
                "2222222222",
            ),
        ),
        # A pod without a template hash (rendered before there was one): any mark updates.
        (
            Settings(),
            "2222222222",
            Stop(
                "wait",
                None,
                "k8s: pod updating to template 2222222222",
                f"node {NODE} was updated to pod template 2222222222",
                "2222222222",
            ),
        ),
        # No wait: no words about one.
        (Settings(), "", Stop("requeue", None, DRAIN_REASON, PLAIN_WHY)),
        (
            Settings(drain_policy="wait"),
            "",
            Stop("wait", None, DRAIN_REASON, PLAIN_WHY),
        ),
        # A zero wait is said.
        (
            Settings(drain_wait=0),
            "",
            Stop("requeue", 0, DRAIN_REASON, f"{PLAIN_WHY} after the pool's 0s wait"),
        ),
    ],
)
def test_the_stop_is_planned_from_the_mark_and_the_pods_template(
    settings: Settings, target: str, stop: Stop
) -> None:
    assert plan_stop(NODE, settings, target) == stop


@pytest.mark.parametrize(
    ("deadline", "now", "goes_on", "left"),
    [
        (None, 10**6, True, None),
        (15.0, 0.0, True, 15.0),
        (15.0, 14.5, True, 1.0),  # never less than a second for a call
        (15.0, 15.0, False, 1.0),
        (15.0, 40.0, False, 1.0),
        (15.0, 3.25, True, 11.75),
    ],
)
def test_the_wait_and_the_time_a_call_gets(
    deadline: float | None, now: float, goes_on: bool, left: float | None
) -> None:
    assert waiting(deadline, now) is goes_on
    assert time_left(deadline, now) == left


@pytest.mark.parametrize(
    ("now", "deadline", "cleanup", "until"),
    [
        (100.0, None, 50, 150.0),  # no deadline: the clean-up from now
        (4.0, 15.0, 50, 54.0),  # the jobs ended early: from now
        (15.0, 15.0, 50, 65.0),
        (30.0, 15.0, 50, 65.0),  # a call outran the wait: never past deadline + clean-up
        (12.0, 5.0, 50, 55.0),
    ],
)
def test_the_clean_up_ends_no_later_than_its_time_after_the_wait(
    now: float, deadline: float | None, cleanup: int, until: float
) -> None:
    assert cleanup_deadline(now, deadline, cleanup) == until


# Job states as the hook sees them: Slurm could not say (None), none left, some left.
JOB_STATES = {"failed query": None, "no jobs": [], "jobs": ["7", "8"]}


@pytest.mark.parametrize(
    ("jobs", "over"),
    [("failed query", False), ("no jobs", True), ("jobs", False)],
)
def test_a_failed_query_is_never_taken_for_no_jobs(jobs: str, over: bool) -> None:
    assert wait_is_over(JOB_STATES[jobs]) is over


@pytest.mark.parametrize(
    ("policy", "jobs", "acts"),
    [
        ("requeue", "failed query", True),
        ("requeue", "no jobs", False),
        ("requeue", "jobs", True),
        ("cancel", "failed query", True),
        ("cancel", "no jobs", False),
        ("cancel", "jobs", True),
        ("wait", "failed query", False),
        ("wait", "no jobs", False),
        ("wait", "jobs", False),
    ],
)
def test_the_policy_acts_on_jobs_left_or_unknown_unless_it_waits(
    policy: str, jobs: str, acts: bool
) -> None:
    assert policy_acts(policy, JOB_STATES[jobs]) is acts


WHY = f"{PLAIN_WHY} after the pool's 15s wait"


@pytest.mark.parametrize(
    ("policy", "requeued", "comment"),
    [
        ("requeue", True, f"slurm-stack: requeued: {WHY}"),
        (
            "requeue",
            False,
            "slurm-stack: cancelled: Slurm cannot requeue it (not a batch job, or --no-requeue): "
            + WHY,
        ),
        ("cancel", False, f"slurm-stack: cancelled (drain policy cancel): {WHY}"),
    ],
)
def test_each_ended_job_says_why_in_its_admin_comment(
    policy: str, requeued: bool, comment: str
) -> None:
    assert admin_comment(policy, WHY, requeued) == comment


@pytest.mark.parametrize(
    ("output", "jobs"),
    [
        ("", []),
        ("\n", []),
        ("7\n", ["7"]),
        # A job with steps or several rows is one job; sorted as `sort -u` sorted them.
        ("12\n7\n12\n", ["12", "7"]),
        # Array and heterogeneous jobs keep Slurm's ids.
        ("40_3\n40_1\n51+0\n", ["40_1", "40_3", "51+0"]),
        ("  9  \n", ["9"]),
    ],
)
def test_the_jobs_on_the_node_are_read_from_squeue(output: str, jobs: list[str]) -> None:
    assert parse_job_ids(output) == jobs


# --- The hook against a Slurm on a fake clock ----------------------------------------------------

# A client's question to a stopped slurmctld fails once it has retried for MessageTimeout.
STOPPED_CALL_SECONDS = 10.0
ANSWER_SECONDS = 0.25  # exact in binary: the fake clock's sums stay exact


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@dataclass
class Job:
    id: str
    ends_at: float = math.inf
    requeueable: bool = True
    gone_at: float | None = None  # requeued or cancelled: off the node's list
    fate: str = "ran"


@dataclass
class Call:
    name: str
    args: tuple[str, ...]
    timeout: float | None
    at: float
    ok: bool


@dataclass
class FakeSlurm:
    """slurmctld as the hook meets it. ``stopped`` and ``frozen``: intervals in which it is
    stopped (a question fails after a while) or frozen (a question hangs until it thaws or the
    call is killed). A requeued or cancelled job holds the node ``completing`` seconds more,
    while the node cannot be deleted."""

    clock: Clock
    jobs: list[Job] = field(default_factory=list)
    comment: str | None = None
    given: bool = False
    stopped: list[tuple[float, float]] = field(default_factory=list)
    frozen: list[tuple[float, float]] = field(default_factory=list)
    completing: float = 0.0
    cancel_fails: bool = False
    squeue_fails_at: set[int] = field(default_factory=set)  # the nth squeue (1-based) fails
    calls: list[Call] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    comments: dict[str, str] = field(default_factory=dict)
    deleted: bool = False

    def _state(self, t: float) -> tuple[str, float]:
        for start, end in self.frozen:
            if start <= t < end:
                return "frozen", end
        for start, end in self.stopped:
            if start <= t < end:
                return "stopped", end
        return "up", t

    def _ask(self, name: str, args: tuple[str, ...], timeout: float | None) -> bool:
        """Spend the call's time on the clock; whether slurmctld answered."""
        assert timeout is None or timeout >= 1, (name, timeout)
        start = self.clock.t
        state, thaw = self._state(start)
        if state == "up":
            cost, ok = ANSWER_SECONDS, True
        elif state == "stopped":
            cost, ok = STOPPED_CALL_SECONDS, False
            if timeout is not None and timeout < cost:
                cost = timeout
        else:
            assert timeout is not None or math.isfinite(thaw), "a call that would hang forever"
            if timeout is not None and start + timeout < thaw:
                cost, ok = timeout, False
            else:
                cost, ok = thaw - start + ANSWER_SECONDS, True
        self.clock.t = start + cost
        self.calls.append(Call(name, args, timeout, start, ok))
        return ok

    def on_node(self) -> list[Job]:
        t = self.clock.t
        return [j for j in self.jobs if t < j.ends_at and j.gone_at is None]

    def holding(self) -> bool:
        t = self.clock.t
        return any(
            j.gone_at is not None and t < j.gone_at + self.completing for j in self.jobs
        ) or bool(self.on_node())

    def named(self, name: str) -> list[Call]:
        return [c for c in self.calls if c.name == name]

    # SlurmCalls

    def given_back(self, node: str, timeout: float) -> bool:
        return self._ask("given_back", (node,), timeout) and self.given

    def show_node(self, node: str, timeout: float | None) -> str | None:
        if not self._ask("show_node", (node,), timeout):
            return None
        return multi_line("26.05.0", self.comment)

    def drain(self, node: str, reason: str, timeout: float | None) -> bool:
        if not self._ask("drain", (node, reason), timeout):
            return False
        self.reasons.append(reason)
        return True

    def node_jobs(self, node: str, timeout: float | None) -> list[str] | None:
        nth = len(self.named("node_jobs")) + 1
        if not self._ask("node_jobs", (node,), timeout) or nth in self.squeue_fails_at:
            return None
        return parse_job_ids("\n".join(j.id for j in self.on_node()))

    def _job(self, job: str) -> Job:
        [found] = [j for j in self.jobs if j.id == job]
        return found

    def requeue(self, job: str, timeout: float | None) -> bool:
        if not self._ask("requeue", (job,), timeout) or not self._job(job).requeueable:
            return False
        self._job(job).gone_at, self._job(job).fate = self.clock.t, "requeued"
        return True

    def set_admin_comment(self, job: str, comment: str, timeout: float | None) -> bool:
        if not self._ask("set_admin_comment", (job, comment), timeout):
            return False
        self.comments[job] = comment
        return True

    def cancel(self, job: str, timeout: float | None) -> bool:
        if not self._ask("cancel", (job,), timeout) or self.cancel_fails:
            return False
        self._job(job).gone_at, self._job(job).fate = self.clock.t, "cancelled"
        return True

    def delete_node(self, node: str, timeout: float | None) -> bool:
        if not self._ask("delete_node", (node,), timeout) or self.holding():
            return False
        self.deleted = True
        return True


def run_hook(slurm: FakeSlurm, settings: Settings) -> list[str]:
    said: list[str] = []
    assert drain_node(NODE, settings, slurm, slurm.clock, said.append) == 0
    return said


def fake(**kwargs: object) -> FakeSlurm:
    return FakeSlurm(Clock(), **kwargs)  # type: ignore[arg-type]


def fresh(slurm: FakeSlurm) -> FakeSlurm:
    """A table's Slurm as it was written, whatever a run before did to it."""
    return copy.deepcopy(slurm)


REQUEUE_15 = Settings(drain_policy="requeue", drain_wait=15)
CANCEL_15 = Settings(drain_policy="cancel", drain_wait=15)


@pytest.mark.parametrize(
    ("case", "settings", "slurm", "log", "fates"),
    [
        (
            "an idle node: drained and deleted",
            REQUEUE_15,
            fake(),
            ["deleted node c-cpu-2"],
            {},
        ),
        (
            "an elastic node Slurm gave back: nothing else is done",
            REQUEUE_15,
            fake(given=True, jobs=[Job("7")]),
            ["Slurm has given node c-cpu-2 back; its pod stops with nothing to drain"],
            {"7": "ran"},
        ),
        (
            "a job that ends within the wait is left alone",
            REQUEUE_15,
            fake(jobs=[Job("7", ends_at=9)]),
            ["deleted node c-cpu-2"],
            {"7": "ran"},
        ),
        (
            "a job that outlasts the wait is requeued",
            REQUEUE_15,
            fake(jobs=[Job("7")]),
            [
                "jobs still on c-cpu-2 after 15s: 7; policy requeue",
                "requeued job 7",
                "deleted node c-cpu-2",
            ],
            {"7": "requeued"},
        ),
        (
            "a job Slurm cannot requeue is cancelled",
            REQUEUE_15,
            fake(jobs=[Job("7", requeueable=False), Job("12")]),
            [
                "jobs still on c-cpu-2 after 15s: 12 7; policy requeue",
                "requeued job 12",
                f"cancelled job 7: {CANNOT_REQUEUE}",
                "deleted node c-cpu-2",
            ],
            {"7": "cancelled", "12": "requeued"},
        ),
        (
            "the cancel policy cancels",
            CANCEL_15,
            fake(jobs=[Job("7")]),
            [
                "jobs still on c-cpu-2 after 15s: 7; policy cancel",
                "cancelled job 7: cancelled (drain policy cancel)",
                "deleted node c-cpu-2",
            ],
            {"7": "cancelled"},
        ),
        (
            "a cancel that fails is said, and the node stays while the job runs",
            CANCEL_15,
            fake(jobs=[Job("7")], cancel_fails=True),
            [
                "jobs still on c-cpu-2 after 15s: 7; policy cancel",
                "could not cancel job 7",
                "could not delete node c-cpu-2; it stays (down) until a pod of that name registers",
            ],
            {"7": "ran"},
        ),
        (
            "the wait policy waits as long as the job runs",
            Settings(drain_policy="wait"),
            fake(jobs=[Job("7", ends_at=400)]),
            ["deleted node c-cpu-2"],
            {"7": "ran"},
        ),
        (
            "an update to another template: the update's policy, wait and words",
            Settings(
                drain_policy="cancel",
                drain_wait=120,
                update_policy="requeue",
                update_wait=30,
                template_hash="1111111111",
            ),
            fake(jobs=[Job("7")], comment="slurm-stack:update-to=2222222222"),
            [
                "an update to pod template 2222222222: policy requeue, wait 30",
                "jobs still on c-cpu-2 after 30s: 7; policy requeue",
                "requeued job 7",
                "deleted node c-cpu-2",
            ],
            {"7": "requeued"},
        ),
        (
            "an update with the wait policy says how long it waits",
            Settings(update_policy="wait", template_hash="1111111111"),
            fake(jobs=[Job("7", ends_at=100)], comment="slurm-stack:update-to=2222222222"),
            [
                "an update to pod template 2222222222: policy wait, wait as long as jobs run",
                "deleted node c-cpu-2",
            ],
            {"7": "ran"},
        ),
        (
            "a mark for the pod's own template is a plain stop",
            Settings(drain_policy="cancel", drain_wait=15, template_hash="1111111111"),
            fake(jobs=[Job("7")], comment="slurm-stack:update-to=1111111111"),
            [
                "jobs still on c-cpu-2 after 15s: 7; policy cancel",
                "cancelled job 7: cancelled (drain policy cancel)",
                "deleted node c-cpu-2",
            ],
            {"7": "cancelled"},
        ),
    ],
)
def test_the_hook(
    case: str, settings: Settings, slurm: FakeSlurm, log: list[str], fates: dict[str, str]
) -> None:
    slurm = fresh(slurm)
    assert run_hook(slurm, settings) == log, case
    assert {j.id: j.fate for j in slurm.jobs} == fates, case


def test_what_is_drained_waited_for_and_commented() -> None:
    slurm = fake(jobs=[Job("7"), Job("8", ends_at=6)])
    run_hook(slurm, REQUEUE_15)
    assert slurm.reasons == [DRAIN_REASON]
    assert slurm.comments == {"7": f"slurm-stack: requeued: {WHY}"}
    # Asked every 2 s until the wait was over, then once more for the policy and once for
    # the jobs it ends.
    queries = slurm.named("node_jobs")
    assert [c.at for c in queries[:3]] == [0.75, 3.0, 5.25]
    assert all(c.at < 15 for c in queries[:-2]) and queries[-2].at >= 15
    assert set(slurm.clock.sleeps) == {2}
    assert slurm.deleted and slurm.clock.t < 15 + 5


def test_the_update_mark_is_asked_again_until_slurmctld_answers() -> None:
    slurm = fake(comment="slurm-stack:update-to=2222222222", stopped=[(0.2, 5.0)])
    settings = Settings(update_policy="cancel", update_wait=30, template_hash="1111111111")
    log = run_hook(slurm, settings)
    shows = slurm.named("show_node")
    assert [c.ok for c in shows] == [False, True]
    # A question fails after 10 s, or when its time runs out: the mark's 30 s here.
    assert shows[0].timeout == 30 - ANSWER_SECONDS
    assert log[0] == "an update to pod template 2222222222: policy cancel, wait 30"
    assert slurm.reasons == ["k8s: pod updating to template 2222222222"]


def test_a_stop_under_the_wait_policy_outlasts_a_stopped_slurmctld() -> None:
    """As tests/cluster/test_drain.py stops slurmctld for 30 s while the keep pool's stop
    waits: every question in that time fails, none reads as "no jobs"."""
    slurm = fake(jobs=[Job("7", ends_at=75)], stopped=[(5.0, 35.0)])
    log = run_hook(slurm, Settings(drain_policy="wait"))
    assert log == ["deleted node c-cpu-2"]
    queries = slurm.named("node_jobs")
    assert any(not c.ok for c in queries)
    # No limit on a call while the wait has no deadline.
    assert {c.timeout for c in queries} == {None}
    # The first answer of "no jobs" came after the job's end, and only then the delete.
    [delete] = slurm.named("delete_node")
    assert delete.at >= 75 and slurm.jobs[0].fate == "ran"
    assert not slurm.named("cancel") and not slurm.named("requeue")


HOLD = Settings(drain_policy="cancel", drain_wait=5, cleanup_seconds=50)


def test_a_frozen_slurmctld_holds_the_hook_no_longer_than_its_wait_and_clean_up() -> None:
    """As tests/cluster/test_drain.py freezes slurmctld for the hold pool's hook (cancel,
    5 s): each call gets only the time left, so the hook ends within 5 + 50 s."""
    slurm = fake(jobs=[Job("7")], frozen=[(0.0, math.inf)])
    log = run_hook(slurm, HOLD)
    assert log == [
        "slurmctld did not answer for the node's update mark; stopping as a plain stop",
        "jobs still on c-cpu-2 after 5s: ; policy cancel",
        "could not delete node c-cpu-2; it stays (down) until a pod of that name registers",
    ]
    assert slurm.clock.t <= 5 + 50 + 2
    # The given-back question has 10 s of its own; then every call ends by its deadline
    # (the mark's and the wait's at 5 s, the clean-up's at 55 s), or after 1 s past it.
    [given, *rest] = slurm.calls
    assert (given.name, given.timeout) == ("given_back", 10)
    for call in rest:
        deadline = 55.0 if call.at >= 12 else 5.0
        assert call.timeout is not None
        assert call.at + call.timeout <= max(deadline, call.at + 1) + 1e-9, call


def test_slurmctld_frozen_then_back_within_the_clean_up_ends_the_jobs() -> None:
    slurm = fake(jobs=[Job("7")], frozen=[(0.0, 20.0)])
    log = run_hook(slurm, HOLD)
    assert log == [
        "slurmctld did not answer for the node's update mark; stopping as a plain stop",
        "jobs still on c-cpu-2 after 5s: 7; policy cancel",
        "cancelled job 7: cancelled (drain policy cancel)",
        "deleted node c-cpu-2",
    ]
    # The drain could not be placed within the wait: tried once, not again after it.
    assert [c.ok for c in slurm.named("drain")] == [False]


def test_a_failed_query_after_the_wait_is_asked_again_before_the_policy_acts() -> None:
    slurm = fake(jobs=[Job("7")])
    slurm.squeue_fails_at = {8}  # the one after the wait (7 asked within it)
    log = run_hook(slurm, REQUEUE_15)
    assert len([c for c in slurm.named("node_jobs") if c.at < 15]) == 7
    assert log == [
        "jobs still on c-cpu-2 after 15s: ; policy requeue",
        "requeued job 7",
        "deleted node c-cpu-2",
    ]


def test_the_delete_is_retried_every_second_while_a_job_completes() -> None:
    slurm = fake(jobs=[Job("7")], completing=3.5)
    run_hook(slurm, CANCEL_15)
    deletes = slurm.named("delete_node")
    assert len(deletes) >= 4 and slurm.deleted
    assert slurm.clock.sleeps[-len(deletes) + 1 :] == [1] * (len(deletes) - 1)


def test_the_drain_is_retried_within_the_wait() -> None:
    slurm = fake(stopped=[(0.5, 3.0)])  # the mark read, then slurmctld restarts
    run_hook(slurm, REQUEUE_15)
    drains = slurm.named("drain")
    assert [c.ok for c in drains] == [False, True]
    assert drains[0].timeout == 15 - 2 * ANSWER_SECONDS
    assert slurm.reasons == [DRAIN_REASON]


# --- The adapter ------------------------------------------------------------------------------


@dataclass
class Recorder:
    """An Execute: answers by the command's first words; records argv and timeout."""

    answers: dict[tuple[str, ...], CommandResult | Exception] = field(default_factory=dict)
    calls: list[tuple[tuple[str, ...], float | None]] = field(default_factory=list)

    def __call__(
        self, argv: Sequence[str], *, timeout: float | None, stdin: str | None = None
    ) -> CommandResult:
        key = tuple(argv)
        self.calls.append((key, timeout))
        for n in range(len(key), 0, -1):
            if key[:n] in self.answers:
                answer = self.answers[key[:n]]
                if isinstance(answer, Exception):
                    raise answer
                return answer
        return CommandResult(key, 0, "", "")


def client(
    answers: dict[tuple[str, ...], CommandResult | Exception],
) -> tuple[SlurmClient, Recorder, io.StringIO, io.StringIO]:
    execute, out, err = Recorder(answers), io.StringIO(), io.StringIO()
    return SlurmClient(execute, out, err), execute, out, err


def failed(stderr: str, code: int = 1) -> CommandResult:
    return CommandResult((), code, "", stderr)


def test_the_adapter_runs_the_slurm_commands_with_the_time_left() -> None:
    slurm, execute, _, _ = client({("squeue",): CommandResult((), 0, "8\n7\n8\n", "")})
    assert slurm.drain(NODE, DRAIN_REASON, 12.5)
    assert slurm.node_jobs(NODE, None) == ["7", "8"]
    assert slurm.requeue("7", 3.0)
    assert slurm.set_admin_comment("7", "slurm-stack: requeued: x y", 3.0)
    assert slurm.cancel("8", 2.0)
    assert slurm.delete_node(NODE, 1.0)
    assert slurm.show_node(NODE, 60.0) is not None
    assert execute.calls == [
        (("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", f"Reason={DRAIN_REASON}"), 12.5),
        (("squeue", "-h", "-w", NODE, "-o", "%i"), None),
        (("scontrol", "requeue", "7"), 3.0),
        (("scontrol", "update", "JobId=7", "AdminComment=slurm-stack: requeued: x y"), 3.0),
        (("scancel", "8"), 2.0),
        (("scontrol", "delete", f"NodeName={NODE}"), 1.0),
        (("scontrol", "show", "node", NODE), 60.0),
    ]


@pytest.mark.parametrize(
    "answer",
    [
        failed("slurm_load_jobs error: Unable to contact slurm controller (connect failure)"),
        CommandTimeout(["squeue"], 4.0),
        CommandNotFound(["squeue"]),
    ],
)
def test_a_query_that_fails_or_is_killed_says_nothing(answer: CommandResult | Exception) -> None:
    slurm, _, out, err = client({("squeue",): answer, ("scontrol", "show"): answer})
    assert slurm.node_jobs(NODE, 4.0) is None
    assert slurm.show_node(NODE, 4.0) is None
    assert out.getvalue() == err.getvalue() == ""


def test_what_slurm_says_reaches_the_hooks_stderr_except_for_the_expected_failures() -> None:
    slurm, _, _, err = client(
        {
            ("scontrol", "update"): failed("slurm_update error: Invalid node name specified\n"),
            ("scancel",): failed("scancel: error: Kill job error on job id 7: Invalid job id\n"),
            ("scontrol", "requeue"): failed("Requested operation is presently disabled\n"),
            ("scontrol", "delete"): failed("Job(s) active, cannot delete node\n"),
        }
    )
    assert not slurm.drain(NODE, DRAIN_REASON, 5.0)
    assert not slurm.cancel("7", 5.0)
    assert not slurm.requeue("7", 5.0)
    assert not slurm.delete_node(NODE, 5.0)
    assert err.getvalue() == (
        "slurm_update error: Invalid node name specified\n"
        "scancel: error: Kill job error on job id 7: Invalid job id\n"
    )


def test_a_call_killed_at_its_timeout_is_a_failure() -> None:
    slurm, _, _, err = client({("scontrol", "update"): CommandTimeout(["scontrol"], 1.0)})
    assert not slurm.drain(NODE, DRAIN_REASON, 1.0)
    assert not slurm.set_admin_comment("7", "x", 1.0)
    assert err.getvalue() == ""


@pytest.mark.parametrize(
    ("answer", "given", "said"),
    [
        (CommandResult((), 0, f"NodeName={NODE} State=IDLE+CLOUD+POWERED_DOWN\n", ""), True, ""),
        (CommandResult((), 0, f"NodeName={NODE} State=IDLE+POWERING_UP\n", ""), True, ""),
        (CommandResult((), 0, f"NodeName={NODE} State=MIXED+DYNAMIC_NORM\n", ""), False, ""),
        (
            failed(f"Node {NODE} not found"),
            False,
            f"elastic: could not read node {NODE}: scontrol: Node {NODE} not found\n",
        ),
        (
            CommandTimeout(["scontrol"], 10),
            False,
            f"elastic: could not read node {NODE}: scontrol: timeout after 10s\n",
        ),
    ],
)
def test_the_given_back_question_is_the_elastic_scalers(
    answer: CommandResult | Exception, given: bool, said: str
) -> None:
    slurm, execute, _, err = client({("scontrol",): answer})
    assert slurm.given_back(NODE, 10) is given
    assert execute.calls == [(("scontrol", "-o", "show", "node", NODE), 10)]
    assert err.getvalue() == said


# --- The command ------------------------------------------------------------------------------


def test_an_unusable_wait_stops_the_hook_before_it_does_anything() -> None:
    err = io.StringIO()
    assert dn.main({"DRAIN_WAIT_SECONDS": "soon"}, err, node=NODE) == 2
    assert err.getvalue() == (
        "slurm-stack[drain-node]: error: DRAIN_WAIT_SECONDS is not a whole number of seconds: "
        "'soon'\n"
    )


STAND_IN = """#!/bin/sh
MARK=slurm-stack:update-to=2222222222
printf '%s|%s\\n' "$(basename "$0") $*" "$SLURM_CONF" >> "{calls}"
case "$(basename "$0") $1 $2" in
  "scontrol -o show") echo "NodeName=$4 State=ALLOCATED" ;;
  "scontrol show node") printf 'NodeName=%s\\n   Comment=%s\\n' "$3" "$MARK" ;;
  "squeue -h -w") echo 41 ;;
  "scontrol requeue 41") exit 1 ;;
esac
exit 0
"""


def test_healthcheck_drain_node_runs_the_hook_with_slurmds_config(tmp_path: Path) -> None:
    """The `healthcheck` program as the entrypoint execs it, with stand-in Slurm commands."""
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "squeue", "scancel"):
        script = bin_dir / name
        script.write_text(STAND_IN.format(calls=calls))
        script.chmod(0o755)
    environ = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURMD_SPOOL": str(tmp_path / "spool"),
        "DRAIN_POLICY": "cancel",
        "DRAIN_WAIT_SECONDS": "300",
        "UPDATE_POLICY": "requeue",
        "UPDATE_WAIT_SECONDS": "0",
        "POD_TEMPLATE_HASH": "1111111111",
        "DRAIN_CLEANUP_SECONDS": "5",
    }
    ran = subprocess.run(
        [sys.executable, str(HEALTHCHECKS_DIR / "healthcheck"), "drain-node"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    node = os.uname().nodename
    assert ran.returncode == 0, ran.stderr
    why = f"node {node} was updated to pod template 2222222222 after the pool's 0s wait"
    assert ran.stderr.splitlines() == [
        f"slurm-stack[drain-node]: {line}"
        for line in [
            "an update to pod template 2222222222: policy requeue, wait 0",
            f"jobs still on {node} after 0s: 41; policy requeue",
            f"cancelled job 41: {CANNOT_REQUEUE}",
            f"deleted node {node}",
        ]
    ]
    conf = f"{tmp_path}/spool/conf-cache/slurm.conf"
    assert calls.read_text().splitlines() == [
        f"{line}|{conf}"
        for line in [
            f"scontrol -o show node {node}",
            f"scontrol show node {node}",
            f"scontrol update NodeName={node} State=DRAIN "
            "Reason=k8s: pod updating to template 2222222222",
            f"squeue -h -w {node} -o %i",
            f"squeue -h -w {node} -o %i",
            "scontrol requeue 41",
            f"scontrol update JobId=41 AdminComment=slurm-stack: {CANNOT_REQUEUE}: {why}",
            "scancel 41",
            f"scontrol delete NodeName={node}",
        ]
    ]
