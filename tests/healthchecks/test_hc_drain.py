"""The drain decision (every state, pass and fail, both owners), drain reasons, scontrol I/O."""

import pytest
from slurm_stack_healthchecks.drain import (
    MAX_REASON_LENGTH,
    Action,
    Owner,
    decide,
    drain_reason,
)
from slurm_stack_healthchecks.result import CheckResult
from slurm_stack_healthchecks.runner import CommandTimeout
from slurm_stack_healthchecks.slurm_node import (
    NodeError,
    NodeNotRegistered,
    NodeState,
    drain_node,
    get_node_state,
    get_node_states,
    parse_node_oneliner,
    place_node,
    resume_node,
)

from tests.healthchecks.hc_helpers import FakeRunner, done, fixture

FAIL = "healthcheck: gpu_count 7/8"
OTHER_FAIL = "healthcheck: gpu_ecc gpu4 uncorrectable 2+remap pending"
NCCL_FAIL = "healthcheck: nccl busbw 200.0<350 GB/s"

UNKNOWN = None
IDLE = NodeState("IDLE", None)
ALLOCATED = NodeState("ALLOCATED", None)
OURS = NodeState("IDLE+DRAIN", FAIL)
OURS_DRAINING = NodeState("MIXED+DRAIN", OTHER_FAIL)
ADMIN = NodeState("IDLE+DRAIN", "replacing PSU, ticket 4711")
NCCL = NodeState("IDLE+DRAIN", NCCL_FAIL)
DOWN = NodeState("DOWN+NOT_RESPONDING", "Not responding")
DRAINED_NO_REASON = NodeState("IDLE+DRAIN", None)
DOWN_OURS = NodeState("DOWN", FAIL)

N, D, R = Action.NONE, Action.DRAIN, Action.RESUME


@pytest.mark.parametrize(
    ("node", "on_pass", "on_fail"),
    [
        (UNKNOWN, N, N),  # cannot rule out an admin's drain
        (IDLE, N, D),
        (ALLOCATED, N, D),
        (OURS, R, N),  # failing with the same reason: already done
        (OURS_DRAINING, R, D),  # failing with a new reason: the reason is updated
        (ADMIN, N, N),
        (NCCL, N, N),  # the benchmark's drain is not the quick checks' to lift
        (DOWN, N, N),
        (DRAINED_NO_REASON, N, N),
        (DOWN_OURS, N, D),  # ours but not drained: never "resume" a node that is not drained
    ],
)
def test_quick_check_decisions(node: NodeState | None, on_pass: Action, on_fail: Action) -> None:
    passed = decide(node, None, Owner.QUICK)
    failed = decide(node, FAIL, Owner.QUICK)
    assert (passed.action, failed.action) == (on_pass, on_fail)
    assert passed.reason is None
    assert failed.reason == (FAIL if on_fail is D else None)
    assert passed.why and failed.why


@pytest.mark.parametrize(
    ("node", "on_pass", "on_fail"),
    [
        (UNKNOWN, N, N),
        (IDLE, N, D),
        (OURS, N, N),  # the quick checks' drain is not the benchmark's to lift or overwrite
        (ADMIN, N, N),
        (NCCL, R, N),
        (NodeState("IDLE+DRAIN", "healthcheck: nccl 3 wrong results"), R, D),
        (DOWN, N, N),
    ],
)
def test_nccl_decisions(node: NodeState | None, on_pass: Action, on_fail: Action) -> None:
    assert decide(node, None, Owner.NCCL).action is on_pass
    assert decide(node, NCCL_FAIL, Owner.NCCL).action is on_fail


def test_decisions_say_why() -> None:
    assert decide(ADMIN, FAIL, Owner.QUICK).why == (
        "held by other reason: replacing PSU, ticket 4711"
    )
    assert decide(OURS, FAIL, Owner.QUICK).why == "already drained with this reason"
    assert decide(OURS, None, Owner.QUICK).why == "checks pass again"
    assert decide(UNKNOWN, FAIL, Owner.QUICK).why == "node state unknown"


def test_ownership_by_prefix() -> None:
    assert Owner.QUICK.owns("healthcheck: disk /tmp 1.0%<5%")
    assert not Owner.QUICK.owns("healthcheck: nccl busbw 1<2 GB/s")
    assert not Owner.QUICK.owns("Healthcheck: disk")  # the prefix is exact
    assert not Owner.QUICK.owns("admin: healthcheck: disk")
    assert not Owner.QUICK.owns(None)
    assert Owner.NCCL.owns("healthcheck: nccl busbw 1<2 GB/s")
    assert not Owner.NCCL.owns("healthcheck: gpu_count 7/8")


def _results(*texts: str) -> list[CheckResult]:
    results = [CheckResult("jail", True)]
    for text in texts:
        name, _, detail = text.partition(" ")
        results.append(CheckResult.failed(name, detail))
    return results


def test_drain_reasons() -> None:
    assert drain_reason(_results()) is None
    assert drain_reason(_results("gpu_count 7/8")) == "healthcheck: gpu_count 7/8"
    assert drain_reason(_results("gpu_count 7/8", "gpu_xid 79@0000:5d:00")) == (
        "healthcheck: gpu_count 7/8; gpu_xid 79@0000:5d:00"
    )
    # Our separator, key=value and quotes never leak in from a detail.
    assert drain_reason(_results('munge x;y="z"')) == "healthcheck: munge x,y:'z'"


def test_long_reasons_are_kept_short() -> None:
    failures = [f"check{i} something rather long went wrong here" for i in range(6)]
    reason = drain_reason(_results(*failures))
    assert reason is not None
    assert len(reason) <= MAX_REASON_LENGTH
    assert reason.startswith("healthcheck: check0 something")
    assert reason.endswith("; +4 more")
    one_huge = drain_reason(_results("gpu_ecc " + "x" * 300))
    assert one_huge is not None
    assert len(one_huge) == MAX_REASON_LENGTH


@pytest.mark.parametrize(
    ("name", "state", "reason"),
    [
        ("scontrol-node-idle.txt", "IDLE", None),
        ("scontrol-node-drained-ours.txt", "IDLE+DRAIN", "healthcheck: gpu_count 7/8"),
        ("scontrol-node-draining-ours.txt", "MIXED+DRAIN", OTHER_FAIL),
        ("scontrol-node-drained-admin.txt", "IDLE+DRAIN", "replacing PSU, ticket 4711"),
        ("scontrol-node-drained-nccl.txt", "IDLE+DRAIN", NCCL_FAIL),
        ("scontrol-node-down.txt", "DOWN+NOT_RESPONDING", "Not responding"),
    ],
)
def test_oneliner_parser_on_recorded_output(name: str, state: str, reason: str | None) -> None:
    node = parse_node_oneliner(fixture(name))
    assert (node.state, node.reason) == (state, reason)
    assert node.features == ("gpu", "h100")  # every recording is of one h100 node


def test_oneliner_parser_edge_cases() -> None:
    base = "NodeName=n1 State=IDLE+DRAIN ThreadsPerCore=2"
    # Fields after the reason, and a bracket inside it.
    parsed = parse_node_oneliner(
        f"{base} Reason=disk [sda] dying soon [root@2026-11-22T08:00:00] Comment=rack 4"
    )
    assert parsed.reason == "disk [sda] dying soon"
    # No [user@time] suffix: the reason stops at the next Key=.
    assert parse_node_oneliner(f"{base} Reason=bad fan two Comment=x").reason == "bad fan two"
    assert parse_node_oneliner(f"{base} Reason=bad fan two").reason == "bad fan two"
    # Not fooled by keys that end in "State".
    assert parse_node_oneliner("NodeName=n1 MyState=X State=MIXED").state == "MIXED"
    assert parse_node_oneliner(f"{base}").drained
    assert not parse_node_oneliner("NodeName=n1 State=IDLE+NOT_RESPONDING").drained
    with pytest.raises(NodeError, match="no State="):
        parse_node_oneliner("Node n9 not found")


def test_scontrol_calls() -> None:
    runner = FakeRunner(
        {
            ("scontrol", "--oneliner", "show", "node"): done(fixture("scontrol-node-idle.txt")),
            ("scontrol", "update"): done(),
        }
    )
    assert get_node_state(runner, "dev-gpu-3", 5) == NodeState("IDLE", None, ("gpu", "h100"))
    drain_node(runner, "dev-gpu-3", FAIL, 5)
    resume_node(runner, "dev-gpu-3", 5)
    place_node(runner, "dev-gpu-3", ["gpu", "k8s-zone-a"], "default:spine:leaf-a", 5)
    place_node(runner, "dev-gpu-3", None, None, 5)  # nothing to change: no call
    assert runner.argvs() == [
        ("scontrol", "--oneliner", "show", "node", "dev-gpu-3"),
        ("scontrol", "update", "NodeName=dev-gpu-3", "State=DRAIN", f"Reason={FAIL}"),
        ("scontrol", "update", "NodeName=dev-gpu-3", "State=RESUME"),
        (
            "scontrol",
            "update",
            "NodeName=dev-gpu-3",
            "AvailableFeatures=gpu,k8s-zone-a",
            "ActiveFeatures=gpu,k8s-zone-a",
            "Topology=default:spine:leaf-a",
        ),
    ]


def test_every_node_is_read_with_one_call() -> None:
    idle = fixture("scontrol-node-idle.txt").strip()
    drained = fixture("scontrol-node-drained-admin.txt").strip().replace("dev-gpu-3", "dev-gpu-4")
    runner = FakeRunner({("scontrol", "--oneliner", "show", "nodes"): done(f"{idle}\n{drained}\n")})
    states = get_node_states(runner, 5)
    assert sorted(states) == ["dev-gpu-3", "dev-gpu-4"]
    assert states["dev-gpu-4"].reason == "replacing PSU, ticket 4711"
    assert not states["dev-gpu-3"].drained


def test_scontrol_errors() -> None:
    missing = FakeRunner({("scontrol",): done("", 1, "Node dev-gpu-9 not found\n")})
    with pytest.raises(NodeNotRegistered, match="Node dev-gpu-9 not found"):
        get_node_state(missing, "dev-gpu-9", 5)
    refused = FakeRunner({("scontrol",): done("", 1, "Invalid user for SlurmUser\n")})
    with pytest.raises(NodeError, match="exited 1: Invalid user"):
        get_node_state(refused, "dev-gpu-9", 5)
    with pytest.raises(NodeError, match="scontrol update exited 1"):
        drain_node(missing, "dev-gpu-9", FAIL, 5)
    hung = FakeRunner({("scontrol",): CommandTimeout(["scontrol"], 5)})
    with pytest.raises(NodeError, match="timeout after 5s"):
        resume_node(hung, "n1", 5)
    with pytest.raises(NodeError, match="not found"):
        get_node_state(FakeRunner(), "n1", 5)
