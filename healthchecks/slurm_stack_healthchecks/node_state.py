"""Kubernetes node state reaches Slurm: the node-state controller.

Every interval it lists the Kubernetes nodes and the cluster's worker pods (a worker pod is
a Slurm node of the same name) and reads every Slurm node with one ``scontrol show nodes``.
For each worker pod on a node:

* the pod's pool takes features or its switch from node labels (``NODE_STATE_POOLS``,
  :mod:`.node_labels`): set the node's ``k8s-`` features and ``Topology=`` to what the
  labels say, leaving its other features alone;
* the node is cordoned (``spec.unschedulable``) or not Ready: drain the Slurm node with
  ``k8s: node <name> cordoned`` or ``k8s: node <name> NotReady``;
* its switch label is missing or names no switch: drain it with a ``k8s:`` reason naming
  the label;
* otherwise: resume the Slurm node if a ``k8s:`` reason drained it (a node whose switch
  comes from a label registers drained with one, and is resumed once placed).

A Slurm node drained, downed or failed with any other reason (an admin's, a health
check's) is never touched (:func:`.drain.decide` with :attr:`.drain.Owner.K8S`). A pod not
yet scheduled, or whose node the API no longer lists, is left alone: its Slurm node comes
and goes with the pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .drain import K8S_PREFIX, Action, Owner
from .kube_api import KubeApi, KubeApiError
from .logline import format_line
from .node_actions import decide_and_apply
from .node_labels import PoolLabels, merged_features, placement
from .runner import Runner
from .slurm_node import NodeError, NodeState, get_node_states, place_node

TOOL = "node-state"
# Touched after every pass: the pod's liveness probe restarts a controller whose loop hangs.
HEARTBEAT_FILE = "/tmp/node-state.alive"


@dataclass(frozen=True)
class KubeNode:
    """What decides a Kubernetes node's Slurm nodes' fate."""

    name: str
    cordoned: bool
    ready: bool
    labels: Mapping[str, str] = field(default_factory=dict)

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
        labels = item.get("metadata", {}).get("labels") or {}
        nodes[name] = KubeNode(name, cordoned, ready, labels)
    return nodes


@dataclass(frozen=True)
class PlacedPod:
    """A scheduled worker pod: its Kubernetes node and its pool."""

    node: str
    pool: str | None = None


def parse_pods(document: Mapping[str, Any], pool_label: str = "") -> dict[str, PlacedPod]:
    """A PodList: each scheduled pod's node and pool (its ``pool_label``), by pod name."""
    placed = {}
    for item in document.get("items") or []:
        metadata = item.get("metadata", {})
        name = metadata.get("name")
        node = item.get("spec", {}).get("nodeName")
        if name and node:
            placed[name] = PlacedPod(node, (metadata.get("labels") or {}).get(pool_label))
    return placed


def wanted_reasons(
    nodes: Mapping[str, KubeNode],
    pods: Mapping[str, PlacedPod],
    pools: Mapping[str, PoolLabels] | None = None,
) -> dict[str, str | None]:
    """For each worker pod on a listed node: the reason to drain its Slurm node with, or
    None when its node is fine. A cordon or NotReady comes before a label's problem."""
    wanted: dict[str, str | None] = {}
    for pod, placed in sorted(pods.items()):
        node = nodes.get(placed.node)
        if node is None:
            continue
        problem = node.problem
        if problem:
            wanted[pod] = f"{K8S_PREFIX} node {node.name} {problem}"
            continue
        labels = (pools or {}).get(placed.pool or "")
        wanted[pod] = placement(labels, node.name, node.labels).problem if labels else None
    return wanted


@dataclass(frozen=True)
class NodeStateConfig:
    """From the Deployment's environment."""

    namespace: str
    pod_selector: str
    interval_seconds: float
    timeout_seconds: float = 10.0
    heartbeat_file: str = HEARTBEAT_FILE
    pool_label: str = ""
    pools: Mapping[str, PoolLabels] = field(default_factory=dict)

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
        pools = PoolLabels.from_json(environ.get("NODE_STATE_POOLS", ""))
        pool_label = environ.get("NODE_STATE_POOL_LABEL", "")
        if pools and not pool_label:
            raise ValueError("NODE_STATE_POOL_LABEL is not set")
        return cls(namespace, selector, interval, pool_label=pool_label, pools=pools)


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
            ),
            config.pool_label,
        )
    except KubeApiError as exc:
        log(format_line(TOOL, [("result", "error"), ("error", exc)]))
        return False
    try:
        states = get_node_states(runner, config.timeout_seconds)
    except NodeError as exc:
        log(format_line(TOOL, [("result", "error"), ("error", exc)]))
        return False
    ok = True
    for slurm_node, wanted in wanted_reasons(nodes, pods, config.pools).items():
        state = states.get(slurm_node)
        if state is None:
            continue  # not registered yet: the next pass, once it is, acts on it
        placed = pods[slurm_node]
        labels = config.pools.get(placed.pool or "")
        if labels:
            error = _place(runner, slurm_node, state, labels, nodes[placed.node], config, log)
            if error:
                ok = False
                continue  # not resumed before it is where its labels say
        decision, error = decide_and_apply(
            runner, slurm_node, wanted, Owner.K8S, config.timeout_seconds, False, state
        )
        if decision.action is not Action.NONE or error:
            fields = [
                ("node", slurm_node),
                ("kube_node", placed.node),
                ("action", decision.action.value),
                ("reason", decision.reason),
                ("why", decision.why),
                ("error", error),
            ]
            log(format_line(TOOL, fields))
        ok = ok and error is None
    return ok


def _place(
    runner: Runner,
    slurm_node: str,
    state: NodeState,
    labels: PoolLabels,
    node: KubeNode,
    config: NodeStateConfig,
    log: Callable[[str], None],
) -> str | None:
    """Bring the Slurm node's ``k8s-`` features and switch in line with ``node``'s labels;
    the error, if any, after logging what changed."""
    wanted = placement(labels, node.name, node.labels)
    features = merged_features(state.features, wanted.features)
    new_features = features if features != list(state.features) else None
    new_topology = wanted.topology if wanted.topology not in (None, state.topology) else None
    if new_features is None and new_topology is None:
        return None
    error = None
    try:
        place_node(runner, slurm_node, new_features, new_topology, config.timeout_seconds)
    except NodeError as exc:
        error = str(exc)
    fields = [
        ("node", slurm_node),
        ("kube_node", node.name),
        ("action", "place"),
        ("features", ",".join(new_features) if new_features is not None else None),
        ("topology", new_topology),
        ("error", error),
    ]
    log(format_line(TOOL, fields))
    return error


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
