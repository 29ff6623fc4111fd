"""Kubernetes node labels as a Slurm node's switch and features: what the node-state
controller wants for each node of a pool with ``switchLabel`` or ``labelFeatures``.

Pure functions of the pool's settings (``NODE_STATE_POOLS``, rendered by
``slurm_stack/k8s/node_state.py``) and the Kubernetes node's labels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .drain import K8S_PREFIX

# Features that start with this are the controller's (slurm_stack.naming.LABEL_FEATURE_PREFIX):
# it adds and removes them; every other feature of the node is left as it is.
LABEL_FEATURE_PREFIX = "k8s-"
# A Kubernetes label value (letters, digits, '-', '_', '.'; alphanumeric at both ends),
# which Slurm takes as a switch name or a feature as it is.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
# topology.conf's topology is named "default" (Slurm's topology guide, "Dynamic Topology").
TOPOLOGY_NAME = "default"


@dataclass(frozen=True)
class PoolLabels:
    """Which labels a pool's nodes take their switch and features from."""

    switch_label: str | None = None
    root_switch: str | None = None
    features: Mapping[str, str] = field(default_factory=dict)
    """Feature prefix (``k8s-zone-``) -> label key; the feature is the prefix and the value."""

    @classmethod
    def from_json(cls, text: str) -> dict[str, PoolLabels]:
        """NODE_STATE_POOLS, by pool name; raises ValueError on a malformed value."""
        try:
            document = json.loads(text or "{}")
        except ValueError as exc:
            raise ValueError(f"NODE_STATE_POOLS is not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise ValueError("NODE_STATE_POOLS must be a JSON object")
        pools = {}
        for name, settings in document.items():
            features = settings.get("features") or {}
            if not all(p.startswith(LABEL_FEATURE_PREFIX) for p in features):
                raise ValueError(f"NODE_STATE_POOLS: {name}'s features must start with k8s-")
            pools[name] = cls(settings.get("switchLabel"), settings.get("rootSwitch"), features)
        return pools


@dataclass(frozen=True)
class Placement:
    """Where a Slurm node belongs by its Kubernetes node's labels."""

    features: tuple[str, ...]
    """The ``k8s-`` features it should have, sorted."""
    topology: str | None
    """Its ``Topology=`` value, or None when its pool's switch is not a label's."""
    problem: str | None
    """A ``k8s:`` drain reason when the switch label is missing or no switch name."""


def placement(pool: PoolLabels, node_name: str, labels: Mapping[str, str]) -> Placement:
    """What ``labels`` of Kubernetes node ``node_name`` make of a node of ``pool``."""
    features = sorted(
        f"{prefix}{labels[key]}"
        for prefix, key in pool.features.items()
        if _LABEL_VALUE.fullmatch(labels.get(key, ""))
    )
    topology = problem = None
    if pool.switch_label:
        switch = labels.get(pool.switch_label)
        if switch is None:
            problem = f"{K8S_PREFIX} node {node_name} has no label {pool.switch_label}"
        elif not _LABEL_VALUE.fullmatch(switch) or switch == pool.root_switch:
            problem = (
                f"{K8S_PREFIX} node {node_name} label {pool.switch_label}:'{switch}' is no "
                "leaf switch name"
            )
        else:
            # The leaf is made under the root if topology.conf does not declare it.
            topology = f"{TOPOLOGY_NAME}:{pool.root_switch}:{switch}"
    return Placement(tuple(features), topology, problem)


def merged_features(current: Iterable[str], wanted: Iterable[str]) -> list[str]:
    """The node's features with its ``k8s-`` ones replaced by ``wanted``, order kept."""
    kept = [f for f in current if not f.startswith(LABEL_FEATURE_PREFIX)]
    return kept + sorted(set(wanted))
