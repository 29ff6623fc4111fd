"""The elastic scaler: Slurm's power saving decides, the pool's StatefulSet carries it out.

slurmctld runs these programs (SuspendProgram, ResumeProgram, ResumeFailProgram) with a
hostlist of nodes, as its SlurmUser, in the controller pod, with SLURM_CONF alone in their
environment. They change each elastic pool's StatefulSet size through the Kubernetes
``scale`` subresource, with the controller's ServiceAccount token.

The rule that makes Slurm and the StatefulSet agree (docs/elastic.md): a StatefulSet adds and
removes pods at its highest ordinals, while Slurm powers down whichever node stayed idle. So
the pool's size is one more than the highest ordinal of a node Slurm keeps powered up (never
below ``minReplicas``). A node Slurm powers down below a busy one keeps its pod ("parked"):
when Slurm powers it up again, its pod is deleted so that the StatefulSet starts a new one
whose slurmd registers, which is what Slurm waits for.

``sync`` runs from the reconfigure Job: it creates the pools' nodes in Slurm as powered-down
dynamic nodes (``State=CLOUD``), one per ordinal up to ``maxReplicas``, with the pool's node
settings, and powers up the ``minReplicas`` nodes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .kube_api import KubeApi, KubeApiError
from .runner import CommandError, Runner

CONFIG_FILE = "elastic.json"
# Written by the controller's entrypoint: slurmctld hands its programs no KUBERNETES_* variables.
API_ADDRESS_FILE = Path("/run/slurm/kube-api")
LOCK_FILE = Path("/run/slurm/elastic.lock")
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
REASON_PREFIX = "elastic: "
FIELD_MANAGER = "slurm-stack-elastic-scaler"
_SCONTROL_TIMEOUT = 30.0
# Slurm's power states (scontrol's State=, flags joined by '+'): a node in one of these is
# one Slurm has given back, or is giving back.
GIVEN_BACK_FLAGS = frozenset({"POWERED_DOWN", "POWERING_DOWN"})
POWER_FLAGS = GIVEN_BACK_FLAGS | {"POWERING_UP"}

Log = Callable[[str], None]


@dataclass(frozen=True)
class ElasticPool:
    """One elastic pool as the scaler sees it."""

    name: str
    stateful_set: str
    min_replicas: int
    max_replicas: int
    node_conf: str
    start_timeout_seconds: int

    @property
    def node_prefix(self) -> str:
        """Node names are the pod names: ``<statefulset>-<ordinal>``."""
        return f"{self.stateful_set}-"

    def node(self, ordinal: int) -> str:
        return f"{self.node_prefix}{ordinal}"

    def ordinal_of(self, node: str) -> int | None:
        """The ordinal of one of this pool's nodes; None for any other name."""
        rest = node.removeprefix(self.node_prefix)
        if rest == node or not rest.isdigit():
            return None
        return int(rest)


@dataclass(frozen=True)
class ElasticConfig:
    """The elastic pools of one cluster (elastic.json, beside slurm.conf)."""

    namespace: str
    pools: tuple[ElasticPool, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ElasticConfig:
        pools = data.get("pools", [])
        if not isinstance(pools, list):
            raise ValueError("elastic.json: pools is not a list")
        return cls(
            str(data["namespace"]),
            tuple(
                ElasticPool(
                    name=str(p["name"]),
                    stateful_set=str(p["statefulSet"]),
                    min_replicas=int(p["minReplicas"]),
                    max_replicas=int(p["maxReplicas"]),
                    node_conf=str(p["nodeConf"]),
                    start_timeout_seconds=int(p["startTimeoutSeconds"]),
                )
                for p in pools
            ),
        )

    @classmethod
    def beside(cls, slurm_conf: str, *, missing_ok: bool = False) -> ElasticConfig:
        """The config in slurm.conf's directory (the controller's ConfigMap); with
        ``missing_ok``, no file is a cluster without elastic pools."""
        path = Path(slurm_conf).parent / CONFIG_FILE
        if missing_ok and not path.exists():
            return cls("", ())
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    def pool_of(self, node: str) -> tuple[ElasticPool, int] | None:
        """The elastic pool a node belongs to and its ordinal; None for other nodes."""
        for pool in self.pools:
            ordinal = pool.ordinal_of(node)
            if ordinal is not None:
                return pool, ordinal
        return None

    def by_pool(self, nodes: Iterable[str]) -> dict[ElasticPool, list[int]]:
        """Nodes grouped by elastic pool, as ordinals; other nodes are left out."""
        grouped: dict[ElasticPool, list[int]] = {}
        for node in nodes:
            if (found := self.pool_of(node)) is not None:
                grouped.setdefault(found[0], []).append(found[1])
        return grouped


@dataclass(frozen=True)
class NodeRecord:
    """A Slurm node as the scaler reads it: its name and state flags."""

    name: str
    flags: frozenset[str]

    @property
    def given_back(self) -> bool:
        """Slurm has powered the node down, or is powering it down."""
        return bool(self.flags & GIVEN_BACK_FLAGS)


_NODE_NAME = re.compile(r"^NodeName=(\S+)")
_STATE = re.compile(r"\bState=(\S+)")


def parse_nodes(text: str) -> list[NodeRecord]:
    """`scontrol -o show node` output: one node per line."""
    records = []
    for line in text.splitlines():
        name, state = _NODE_NAME.search(line), _STATE.search(line)
        if name and state:
            records.append(NodeRecord(name[1], frozenset(state[1].upper().split("+"))))
    return records


class Slurm:
    """The few Slurm commands the scaler runs."""

    def __init__(self, runner: Runner, timeout: float = _SCONTROL_TIMEOUT) -> None:
        self.runner, self.timeout = runner, timeout

    def _run(self, *argv: str) -> str:
        result = self.runner(list(argv), timeout=self.timeout)
        if result.returncode != 0:
            raise CommandError(argv, (result.stderr or result.stdout).strip() or "failed")
        return result.stdout

    def hostnames(self, hostlist: str) -> list[str]:
        return self._run("scontrol", "show", "hostnames", hostlist).split()

    def nodes(self, name: str | None = None) -> list[NodeRecord]:
        """Every node, or the one named."""
        return parse_nodes(self._run("scontrol", "-o", "show", "node", *filter(None, [name])))

    def update(self, *settings: str) -> None:
        self._run("scontrol", "update", *settings)

    def create(self, *settings: str) -> None:
        self._run("scontrol", "create", *settings)

    def delete(self, *settings: str) -> None:
        self._run("scontrol", "delete", *settings)

    def hostlist(self, names: Sequence[str]) -> str:
        """The compressed hostlist of ``names`` (Slurm's own syntax)."""
        return self._run("scontrol", "show", "hostlist", ",".join(names)).strip()

    def reasons(self) -> list[tuple[str, str]]:
        """(node, reason) of every node that has a reason."""
        found = []
        for line in self._run("sinfo", "-h", "-N", "-o", "%N|%E").splitlines():
            name, _, reason = line.partition("|")
            if reason and reason != "none":
                found.append((name, reason))
        return found


def size_to_keep(pool: ElasticPool, nodes: Iterable[NodeRecord], leaving: Iterable[str]) -> int:
    """The pool's size that keeps every node Slurm has not given back: one more than the
    highest such ordinal, at least minReplicas. ``leaving`` are nodes being given back now
    (Slurm marks them before it runs the program; listed in case a record is older)."""
    gone = set(leaving)
    highest = -1
    for node in nodes:
        ordinal = pool.ordinal_of(node.name)
        if ordinal is None or node.given_back or node.name in gone:
            continue
        highest = max(highest, ordinal)
    return max(highest + 1, pool.min_replicas)


def scale_path(namespace: str, stateful_set: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{stateful_set}/scale"


def pod_path(namespace: str, pod: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{pod}"


class Scaler:
    """Carries out Slurm's power decisions on the pools' StatefulSets."""

    def __init__(self, config: ElasticConfig, api: KubeApi, slurm: Slurm, log: Log) -> None:
        self.config, self.api, self.slurm, self.log = config, api, slurm, log

    def size(self, pool: ElasticPool) -> int:
        scale = self.api.get(scale_path(self.config.namespace, pool.stateful_set))
        return int(scale.get("spec", {}).get("replicas", 0))

    def set_size(self, pool: ElasticPool, size: int, why: str) -> None:
        # Its own field manager owns the replica count from then on: Pulumi's server-side
        # apply leaves a field another manager owns out of its patch (docs/deploy.md).
        path = scale_path(self.config.namespace, pool.stateful_set)
        path += f"?fieldManager={FIELD_MANAGER}"
        self.api.merge_patch(path, {"spec": {"replicas": size}})
        self.log(f"pool {pool.name}: {pool.stateful_set} scaled to {size} ({why})")

    def resume(self, nodes: Sequence[str]) -> list[str]:
        """Start the pods of ``nodes``: grow each pool to its highest ordinal, and delete the
        pods of parked nodes below the current size. The failures, one line per pool."""
        failures = []
        for pool, ordinals in self.config.by_pool(nodes).items():
            try:
                current = self.size(pool)
                for ordinal in sorted(o for o in ordinals if o < current):
                    self._restart_parked(pool, ordinal)
                wanted = max(ordinals) + 1
                if wanted > current:
                    self.set_size(pool, wanted, f"Slurm powers up {len(ordinals)} node(s)")
            except (KubeApiError, CommandError) as exc:
                failures.append(f"pool {pool.name}: {exc}")
                self._mark_down([pool.node(o) for o in ordinals], f"could not start: {exc}")
        return failures

    def _mark_down(self, nodes: Sequence[str], why: str) -> None:
        """Down with an `elastic: ` reason, so that jobs go elsewhere and sinfo -R says why."""
        try:
            hostlist = self.slurm.hostlist(nodes)
            self.slurm.update(f"NodeName={hostlist}", "State=DOWN", f"Reason={REASON_PREFIX}{why}")
        except CommandError as exc:
            self.log(f"could not mark {', '.join(nodes)} down: {exc}")

    def _restart_parked(self, pool: ElasticPool, ordinal: int) -> None:
        pod = pool.node(ordinal)
        try:
            self.api.delete(pod_path(self.config.namespace, pod))
        except KubeApiError as exc:
            if exc.status != 404:  # gone already: the StatefulSet makes it again
                raise
        self.log(f"pool {pool.name}: deleted parked pod {pod}; its StatefulSet starts it again")

    def suspend(self, nodes: Sequence[str]) -> list[str]:
        """Give back what Slurm powered down: shrink each pool to the size that keeps every
        node still powered up. The failures, one line per pool."""
        failures: list[str] = []
        grouped = self.config.by_pool(nodes)
        if not grouped:
            return failures
        records = self.slurm.nodes()
        for pool in grouped:
            try:
                keep = size_to_keep(pool, records, nodes)
                current = self.size(pool)
                if keep < current:
                    self.set_size(pool, keep, "Slurm powered its idle tail down")
                else:
                    parked = [n for n in nodes if (pool.ordinal_of(n) or 0) < current]
                    self.log(
                        f"pool {pool.name}: keeps {current} pod(s); "
                        f"{', '.join(parked)} parked below a node still powered up"
                    )
            except (KubeApiError, CommandError) as exc:
                failures.append(f"pool {pool.name}: {exc}")
        return failures

    def resume_failed(self, nodes: Sequence[str]) -> list[str]:
        """Nodes that did not register within their start timeout: down with a reason that
        names the pod, and their pods given back where they are the pool's tail."""
        failures = []
        for pool, ordinals in self.config.by_pool(nodes).items():
            for ordinal in ordinals:
                node = pool.node(ordinal)
                reason = (
                    f"{REASON_PREFIX}pod {node} did not register within "
                    f"{pool.start_timeout_seconds}s (startTimeoutSeconds); see kubectl "
                    f"describe pod {node}"
                )
                try:
                    self.slurm.update(f"NodeName={node}", "State=DOWN", f"Reason={reason}")
                except CommandError as exc:
                    failures.append(f"node {node}: {exc}")
        failures += self.suspend(nodes)
        return failures


def sync_nodes(config: ElasticConfig, slurm: Slurm, log: Log) -> list[str]:
    """Every elastic pool's nodes exist in Slurm (created powered down), its minReplicas
    nodes are powered up, and powered-down nodes no elastic pool claims any more (a pool
    made fixed, a lower maxReplicas) are deleted. The failures."""
    failures = []
    existing = {n.name: n for n in slurm.nodes()}
    unclaimed = [
        name
        for name, record in existing.items()
        if {"CLOUD", "POWERED_DOWN"} <= record.flags
        and not any(found[1] < found[0].max_replicas for found in [config.pool_of(name)] if found)
    ]
    if unclaimed:
        hostlist = slurm.hostlist(unclaimed)
        try:
            slurm.delete(f"NodeName={hostlist}")
            log(f"deleted powered-down node(s) {hostlist}: no elastic pool has them now")
        except CommandError as exc:
            failures.append(f"nodes {hostlist}: {exc}")
    for pool in config.pools:
        missing = [pool.node(i) for i in range(pool.max_replicas) if pool.node(i) not in existing]
        try:
            if missing:
                hostlist = slurm.hostlist(missing)
                slurm.create(f"NodeName={hostlist}", "State=CLOUD", *pool.node_conf.split())
                log(f"pool {pool.name}: created node(s) {hostlist} powered down")
            down = [
                pool.node(i)
                for i in range(pool.min_replicas)
                if pool.node(i) in missing or existing[pool.node(i)].given_back
            ]
            if down:
                hostlist = slurm.hostlist(down)
                slurm.update(f"NodeName={hostlist}", "State=POWER_UP")
                log(f"pool {pool.name}: powering up {hostlist} (minReplicas)")
        except CommandError as exc:
            failures.append(f"pool {pool.name}: {exc}")
    return failures


def retry_failed(slurm: Slurm, prefix: str, log: Log) -> list[str]:
    """Return to service the nodes of a pool (``prefix``) that a failed start left down: run
    when the pool's pod template changes, which is how a broken image gets fixed."""
    failed = [
        name
        for name, reason in slurm.reasons()
        if name.startswith(prefix) and reason.startswith(REASON_PREFIX)
    ]
    if not failed:
        return []
    hostlist = slurm.hostlist(failed)
    try:
        slurm.update(f"NodeName={hostlist}", "State=RESUME")
    except CommandError as exc:
        return [f"nodes {hostlist}: {exc}"]
    log(f"returned {hostlist} to service: the pool's pod template changed since they failed")
    return []


def given_back(slurm: Slurm, node: str) -> bool:
    """Whether Slurm has given ``node`` back or is powering it up: its pod's stop is then not
    the node leaving (no drain, no delete; the node stays for the next power-up)."""
    for record in slurm.nodes(node):
        if record.name == node:
            return bool(record.flags & POWER_FLAGS)
    return False


def in_cluster_api(environ: Mapping[str, str], address_file: Path = API_ADDRESS_FILE) -> KubeApi:
    """The API from the kubelet's variables, else from the address the controller's entrypoint
    wrote down at its start (slurmctld runs its programs without them)."""
    if "KUBERNETES_SERVICE_HOST" in environ:
        return KubeApi.in_cluster(environ)
    host, port = address_file.read_text(encoding="utf-8").split()
    return KubeApi.in_cluster({"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port})


@contextmanager
def one_at_a_time(lock_file: Path = LOCK_FILE) -> Iterator[None]:
    """Slurm may run a resume and a suspend at once; each reads the size and sets it, so they
    take turns (a suspend that read Slurm's nodes before a resume began must not undo it)."""
    with open(lock_file, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# slurmctld's own standard error, the container's log: the programs' own output goes nowhere
# anyone reads (slurmscriptd keeps it only for debug logging).
CONTAINER_LOG = Path("/proc/1/fd/2")


def container_log(fallback: TextIO, target: Path = CONTAINER_LOG, name: str = "elastic") -> Log:
    """A log that writes timestamped lines, each after ``name``, to the container's log where
    it can, else to ``fallback``."""

    def log(line: str) -> None:
        text = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {name}: {line}\n"
        try:
            with open(target, "a", encoding="utf-8") as stream:
                stream.write(text)
        except OSError:
            fallback.write(text)
            fallback.flush()

    return log


def slurm_conf(environ: Mapping[str, str]) -> str:
    """slurm.conf's path as Slurm's clients find it."""
    return environ.get("SLURM_CONF") or os.path.join("/etc/slurm", "slurm.conf")
