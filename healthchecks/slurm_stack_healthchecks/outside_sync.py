"""The reconfigure Job's sync of hosts outside Kubernetes (externalNodes, docs/hybrid.md).

A Slurm node whose name is not one of the cluster's pods' (`<cluster>-…`) is an outside
host's. One that no outside pool declares any more (a host taken out of the stack while its
slurmd still runs) leaves Slurm: it is deleted at once when no job runs there; otherwise it
is drained (`outside: not in the stack`), so that nothing new starts there while its jobs run
to their end, and a later sync deletes it. An admin's drain reason is left as it is.

`outside.json` beside slurm.conf lists the declared hosts; without it none is declared (a
stack without externalNodes). slurm.conf's ClusterName gives the pods' prefix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .elastic import Log, NodeRecord, Slurm
from .runner import CommandError

CONFIG_FILE = "outside.json"
REASON = "outside: not in the stack"
# State flags of a node where a job runs or is ending.
BUSY_FLAGS = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
_CLUSTER_NAME = re.compile(r"^\s*ClusterName\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)

Action = Literal["delete", "drain", "wait"]


@dataclass(frozen=True)
class DeclaredHosts:
    """The cluster's name and the hosts its outside pools declare."""

    cluster: str
    hosts: frozenset[str]

    @classmethod
    def beside(cls, slurm_conf: str) -> DeclaredHosts:
        """From slurm.conf and the outside.json beside it (absent: no host declared)."""
        conf = Path(slurm_conf)
        found = _CLUSTER_NAME.search(conf.read_text(encoding="utf-8"))
        if found is None:
            raise ValueError(f"{conf}: no ClusterName")
        path = conf.parent / CONFIG_FILE
        data: Mapping[str, object] = (
            json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        )
        hosts = data.get("hosts", [])
        if not isinstance(hosts, list):
            raise ValueError(f"{path}: hosts is not a list")
        return cls(found[1], frozenset(str(host) for host in hosts))

    def undeclared(self, nodes: Iterable[NodeRecord]) -> list[NodeRecord]:
        """The nodes that are neither the cluster's pods nor declared hosts."""
        prefix = f"{self.cluster}-"
        return [n for n in nodes if not n.name.startswith(prefix) and n.name not in self.hosts]


def action_for(node: NodeRecord) -> Action:
    """What the sync does to an undeclared node: delete an idle one; drain a busy one (once)."""
    if not node.flags & BUSY_FLAGS:
        return "delete"
    return "wait" if "DRAIN" in node.flags else "drain"


def sync_outside_hosts(declared: DeclaredHosts, slurm: Slurm, log: Log) -> list[str]:
    """Act on every undeclared node; the failures."""
    failures = []
    for node in declared.undeclared(slurm.nodes()):
        action = action_for(node)
        try:
            if action == "delete":
                slurm.delete(f"NodeName={node.name}")
                log(f"deleted node {node.name}: no outside pool declares it")
            elif action == "drain":
                slurm.update(f"NodeName={node.name}", "State=DRAIN", f"Reason={REASON}")
                log(f"drained node {node.name}: no outside pool declares it; its jobs run on")
        except CommandError as exc:
            failures.append(f"node {node.name}: {exc}")
    return failures
