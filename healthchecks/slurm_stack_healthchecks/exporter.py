"""``healthcheck exporter``: the cluster's state as Prometheus metrics, read from Slurm's client
commands at every scrape.

No maintained Slurm exporter is packaged by Debian, and the Go ones cannot be built from
Debian's archive alone; Slurm's own OpenMetrics endpoint exists only from 25.11. So this one
asks ``sinfo``, ``squeue``, ``sdiag``, ``sacctmgr`` and ``sacct``, and reports through the
``prometheus_client`` library. Every query has a timeout; one that fails is counted in
``slurm_stack_exporter_errors`` and its metrics are left out of that scrape (an absent series,
not a wrong zero).

Configured by environment variables: ``EXPORTER_POOLS`` (comma-separated pool names: a node's
pool is the first of its features that names one), ``EXPORTER_PARTITIONS`` (comma-separated:
each gets its ``pending`` and ``running`` job series, 0 when empty), ``EXPORTER_ACCOUNTING``
(``1``: ask slurmdbd too, for ``slurm_stack_slurmdbd_up`` and the NCCL results),
``EXPORTER_HEALTHCHECK_RESULTS`` (the directory where each node's quick checks leave their
latest results, see :mod:`.results_file`; unset: no per-check series), ``EXPORTER_PORT``
(default 9341).
"""

from __future__ import annotations

import re
import shlex
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .drain import NCCL_PREFIX, PREFIX
from .results_file import NodeResults, ResultsFileError, read_results
from .runner import Runner
from .sinfo import NO_VALUE, SinfoError, parse_gpu_gres, query
from .stopping import exit_on_sigterm

DEFAULT_PORT = 9341
QUERY_TIMEOUT = 20.0
NODES_ARGV = (
    "sinfo",
    "--noheader",
    "--Node",
    "--all",
    "--Format=NodeList:|,StateLong:|,Features:|,Gres:|,GresUsed:|,Reason:|",
)
JOBS_ARGV = ("squeue", "--noheader", "--all", "--format=%T|%P|%r")
SDIAG_ARGV = ("sdiag",)
DBD_PING_ARGV = ("sacctmgr", "--noheader", "ping")
NCCL_ARGV = (
    "sacct",
    "--allusers",
    "--allocations",
    "--noheader",
    "--parsable2",
    "--name=nccl-benchmark",
    # Not --state: with it, sacct wants a time window jobs were in that state during. A job
    # still running has the submitter's comment, not a verdict, and is skipped.
    "--starttime=now-7days",
    "--format=End,NodeList,Comment",
)
# A node's state as sinfo's StateLong writes it, less its flags (*, ~, #, !, %, $, @, ^, -, +).
_STATE_FLAGS = "*~#!%$@^-+"
_STATE_CLASSES = {
    "idle": "idle",
    "allocated": "alloc",
    "mixed": "mixed",
    "completing": "alloc",
    "drained": "drain",
    "draining": "drain",
    "down": "down",
    "fail": "down",
    "failing": "down",
}
# Power saving (elastic pools) as the long state shows it. Slurm prints one suffix at most,
# the first that applies of $ ^ @ # % ~ ! * (node_state_string, the same in 24.11 and 26.05);
# maint, reboot, fail and failing states hide the power flags, and those nodes count as up. A
# power flag with no base state is printed as its own name (``powered_down``).
POWER_STATES = ("up", "powering_up", "powering_down", "powered_down")
_POWER_SUFFIXES = {
    "#": "powering_up",
    "%": "powering_down",
    # A power down requested: the node is still up until Slurm starts powering it down.
    "!": "powering_down",
    "~": "powered_down",
}
_POWER_NAMES = {
    "power_up": "powering_up",
    "powering_up": "powering_up",
    "power_down": "powering_down",
    "powering_down": "powering_down",
    "powered_down": "powered_down",
}
# What the elastic pools' resume, suspend and resume-fail programs start a node's reason with.
ELASTIC_PREFIX = "elastic:"


@dataclass(frozen=True)
class Node:
    """One node: its pool, state class, drain owner and reason, GPUs, power state."""

    name: str
    pool: str
    state: str
    drain_owner: str | None
    reason: str
    gpus_total: int
    gpus_alloc: int
    power: str = "up"

    @property
    def elastic_failed(self) -> bool:
        """Whether the node carries a reason an elastic pool's power programs left."""
        return self.reason.startswith(ELASTIC_PREFIX)


def state_class(state_long: str) -> str:
    """``idle``, ``alloc``, ``mixed``, ``drain``, ``down`` or ``other``; a node that does not
    respond (``idle*``) is ``down``, whatever its base state."""
    state = state_long.strip().lower()
    if state.endswith("*"):
        return "down"
    return _STATE_CLASSES.get(state.rstrip(_STATE_FLAGS), "other")


def power_state(state_long: str) -> str:
    """One of :data:`POWER_STATES`: ``powering_up`` (``#``), ``powering_down`` (``%``, or
    ``!``: requested), ``powered_down`` (``~``), else ``up``, whatever the base state."""
    state = state_long.strip().lower()
    if state in _POWER_NAMES:
        return _POWER_NAMES[state]
    return _POWER_SUFFIXES.get(state[-1:], "up")


def drain_owner(reason: str) -> str:
    """Who drained a node, by its reason: ``nccl`` (the NCCL benchmark), ``healthcheck`` (the
    quick checks), else ``other`` (an administrator, or Slurm itself)."""
    if reason.startswith(NCCL_PREFIX):
        return "nccl"
    if reason.startswith(PREFIX):
        return "healthcheck"
    return "other"


def parse_nodes(text: str, pools: Sequence[str]) -> list[Node]:
    """Parse :data:`NODES_ARGV` output: one :class:`Node` per node (sinfo lists a node once per
    partition); raises :class:`SinfoError` on a line that is not six fields."""
    nodes: dict[str, Node] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.rstrip("\n").split("|")
        if len(fields) < 6:
            raise SinfoError(f"unexpected sinfo line (want 6 fields): {line[:80]!r}")
        name, state_long, features, gres, gres_used = (f.strip() for f in fields[:5])
        reason = "|".join(fields[5:]).rstrip("|").strip()
        if name in nodes:
            continue
        feature_list = [] if features.lower() in NO_VALUE else features.split(",")
        pool = next((f for f in feature_list if f in pools), "")
        state = state_class(state_long)
        reason = "" if reason.lower() in NO_VALUE else reason
        try:
            total, used = parse_gpu_gres(gres).count, parse_gpu_gres(gres_used).count
        except ValueError:
            total = used = 0
        owner = drain_owner(reason) if state == "drain" else None
        power = power_state(state_long)
        nodes[name] = Node(name, pool, state, owner, reason, total, used, power)
    return list(nodes.values())


def parse_jobs(text: str) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Parse :data:`JOBS_ARGV` output: jobs by ``(state, partition)`` and pending jobs by
    ``(partition, reason)``; states are lower case (``pending``, ``running``...)."""
    by_state: Counter[tuple[str, str]] = Counter()
    pending: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 3:
            continue
        state, partition, reason = (f.strip() for f in fields)
        state = state.lower()
        by_state[(state, partition)] += 1
        if state == "pending":
            pending[(partition, reason)] += 1
    return by_state, pending


_SDIAG_SECTIONS = {"Main schedule statistics": "main", "Backfilling stats": "backfill"}
_SDIAG_CYCLE = re.compile(r"^\s*(?P<stat>Last|Max|Mean) cycle:\s*(?P<value>\d+)\s*$")
_SDIAG_QUEUE = re.compile(r"^\s*Last queue length:\s*(?P<value>\d+)\s*$")
_SDIAG_JOBS = re.compile(
    r"^Jobs (?P<event>submitted|started|completed|canceled|failed):\s*(?P<value>\d+)\s*$"
)
_SDIAG_GAUGES = {
    "Server thread count": "server_threads",
    "Agent queue size": "agent_queue_size",
    "DBD Agent queue size": "dbd_agent_queue_size",
}


@dataclass(frozen=True)
class SchedulerStats:
    """What ``sdiag`` says: cycle times in seconds by (scheduler, stat), queue lengths by
    scheduler, job counts since the statistics were last reset, and thread/queue gauges."""

    cycles: dict[tuple[str, str], float]
    queue_lengths: dict[str, int]
    jobs: dict[str, int]
    gauges: dict[str, int]


def parse_sdiag(text: str) -> SchedulerStats:
    """Parse ``sdiag``'s text output (cycle times are printed in microseconds)."""
    cycles: dict[tuple[str, str], float] = {}
    queues: dict[str, int] = {}
    jobs: dict[str, int] = {}
    gauges: dict[str, int] = {}
    section = None
    for line in text.splitlines():
        if not line.startswith((" ", "\t")) and line.strip():
            section = next((v for k, v in _SDIAG_SECTIONS.items() if line.startswith(k)), None)
            name, _, value = line.partition(":")
            if name.strip() in _SDIAG_GAUGES and value.strip().isdigit():
                gauges[_SDIAG_GAUGES[name.strip()]] = int(value)
            if match := _SDIAG_JOBS.match(line.strip()):
                jobs[match["event"]] = int(match["value"])
            continue
        if section is None:
            continue
        if match := _SDIAG_CYCLE.match(line):
            cycles[(section, match["stat"].lower())] = int(match["value"]) / 1e6
        elif match := _SDIAG_QUEUE.match(line):
            queues[section] = int(match["value"])
    return SchedulerStats(cycles, queues, jobs, gauges)


@dataclass(frozen=True)
class NcclVerdict:
    """A node's latest NCCL benchmark verdict."""

    node: str
    gpu_type: str
    busbw: float
    threshold: float
    passed: bool
    ended: str


def parse_nccl(text: str) -> list[NcclVerdict]:
    """The latest verdict with a bandwidth per node, from :data:`NCCL_ARGV` output: each job's
    comment is its ``nccl-verdict`` line (``result=pass gpu_type=h100 busbw=365.38
    threshold=350 ...``)."""
    latest: dict[str, NcclVerdict] = {}
    for line in text.splitlines():
        ended, _, rest = line.partition("|")
        node, _, comment = rest.partition("|")
        if not comment.startswith("nccl-verdict "):
            continue
        try:
            fields = dict(word.split("=", 1) for word in shlex.split(comment)[1:] if "=" in word)
            result = NcclVerdict(
                node.strip(),
                fields.get("gpu_type", ""),
                float(fields["busbw"]),
                float(fields["threshold"]),
                fields.get("result") == "pass",
                ended,
            )
        except (KeyError, ValueError):
            continue  # no bandwidth: the verdict was an error
        if result.node not in latest or result.ended >= latest[result.node].ended:
            latest[result.node] = result
    return list(latest.values())


@dataclass(frozen=True)
class Sample:
    """One series: a metric name, its labels and value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


# name → (help, label names); every metric is a gauge.
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "slurm_stack_slurmctld_up": ("1 when slurmctld answered sinfo", ()),
    "slurm_stack_slurmdbd_up": ("1 when slurmdbd answered sacctmgr ping", ()),
    "slurm_stack_nodes": ("Nodes by pool and state class", ("pool", "state")),
    "slurm_stack_nodes_drained": (
        "Drained or draining nodes by pool and who drained them (healthcheck, nccl, other)",
        ("pool", "owner"),
    ),
    "slurm_stack_node_drained": (
        "1 for each drained or draining node, with its reason",
        ("node", "pool", "owner", "reason"),
    ),
    "slurm_stack_nodes_by_power": (
        "Nodes by pool and power state (up, powering_up, powering_down, powered_down)",
        ("pool", "power"),
    ),
    "slurm_stack_nodes_elastic_failed": (
        "Nodes whose reason an elastic pool's power programs set (elastic: ...), by pool",
        ("pool",),
    ),
    "slurm_stack_gpus": ("GPUs of the nodes by pool", ("pool",)),
    "slurm_stack_gpus_allocated": ("GPUs allocated to jobs by pool", ("pool",)),
    "slurm_stack_jobs": (
        "Jobs the controller holds by state and partition",
        ("state", "partition"),
    ),
    "slurm_stack_jobs_pending": ("Pending jobs by partition and reason", ("partition", "reason")),
    "slurm_stack_scheduler_cycle_seconds": (
        "Scheduler cycle time by scheduler (main, backfill) and stat (last, max, mean)",
        ("scheduler", "stat"),
    ),
    "slurm_stack_scheduler_queue_length": (
        "Jobs in the scheduler's last queue by scheduler",
        ("scheduler",),
    ),
    "slurm_stack_scheduler_jobs": (
        "Jobs by event since sdiag's statistics were last reset",
        ("event",),
    ),
    "slurm_stack_slurmctld_threads": ("slurmctld gauges from sdiag", ("gauge",)),
    "slurm_stack_nccl_busbw_gbps": (
        "Average bus bandwidth of the node's latest NCCL benchmark",
        ("node", "gpu_type"),
    ),
    "slurm_stack_nccl_threshold_gbps": (
        "Threshold the node's latest NCCL benchmark was judged by",
        ("node", "gpu_type"),
    ),
    "slurm_stack_healthcheck_passed": (
        "1 when the check passed in the node's latest quick-check run, 0 when it failed",
        ("node", "pool", "check"),
    ),
    "slurm_stack_healthcheck_duration_seconds": (
        "How long the check took in the node's latest quick-check run",
        ("node", "pool", "check"),
    ),
    "slurm_stack_healthcheck_last_run_timestamp_seconds": (
        "When the node's latest quick-check run finished (Unix time)",
        ("node", "pool"),
    ),
    "slurm_stack_healthcheck_run_seconds": (
        "How long the node's latest quick-check run took, deciding and draining included",
        ("node", "pool"),
    ),
    "slurm_stack_exporter_errors": ("Queries that failed in this scrape", ("query",)),
    "slurm_stack_exporter_scrape_seconds": ("Time this scrape's queries took", ()),
}


def _sample(name: str, value: float, **labels: str) -> Sample:
    return Sample(name, tuple(labels.items()), float(value))


def node_samples(nodes: Iterable[Node], pools: Sequence[str]) -> Iterator[Sample]:
    """Node, drain, power and GPU series; every pool, state class and power state appears,
    with 0 where none."""
    nodes = list(nodes)
    states = ("idle", "alloc", "mixed", "drain", "down", "other")
    counts = Counter((n.pool, n.state) for n in nodes)
    drained = Counter((n.pool, n.drain_owner) for n in nodes if n.drain_owner)
    powers = Counter((n.pool, n.power) for n in nodes)
    elastic_failed = Counter(n.pool for n in nodes if n.elastic_failed)
    all_pools = list(dict.fromkeys([*pools, *(n.pool for n in nodes)]))
    for pool in all_pools:
        for state in states:
            yield _sample("slurm_stack_nodes", counts[(pool, state)], pool=pool, state=state)
        for owner in ("healthcheck", "nccl", "other"):
            value = drained[(pool, owner)]
            yield _sample("slurm_stack_nodes_drained", value, pool=pool, owner=owner)
        for power in POWER_STATES:
            value = powers[(pool, power)]
            yield _sample("slurm_stack_nodes_by_power", value, pool=pool, power=power)
        yield _sample("slurm_stack_nodes_elastic_failed", elastic_failed[pool], pool=pool)
        in_pool = [n for n in nodes if n.pool == pool]
        yield _sample("slurm_stack_gpus", sum(n.gpus_total for n in in_pool), pool=pool)
        yield _sample("slurm_stack_gpus_allocated", sum(n.gpus_alloc for n in in_pool), pool=pool)
    for node in nodes:
        if node.drain_owner:
            yield _sample(
                "slurm_stack_node_drained",
                1,
                node=node.name,
                pool=node.pool,
                owner=node.drain_owner,
                reason=node.reason,
            )


def healthcheck_samples(results: Iterable[tuple[Node, NodeResults]]) -> Iterator[Sample]:
    """Per-check series of each node's latest quick-check run."""
    for node, latest in results:
        where = {"node": node.name, "pool": node.pool}
        finished = latest.finished
        yield _sample("slurm_stack_healthcheck_last_run_timestamp_seconds", finished, **where)
        yield _sample("slurm_stack_healthcheck_run_seconds", latest.seconds, **where)
        for check in latest.checks:
            yield _sample("slurm_stack_healthcheck_passed", check.ok, **where, check=check.name)
            yield _sample(
                "slurm_stack_healthcheck_duration_seconds", check.seconds, **where, check=check.name
            )


def read_node_results(
    directory: Path, nodes: Iterable[Node]
) -> tuple[list[tuple[Node, NodeResults]], int]:
    """The latest results of each of ``nodes`` that has a file, and how many files were
    refused. Files of nodes Slurm no longer lists are not read."""
    found: list[tuple[Node, NodeResults]] = []
    refused = 0
    for node in nodes:
        try:
            latest = read_results(directory, node.name)
        except ResultsFileError:
            refused += 1
            continue
        if latest is not None:
            found.append((node, latest))
    return found, refused


def job_samples(text: str, partitions: Sequence[str] = ()) -> Iterator[Sample]:
    """Job series; ``pending`` and ``running`` appear for each of ``partitions``, 0 if none."""
    by_state, pending = parse_jobs(text)
    for partition in partitions:
        for state in ("pending", "running"):
            by_state.setdefault((state, partition), 0)
    for (state, partition), count in sorted(by_state.items()):
        yield _sample("slurm_stack_jobs", count, state=state, partition=partition)
    for (partition, reason), count in sorted(pending.items()):
        yield _sample("slurm_stack_jobs_pending", count, partition=partition, reason=reason)


def scheduler_samples(stats: SchedulerStats) -> Iterator[Sample]:
    """sdiag series."""
    for (scheduler, stat), seconds in sorted(stats.cycles.items()):
        yield _sample(
            "slurm_stack_scheduler_cycle_seconds", seconds, scheduler=scheduler, stat=stat
        )
    for scheduler, length in sorted(stats.queue_lengths.items()):
        yield _sample("slurm_stack_scheduler_queue_length", length, scheduler=scheduler)
    for event, count in sorted(stats.jobs.items()):
        yield _sample("slurm_stack_scheduler_jobs", count, event=event)
    for gauge, value in sorted(stats.gauges.items()):
        yield _sample("slurm_stack_slurmctld_threads", value, gauge=gauge)


def nccl_samples(results: Iterable[NcclVerdict]) -> Iterator[Sample]:
    """NCCL series, one per node with a result."""
    for result in results:
        labels = {"node": result.node, "gpu_type": result.gpu_type}
        yield _sample("slurm_stack_nccl_busbw_gbps", result.busbw, **labels)
        yield _sample("slurm_stack_nccl_threshold_gbps", result.threshold, **labels)


@dataclass(frozen=True)
class ExporterConfig:
    """What the exporter knows of the cluster beyond what Slurm tells it."""

    pools: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    accounting: bool = False
    port: int = DEFAULT_PORT
    healthcheck_results: Path | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ExporterConfig:
        """From ``EXPORTER_*`` variables; raises ``ValueError`` on a bad port."""

        def names(key: str) -> tuple[str, ...]:
            return tuple(n.strip() for n in environ.get(key, "").split(",") if n.strip())

        port = int(environ.get("EXPORTER_PORT", "") or DEFAULT_PORT)
        if not 1 <= port <= 65535:
            raise ValueError(f"EXPORTER_PORT must be a port number, got {port}")
        results = environ.get("EXPORTER_HEALTHCHECK_RESULTS", "")
        if results and not results.startswith("/"):
            raise ValueError(f"EXPORTER_HEALTHCHECK_RESULTS must be an absolute path: {results}")
        return cls(
            names("EXPORTER_POOLS"),
            names("EXPORTER_PARTITIONS"),
            environ.get("EXPORTER_ACCOUNTING", "") == "1",
            port,
            Path(results) if results else None,
        )


def collect_samples(
    runner: Runner, config: ExporterConfig, timeout: float = QUERY_TIMEOUT
) -> list[Sample]:
    """Every series of one scrape; a query that fails adds an error sample instead of its
    series."""
    started = time.monotonic()
    samples: list[Sample] = []
    errors: Counter[str] = Counter()

    def ask(name: str, argv: Sequence[str]) -> str | None:
        try:
            return query(runner, argv, timeout)
        except SinfoError:
            errors[name] += 1
            return None

    nodes_text = ask("sinfo", NODES_ARGV)
    samples.append(_sample("slurm_stack_slurmctld_up", nodes_text is not None))
    if nodes_text is not None:
        try:
            nodes = parse_nodes(nodes_text, config.pools)
        except SinfoError:
            errors["sinfo"] += 1
        else:
            samples.extend(node_samples(nodes, config.pools))
            if config.healthcheck_results is not None:
                found, refused = read_node_results(config.healthcheck_results, nodes)
                samples.extend(healthcheck_samples(found))
                errors["healthcheck_results"] += refused
    if (jobs_text := ask("squeue", JOBS_ARGV)) is not None:
        samples.extend(job_samples(jobs_text, config.partitions))
    if (sdiag_text := ask("sdiag", SDIAG_ARGV)) is not None:
        samples.extend(scheduler_samples(parse_sdiag(sdiag_text)))
    if config.accounting:
        ping = ask("sacctmgr", DBD_PING_ARGV)
        samples.append(_sample("slurm_stack_slurmdbd_up", ping is not None and " is UP" in ping))
        if (nccl_text := ask("sacct", NCCL_ARGV)) is not None:
            samples.extend(nccl_samples(parse_nccl(nccl_text)))
    queries = ["sinfo", "squeue", "sdiag"]
    queries += ["sacctmgr", "sacct"] if config.accounting else []
    queries += ["healthcheck_results"] if config.healthcheck_results is not None else []
    for name in queries:
        samples.append(_sample("slurm_stack_exporter_errors", errors[name], query=name))
    samples.append(_sample("slurm_stack_exporter_scrape_seconds", time.monotonic() - started))
    return samples


class SlurmCollector:
    """A ``prometheus_client`` collector that queries Slurm at each scrape."""

    def __init__(self, runner: Runner, config: ExporterConfig) -> None:
        self.runner, self.config = runner, config

    def describe(self) -> list[object]:
        """Nothing up front: registering must not query Slurm."""
        return []

    def collect(self) -> Iterator[object]:
        """One gauge family per metric, from a fresh query of Slurm."""
        from prometheus_client.core import GaugeMetricFamily

        samples = collect_samples(self.runner, self.config)
        for name, (help_text, label_names) in METRICS.items():
            family = GaugeMetricFamily(name, help_text, labels=label_names)
            for sample in samples:
                if sample.name == name:
                    family.add_metric([value for _, value in sample.labels], sample.value)
            if family.samples:
                yield family


def serve(config: ExporterConfig, runner: Runner) -> int:
    """Serve ``/metrics`` until killed: the ``exporter`` command. Only the cluster's series,
    not the exporter process's own (a registry of its own)."""
    from prometheus_client import CollectorRegistry, start_http_server

    exit_on_sigterm()
    registry = CollectorRegistry()
    # register() takes prometheus_client's Collector ABC, which SlurmCollector cannot subclass:
    # the module imports prometheus_client only here (only the ops image has it).
    registry.register(SlurmCollector(runner, config))  # type: ignore[arg-type]
    start_http_server(config.port, registry=registry)
    pools = ",".join(config.pools) or "(none)"
    print(f"exporter: serving /metrics on port {config.port}; pools {pools}", flush=True)
    while True:
        time.sleep(3600)
