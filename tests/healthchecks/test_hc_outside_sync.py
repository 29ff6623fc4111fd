"""The reconfigure Job's sync of outside hosts (outside_sync.py): which nodes it touches and
what it does to each, against a scripted Slurm."""

from collections.abc import Sequence
from pathlib import Path

import pytest
from slurm_stack_healthchecks.elastic import NodeRecord, Slurm
from slurm_stack_healthchecks.outside_sync import (
    REASON,
    DeclaredHosts,
    action_for,
    sync_outside_hosts,
)
from slurm_stack_healthchecks.runner import CommandResult


def node(name: str, state: str) -> NodeRecord:
    return NodeRecord(name, frozenset(state.split("+")))


@pytest.mark.parametrize(
    ("state", "action"),
    [
        ("IDLE", "delete"),
        ("DOWN+NOT_RESPONDING", "delete"),
        ("IDLE+DRAIN", "delete"),
        ("ALLOCATED", "drain"),
        ("MIXED", "drain"),
        ("IDLE+COMPLETING", "drain"),
        ("ALLOCATED+DRAIN", "wait"),
    ],
)
def test_an_idle_node_goes_and_a_busy_one_drains_once(state: str, action: str) -> None:
    assert action_for(node("bm1", state)) == action


def test_only_undeclared_nodes_that_are_no_pods_are_touched() -> None:
    declared = DeclaredHosts("prod", frozenset({"bm2"}))
    nodes = [node(n, "IDLE") for n in ("prod-cpu-0", "prod-old-pool-3", "bm1", "bm2")]
    assert [n.name for n in declared.undeclared(nodes)] == ["bm1"]


def test_the_declared_hosts_are_read_beside_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("# x\nClusterName=prod\nSlurmctldPort=6817\n")
    assert DeclaredHosts.beside(str(conf)) == DeclaredHosts("prod", frozenset())
    (tmp_path / "outside.json").write_text('{"hosts": ["bm1", "bm2"]}\n')
    assert DeclaredHosts.beside(str(conf)).hosts == {"bm1", "bm2"}
    conf.write_text("SlurmctldPort=6817\n")
    with pytest.raises(ValueError, match="no ClusterName"):
        DeclaredHosts.beside(str(conf))


class ScriptedSlurm:
    def __init__(self, listing: str, failing: str = "") -> None:
        self.listing, self.failing, self.commands = listing, failing, []

    def __call__(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        self.commands.append(list(argv))
        if self.failing and self.failing in " ".join(argv):
            return CommandResult(tuple(argv), 1, "", "slurm_delete_node error: Invalid node name")
        if argv[:3] == ["scontrol", "-o", "show"]:
            return CommandResult(tuple(argv), 0, self.listing, "")
        return CommandResult(tuple(argv), 0, "", "")


LISTING = (
    "NodeName=prod-cpu-0 Arch=x86_64 State=IDLE Weight=1\n"
    "NodeName=bm1 Arch=x86_64 State=IDLE Weight=1\n"
    "NodeName=bm3 Arch=x86_64 State=ALLOCATED Weight=1\n"
    "NodeName=bm2 Arch=x86_64 State=MIXED Weight=1\n"
)


def test_the_sync_deletes_the_idle_host_and_drains_the_busy_one() -> None:
    scripted, said = ScriptedSlurm(LISTING), []
    declared = DeclaredHosts("prod", frozenset({"bm2"}))
    assert sync_outside_hosts(declared, Slurm(scripted), said.append) == []
    changes = [c for c in scripted.commands if c[:3] != ["scontrol", "-o", "show"]]
    assert changes == [
        ["scontrol", "delete", "NodeName=bm1"],
        ["scontrol", "update", "NodeName=bm3", "State=DRAIN", f"Reason={REASON}"],
    ]
    assert said == [
        "deleted node bm1: no outside pool declares it",
        "drained node bm3: no outside pool declares it; its jobs run on",
    ]


def test_a_failure_is_reported_and_the_others_still_act() -> None:
    scripted = ScriptedSlurm(LISTING, failing="delete NodeName=bm1")
    failures = sync_outside_hosts(DeclaredHosts("prod", frozenset()), Slurm(scripted), print)
    assert failures == ["node bm1: scontrol: slurm_delete_node error: Invalid node name"]
    assert ["scontrol", "update", "NodeName=bm3", "State=DRAIN", f"Reason={REASON}"] in (
        scripted.commands
    )


def test_the_program_and_the_pods_name_the_same_files() -> None:
    from slurm_stack_healthchecks import outside_sync

    from slurm_stack import naming, paths

    assert naming.OUTSIDE_CONFIG_FILE == outside_sync.CONFIG_FILE
    plugin = (Path(__file__).resolve().parents[2] / "chroot_plugin" / "spank_chroot.c").read_text()
    assert f'#define HOST_ROOT_MARKER "{paths.OUTSIDE_HOST_ROOT_MARKER}"' in plugin
