"""Kubernetes node state reaches Slurm: the node-state controller.

Every interval it lists the Kubernetes nodes and the cluster's worker pods (a worker pod is
a Slurm node of the same name), and for each worker pod on a node:

* the node is cordoned (``spec.unschedulable``) or not Ready: drain the Slurm node with
  ``k8s: node <name> cordoned`` or ``k8s: node <name> NotReady``;
* the node is schedulable and Ready: resume the Slurm node if a ``k8s:`` reason drained it.

A Slurm node drained, downed or failed with any other reason (an admin's, a health
check's) is never touched (:func:`.drain.decide` with :attr:`.drain.Owner.K8S`). A pod not
yet scheduled, or whose node the API no longer lists, is left alone: its Slurm node comes
and goes with the pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .drain import K8S_PREFIX, Action, Owner
from .kube_api import KubeApi, KubeApiError
from .logline import format_line
from .node_actions import decide_and_apply
from .runner import Runner

TOOL = "node-state"
# Touched after every pass: the pod's liveness probe restarts a controller whose loop hangs.
HEARTBEAT_FILE = "/tmp/node-state.alive"


@dataclass(frozen=True)
class KubeNode:
    """What decides a Kubernetes node's Slurm nodes' fate."""

    name: str
    cordoned: bool
    ready: bool

    @property
    def problem(self) -> str | None:
        """``cordoned``, ``NotReady`` or None."""
        if self.cordoned:
            return "cordoned"
        return None if self.ready else "NotReady"


def parse_nodes(document: Mapping[str, Any]) -> dict[str, KubeNode]:
    """A NodeList, by node name."""
    nodes = {}
    for item in document.get("items") or []:
        name = item.get("metadata", {}).get("name")
        if not name:
            continue
        conditions = item.get("status", {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        cordoned = bool(item.get("spec", {}).get("unschedulable"))
        nodes[name] = KubeNode(name, cordoned, ready)
    return nodes


def parse_pods(document: Mapping[str, Any]) -> dict[str, str]:
    """A PodList: each scheduled pod's node, by pod name."""
    placed = {}
    for item in document.get("items") or []:
        name = item.get("metadata", {}).get("name")
        node = item.get("spec", {}).get("nodeName")
        if name and node:
            placed[name] = node
    return placed


def wanted_reasons(nodes: Mapping[str, KubeNode], pods: Mapping[str, str]) -> dict[str, str | None]:
    """For each worker pod on a listed node: the reason to drain its Slurm node with, or
    None when its node is fine."""
    wanted: dict[str, str | None] = {}
    for pod, node_name in sorted(pods.items()):
        node = nodes.get(node_name)
        if node is None:
            continue
        problem = node.problem
        wanted[pod] = f"{K8S_PREFIX} node {node_name} {problem}" if problem else None
    return wanted


@dataclass(frozen=True)
class NodeStateConfig:
    """From the Deployment's environment."""

    namespace: str
    pod_selector: str
    interval_seconds: float
    timeout_seconds: float = 10.0
    heartbeat_file: str = HEARTBEAT_FILE

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> NodeStateConfig:
        """Raises ValueError naming a missing or bad variable."""
        try:
            namespace = environ["NODE_STATE_NAMESPACE"]
            selector = environ["NODE_STATE_POD_SELECTOR"]
            interval = float(environ.get("NODE_STATE_INTERVAL_SECONDS", "10"))
        except KeyError as exc:
            raise ValueError(f"{exc.args[0]} is not set") from None
        if interval <= 0:
            raise ValueError("NODE_STATE_INTERVAL_SECONDS must be a positive number")
        return cls(namespace, selector, interval)


def sync_once(
    config: NodeStateConfig, api: KubeApi, runner: Runner, log: Callable[[str], None]
) -> bool:
    """One pass; logs a line per action or error. Whether every step succeeded."""
    try:
        nodes = parse_nodes(api.get("/api/v1/nodes"))
        pods = parse_pods(
            api.get(
                f"/api/v1/namespaces/{config.namespace}/pods",
                {"labelSelector": config.pod_selector},
            )
        )
    except KubeApiError as exc:
        log(format_line(TOOL, [("result", "error"), ("error", exc)]))
        return False
    ok = True
    for slurm_node, wanted in wanted_reasons(nodes, pods).items():
        decision, error = decide_and_apply(
            runner, slurm_node, wanted, Owner.K8S, config.timeout_seconds, dry_run=False
        )
        if decision.action is not Action.NONE or error:
            fields = [
                ("node", slurm_node),
                ("kube_node", pods[slurm_node]),
                ("action", decision.action.value),
                ("reason", decision.reason),
                ("why", decision.why),
                ("error", error),
            ]
            log(format_line(TOOL, fields))
        ok = ok and error is None
    return ok


def run_forever(
    config: NodeStateConfig,
    api: KubeApi,
    runner: Runner,
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """:func:`sync_once` every interval, until the pod stops."""
    log(format_line(TOOL, [("result", "started"), ("interval", config.interval_seconds)]))
    while True:
        sync_once(config, api, runner, log)
        with open(config.heartbeat_file, "w"):
            pass
        sleep(config.interval_seconds)
