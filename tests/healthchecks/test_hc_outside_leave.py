"""The stop hook of an outside host's slurmd (outside_leave.py): decisions as tables, and the
whole leave against a scripted Slurm."""

from collections.abc import Sequence

import pytest
from slurm_stack_healthchecks.outside_leave import (
    REASON,
    Node,
    Policy,
    SlurmError,
    how_to_end,
    leave,
    policy_acts,
)


@pytest.mark.parametrize(
    ("policy", "waited", "acts"),
    [
        (Policy("wait", None), 10**6, False),
        (Policy("requeue", 300), 299.9, False),
        (Policy("requeue", 300), 300, True),
        (Policy("cancel", 0), 0, True),
        (Policy("requeue", None), 10**6, False),
    ],
)
def test_the_policy_acts_only_once_its_wait_is_over(policy, waited, acts) -> None:
    assert policy_acts(policy, waited) is acts


@pytest.mark.parametrize(
    ("policy", "requeued", "what"),
    [
        ("requeue", True, "requeued"),
        ("requeue", False, "cancelled: Slurm cannot requeue it (not a batch job, or --no-requeue)"),
        ("cancel", False, "cancelled (drain policy cancel)"),
    ],
)
def test_what_ended_a_job_is_said(policy, requeued, what) -> None:
    assert how_to_end(Policy(policy, 0), requeued) == what


class ScriptedSlurm:
    """squeue answers from a list (an exception: the query fails); records every command."""

    def __init__(
        self, queues: list[object], requeue_fails: bool = False, unknown: bool = False
    ) -> None:
        self.queues, self.requeue_fails, self.commands = queues, requeue_fails, []
        self.unknown = unknown

    def __call__(self, argv: Sequence[str]) -> str:
        self.commands.append(list(argv))
        if argv[0] == "squeue":
            answer = self.queues.pop(0) if len(self.queues) > 1 else self.queues[0]
            if isinstance(answer, Exception):
                raise answer
            return "".join(f"{job}\n" for job in answer)  # type: ignore[union-attr]
        if argv[:3] == ["scontrol", "show", "node"] and self.unknown:
            raise SlurmError(f"Node {argv[3]} not found")
        if argv[:2] == ["scontrol", "requeue"] and self.requeue_fails:
            raise SlurmError("Requested operation is presently disabled")
        return ""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run_leave(slurm: ScriptedSlurm, policy: Policy) -> tuple[bool, list[str]]:
    clock, said = Clock(), []
    done = leave(Node("bm1", slurm), policy, said.append, clock, clock.sleep)
    return done, said


def test_an_idle_host_drains_and_is_deleted() -> None:
    slurm = ScriptedSlurm([[]])
    assert run_leave(slurm, Policy("requeue", 300))[0]
    assert slurm.commands[1] == [
        "scontrol",
        "update",
        "NodeName=bm1",
        "State=DRAIN",
        f"Reason={REASON}",
    ]
    assert slurm.commands[-1] == ["scontrol", "delete", "NodeName=bm1"]


def test_a_failed_query_is_not_no_jobs() -> None:
    # slurmctld does not answer twice, then a job runs until it ends by itself.
    slurm = ScriptedSlurm(
        [SlurmError("Unable to contact slurm controller"), SlurmError("x"), ["7"], ["7"], []]
    )
    done, said = run_leave(slurm, Policy("wait", None))
    assert done
    assert sum("cannot list the jobs" in line for line in said) == 2
    assert not [c for c in slurm.commands if c[0] == "scancel" or c[1:2] == ["requeue"]]


def test_jobs_left_after_the_wait_are_requeued_with_a_comment() -> None:
    slurm = ScriptedSlurm([["7"]] * 5 + [[]])
    done, said = run_leave(slurm, Policy("requeue", 3))
    assert done and "job 7: requeued" in said
    assert ["scontrol", "requeue", "7"] in slurm.commands
    comment = next(c for c in slurm.commands if c[:2] == ["scontrol", "update"] and "JobId=7" in c)
    assert comment[-1] == "AdminComment=slurm-stack: requeued: host bm1 left the cluster"
    assert not [c for c in slurm.commands if c[0] == "scancel"]


def test_a_job_slurm_cannot_requeue_is_cancelled() -> None:
    slurm = ScriptedSlurm([["8"]] * 3 + [[]], requeue_fails=True)
    done, said = run_leave(slurm, Policy("requeue", 0))
    assert done and ["scancel", "8"] in slurm.commands
    assert any(line.startswith("job 8: cancelled: Slurm cannot requeue it") for line in said)


def test_the_wait_policy_never_ends_a_job() -> None:
    slurm = ScriptedSlurm([["9"]] * 50 + [[]])
    assert run_leave(slurm, Policy("wait", None))[0]
    assert not [c for c in slurm.commands if c[0] == "scancel" or c[1:2] == ["requeue"]]


def test_a_node_slurm_does_not_know_leaves_at_once_and_changes_nothing() -> None:
    slurm = ScriptedSlurm([["7"]], unknown=True)
    done, said = run_leave(slurm, Policy("requeue", 0))
    assert done and said == ["Slurm has no node bm1: nothing to leave"]
    assert slurm.commands == [["scontrol", "show", "node", "bm1"]]


def test_a_failed_lookup_is_not_an_unknown_node() -> None:
    class Flaky(ScriptedSlurm):
        def __call__(self, argv):  # type: ignore[no-untyped-def]
            if argv[:3] == ["scontrol", "show", "node"] and not self.commands:
                self.commands.append(list(argv))
                raise SlurmError("Unable to contact slurm controller (connect failure)")
            return super().__call__(argv)

    slurm = Flaky([[]])
    done, said = run_leave(slurm, Policy("requeue", 0))
    assert done and said[0].startswith("cannot drain bm1 yet")
    assert slurm.commands[-1] == ["scontrol", "delete", "NodeName=bm1"]
