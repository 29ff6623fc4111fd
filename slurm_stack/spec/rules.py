"""Rules that relate several parts of the stack config.

They read the raw (camelCase) config defensively, so they report alongside the per-field
errors from pydantic instead of waiting until every field is valid.
"""

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from slurm_stack.naming import (
    LABEL_FEATURE_PREFIX,
    MAX_STATEFULSET_NAME,
    RESERVED_POOL_NAMES,
    elastic_partition_name,
    pool_name,
)
from slurm_stack.spec.errors import SpecIssue, join_path
from slurm_stack.spec.models import ClusterSpec, Controller, WorkerPool, derived_id
from slurm_stack.spec.quantity import parse_quantity
from slurm_stack.spec.slurm_options import (
    NODE,
    PARTITION,
    SLURM_CONF,
    Owned,
    Pair,
    field_issues,
    parse_line,
)
from slurm_stack.spec.sshd import sshd_line_problem
from slurm_stack.spec.versions import at_least, key_problem

# slurm.conf keys slurm-stack sets itself; an extra line may not override them.
OWNED_SLURM_CONF_KEYS = {
    key.lower(): where
    for key, where in {
        "ClusterName": "cluster.name",
        "SlurmctldHost": "the controller Service",
        "SlurmctldPort": "slurm-stack (Services and probes use 6817)",
        "SlurmdPort": "slurm-stack (Services and probes use 6818)",
        "SrunPortRange": "slurm-stack (the NetworkPolicies open 60001-63000 for srun)",
        "SlurmUser": "slurm-stack (the images' slurm user)",
        "SlurmdUser": "slurm-stack (root)",
        "SlurmdSpoolDir": "slurm-stack (the jail plugin binds it)",
        "SlurmctldPidFile": "slurm-stack",
        "SlurmdPidFile": "slurm-stack",
        "PlugStackConfig": "slurm-stack (the jail plugin)",
        "AccountingStoragePort": "slurm-stack (the slurmdbd Service uses 6819)",
        "SchedulerParameters": "controller.scheduler.parameters",
        "AuthType": "cluster.auth",
        "CredType": "cluster.auth",
        "AuthAltTypes": "restApi (auth/jwt)",
        "AuthAltParameters": "restApi (the generated JWT key)",
        "SlurmctldParameters": "slurm-stack (configless + dynamic nodes)",
        "MaxNodeCount": "controller.maxNodeCount",
        "NodeName": "workerPools (dynamic nodes)",
        "NodeSet": "workerPools",
        "PartitionName": "partitions",
        "StateSaveLocation": "controller.stateVolume",
        "AccountingStorageType": "accounting",
        "AccountingStorageHost": "accounting",
        "SchedulerType": "controller.scheduler.type",
        "SelectType": "slurm-stack (select/cons_tres)",
        "SelectTypeParameters": "controller.scheduler.selectTypeParameters",
        "ProctrackType": "cgroups.enforce",
        "TaskPlugin": "cgroups.enforce",
        "HealthCheckProgram": "healthChecks.quick",
        "HealthCheckInterval": "healthChecks.quick.intervalSeconds",
        "HealthCheckNodeState": "healthChecks.quick.nodeStates",
        "MetricsType": "controller.metrics.enabled",
        "Epilog": "slurm-stack (it removes each job's private /tmp and leftover processes)",
        "DisableRootJobs": "jail.allowRootJobs",
        "TopologyPlugin": "topology (and each pool's switch)",
        "SuspendTime": "workerPools[].elastic.idleSeconds (per pool; fixed pools never power down)",
        "SuspendProgram": "workerPools[].elastic (the scaler)",
        "ResumeProgram": "workerPools[].elastic (the scaler)",
        "ResumeFailProgram": "workerPools[].elastic (the scaler)",
        "SuspendExcNodes": "workerPools[].elastic.minReplicas",
    }.items()
}

# --conf keys a dynamic node gets from its pool's fields.
OWNED_NODE_CONF_KEYS = {
    "feature": "the pool's features",
    "gres": "the pool's gpus / gpuType",
    "weight": "the pool's weight",
    "nodename": "the pod's hostname",
    "nodehostname": "the pod's hostname",
    "nodeaddr": "the pod's address",
    "port": "slurm-stack (slurmd listens on SlurmdPort 6818, which Services and probes use)",
    "gresconf": "the pool's gpus / gpuType (slurm-stack writes gres.conf)",
    "topology": "the pool's switch (and topology)",
}

# Options of a partition's line that its own fields (or slurm-stack) set.
OWNED_PARTITION_KEYS = {
    "partitionname": "the partition's name",
    "nodes": "the partition's pools",
    "default": "the partition's default",
    "maxtime": "the partition's maxTime",
    "state": "slurm-stack (State=UP)",
    # A partition's DisableRootJobs overrides slurm.conf's, which jail.allowRootJobs sets.
    "disablerootjobs": "jail.allowRootJobs",
}

SLURM_CONF_LINES = Owned(
    OWNED_SLURM_CONF_KEYS, "{key} is set by slurm-stack; configure it through {where}"
)
NODE_LINES = Owned(OWNED_NODE_CONF_KEYS, "{key} comes from {where}")
PARTITION_LINES = Owned(OWNED_PARTITION_KEYS, "{key} comes from {where}, not options")

DB_PASSWORD_CONFIG_KEY = "slurm-stack:accountingDbPassword"
LDAP_PASSWORD_CONFIG_KEY = "slurm-stack:ldapBindPassword"
REGISTRY_AUTH_CONFIG_KEY = "slurm-stack:containerRegistryAuth"
# What the offline reader of a stack file (stackfile.py) gives a `secure:` value, which only
# the Pulumi CLI can decrypt: the rules take it for a value that is there but unknown.
SECRET_PLACEHOLDER = "offline-secret-placeholder"

Raw = dict[str, Any]
Rule = Callable[[Raw, "RuleContext"], Iterator[SpecIssue]]


class RuleContext:
    """Facts from outside `slurm-stack:cluster` that rules need."""

    def __init__(
        self,
        db_password_provided: bool = False,
        ldap_password_provided: bool = False,
        registry_auth_provided: bool = False,
    ):
        self.db_password_provided = db_password_provided
        self.ldap_password_provided = ldap_password_provided
        self.registry_auth_provided = registry_auth_provided


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    if not isinstance(mapping, dict):
        return default
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
    return mapping.get(key, mapping.get(snake, default))


def _items(mapping: Any, key: str) -> list[tuple[int, Raw]]:
    value = _get(mapping, key, [])
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, dict)]


def _version(raw: Raw) -> str:
    version = _get(raw, "slurmVersion", ClusterSpec.model_fields["slurm_version"].default)
    return version if version in ("24.11", "26.05") else "26.05"


OUTSIDE_POOLS = ("externalNodes", "pools")


def _outside_pools(raw: Raw) -> list[tuple[int, Raw]]:
    return _items(_get(raw, "externalNodes", {}), "pools")


def _all_pools(raw: Raw) -> Iterator[tuple[tuple[str, ...], int, Raw]]:
    """(path of the list, index, pool) of every worker pool and outside pool."""
    for i, pool in _items(raw, "workerPools"):
        yield ("workerPools",), i, pool
    for i, pool in _outside_pools(raw):
        yield OUTSIDE_POOLS, i, pool


def _pool_names(raw: Raw) -> set[str]:
    return {n for _, _, p in _all_pools(raw) if isinstance(n := _get(p, "name"), str)}


def unique_names(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Pools (worker and outside ones together, each a NodeSet) and partitions are each named
    once."""
    pools = [(path, i, _get(pool, "name")) for path, i, pool in _all_pools(raw)]
    partitions = [(("partitions",), i, _get(item, "name")) for i, item in _items(raw, "partitions")]
    for named in (pools, partitions):
        counts = Counter(name for _, _, name in named if isinstance(name, str))
        for path, i, name in named:
            if isinstance(name, str) and counts[name] > 1:
                yield SpecIssue(join_path(*path, i, "name"), f"{name!r} is used more than once")


def outside_hosts_are_not_pods(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Node names that start with `<cluster>-` are the cluster's pods' (`<cluster>-<pool>-
    <ordinal>`, today's pools and those to come): an outside host takes none, so two slurmds
    never register as one node and a host is never taken for a pod."""
    cluster = _get(raw, "name")
    if not isinstance(cluster, str):
        return
    for i, pool in _outside_pools(raw):
        hosts = _get(pool, "hosts", [])
        for j, host in enumerate(hosts if isinstance(hosts, list) else []):
            if isinstance(host, str) and host.startswith(f"{cluster}-"):
                yield SpecIssue(
                    join_path(*OUTSIDE_POOLS, i, "hosts", j),
                    f"{host!r}: node names that start with '{cluster}-' are the cluster's "
                    "worker pods' (<cluster>-<pool>-<ordinal>): give the host a name of its own",
                )


def pool_names_fit(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Pool names do not collide with other workloads and leave room in object names."""
    cluster = _get(raw, "name")
    for i, pool in _items(raw, "workerPools"):
        name = _get(pool, "name")
        if not isinstance(name, str):
            continue
        if name in RESERVED_POOL_NAMES:
            yield SpecIssue(
                join_path("workerPools", i, "name"),
                f"{name!r} is reserved for another workload; reserved names: "
                + ", ".join(sorted(RESERVED_POOL_NAMES)),
            )
        if isinstance(cluster, str) and len(pool_name(cluster, name)) > MAX_STATEFULSET_NAME:
            room = MAX_STATEFULSET_NAME - len(cluster) - 1
            yield SpecIssue(
                join_path("workerPools", i, "name"),
                f"{name!r} is too long for cluster {cluster!r}: at most {room} characters "
                f"('{cluster}-<pool>' must fit {MAX_STATEFULSET_NAME})",
            )


def features_are_not_pool_names(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """A pool's extra feature may not be another pool's name (NodeSets select by feature),
    and neither may start with `k8s-`: the node-state controller owns those features."""
    pools = _pool_names(raw)
    for path, i, pool in _all_pools(raw):
        name = _get(pool, "name")
        if isinstance(name, str) and name.startswith(LABEL_FEATURE_PREFIX):
            yield SpecIssue(
                join_path(*path, i, "name"),
                f"a pool's name is a Slurm feature of its nodes, and features that start with "
                f"'{LABEL_FEATURE_PREFIX}' are Kubernetes node labels' (labelFeatures): "
                "choose another name",
            )
        features = _get(pool, "features", [])
        for j, feature in enumerate(features if isinstance(features, list) else []):
            if isinstance(feature, str) and feature.startswith(LABEL_FEATURE_PREFIX):
                yield SpecIssue(
                    join_path(*path, i, "features", j),
                    f"features that start with '{LABEL_FEATURE_PREFIX}' come from Kubernetes "
                    "node labels (labelFeatures) and the node-state controller replaces them: "
                    "choose another name",
                )
            if isinstance(feature, str) and feature in pools and feature != _get(pool, "name"):
                yield SpecIssue(
                    join_path(*path, i, "features", j),
                    f"{feature!r} is another pool's name; its NodeSet would take this pool's "
                    "nodes too",
                )


def partitions_know_their_pools(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Every pool a partition names exists; at most one partition is the default."""
    pools = sorted(_pool_names(raw))
    defaults = []
    for i, partition in _items(raw, "partitions"):
        if _get(partition, "default") is True:
            defaults.append(i)
        listed = _get(partition, "pools")
        if not isinstance(listed, list):
            continue
        for j, name in enumerate(listed):
            if name not in pools:
                yield SpecIssue(
                    join_path("partitions", i, "pools", j),
                    f"unknown pool {name!r}; defined pools: {', '.join(pools) or '(none)'}",
                )
    for i in defaults[1:]:
        yield SpecIssue(
            join_path("partitions", i, "default"),
            f"only one partition may be the default; partitions[{defaults[0]}] already is",
        )


def node_count_fits(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """All replicas together fit MaxNodeCount (dynamic node slots)."""
    limit = _get(_get(raw, "controller", {}), "maxNodeCount")
    if limit is None:
        limit = Controller.model_fields["max_node_count"].default
    default_replicas = WorkerPool.model_fields["replicas"].default
    total = 0
    for _index, pool in _items(raw, "workerPools"):
        elastic = _get(pool, "elastic")
        if isinstance(elastic, dict):
            replicas = _get(elastic, "maxReplicas")  # every node Slurm knows of the pool
        else:
            replicas = _get(pool, "replicas", default_replicas)
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            total += replicas
    for _index, pool in _outside_pools(raw):
        hosts = _get(pool, "hosts", [])
        total += len(hosts) if isinstance(hosts, list) else 0
    if isinstance(limit, int) and total > limit:
        yield SpecIssue(
            "controller.maxNodeCount",
            f"{limit} is less than the {total} nodes of all pools (replicas, "
            f"elastic.maxReplicas of elastic pools, and externalNodes hosts); raise it to at "
            f"least {total}",
        )


def elastic_partitions_are_free(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Each elastic pool's hidden partition (its power-saving settings) has a name no
    partition of the stack takes."""
    hidden = {
        elastic_partition_name(str(_get(pool, "name"))): i
        for i, pool in _items(raw, "workerPools")
        if isinstance(_get(pool, "elastic"), dict)
    }
    for i, partition in _items(raw, "partitions"):
        name = _get(partition, "name")
        if isinstance(name, str) and name in hidden:
            yield SpecIssue(
                join_path("partitions", i, "name"),
                f"{name!r} is the hidden partition that holds the power-saving settings of "
                f"elastic pool workerPools[{hidden[name]}]: pick another name",
            )


def version_specific_options(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Options that only some Slurm majors know are used only on those."""
    version = _version(raw)
    controller = _get(raw, "controller", {})
    if _get(_get(controller, "metrics", {}), "enabled") is True and not at_least(version, "25.11"):
        yield SpecIssue(
            "controller.metrics.enabled",
            f"the metrics endpoint needs Slurm 25.11 or newer; slurmVersion is {version} "
            "(use 26.05 or set enabled: false)",
        )
    site = _get(raw, "siteScripts", {})
    for field in ("taskProlog", "taskEpilog"):
        if _get(site, field) is not None and not at_least(version, "25.11"):
            yield SpecIssue(
                join_path("siteScripts", field),
                f"needs Slurm 25.11 or newer, where configless slurmctld sends task scripts "
                f"to the nodes; slurmVersion is {version} (use 26.05, or do the work in a "
                "prolog script)",
            )
    if _get(raw, "topology") is not None and not at_least(version, "25.05"):
        yield SpecIssue(
            "topology",
            f"needs Slurm 25.05 or newer, where a dynamic node joins its switch as it "
            f"registers (slurmd --conf Topology=); slurmVersion is {version} (use 26.05, or "
            "leave topology unset)",
        )
    parameters = _get(_get(controller, "scheduler", {}), "parameters", [])
    for i, parameter in enumerate(parameters if isinstance(parameters, list) else []):
        if (
            isinstance(parameter, str)
            and parameter.startswith("requeue_delay=")
            and not at_least(version, "26.05")
        ):
            yield SpecIssue(
                join_path("controller", "scheduler", "parameters", i),
                f"requeue_delay needs Slurm 26.05 or newer; slurmVersion is {version} (before "
                "26.05 a requeued job waits AuthInfo's cred_expire, 120 s by default)",
            )


def pools_have_switches(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """With a topology, every pool names its leaf switch or the node label that names it (a
    node outside the topology would not be placed with the others), and no pool's switch is
    the root; without one, no pool names a switch."""
    topology = _get(raw, "topology")
    root = _get(topology, "rootSwitch", "root") if isinstance(topology, dict) else None
    for i, pool in _items(raw, "workerPools"):
        switch = _get(pool, "switch")
        label = _get(pool, "switchLabel")
        path = join_path("workerPools", i, "switch")
        if switch is not None and label is not None:
            yield SpecIssue(
                join_path("workerPools", i, "switchLabel"),
                "a pool takes `switch` (one switch for all its nodes) or `switchLabel` (each "
                "node's switch from its Kubernetes node), not both",
            )
        elif topology is None and (switch is not None or label is not None):
            key = "switch" if switch is not None else "switchLabel"
            yield SpecIssue(
                join_path("workerPools", i, key),
                f"`{key}` needs `topology` (topology: {{}} at least)",
            )
        elif topology is not None and switch is None and label is None:
            yield SpecIssue(
                path,
                "required with `topology`: the leaf switch of this pool's nodes (a DNS label, "
                "such as leaf-1), or `switchLabel`: the Kubernetes node label that names it",
            )
        elif topology is not None and switch == root:
            yield SpecIssue(
                path,
                f"'{switch}' is topology.rootSwitch; a pool's nodes hang off a leaf switch "
                "below it",
            )


def node_labels_need_node_state(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Only the node-state controller may read Kubernetes nodes: `switchLabel` and
    `labelFeatures` need it."""
    enabled = _get(_get(raw, "nodeState", {}), "enabled", False) is True
    if enabled:
        return
    for i, pool in _items(raw, "workerPools"):
        for key in ("switchLabel", "labelFeatures"):
            if _get(pool, key):
                yield SpecIssue(
                    join_path("workerPools", i, key),
                    "needs `nodeState.enabled: true`: the node-state controller is the only "
                    "pod that may read the Kubernetes nodes and their labels",
                )


def slurm_lines(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """slurm.conf lines, dynamic node options and partition options as the chosen Slurm
    version's daemons parse them (slurm_options.field_issues: its option tables, one Key=Value
    per item, values of the key's type), none of them a key slurm-stack sets."""
    version = _version(raw)
    extras = _get(_get(raw, "controller", {}), "slurmConfExtra", [])
    if isinstance(extras, list):
        yield from field_issues(
            ("controller", "slurmConfExtra"),
            extras,
            SLURM_CONF,
            version,
            SLURM_CONF_LINES,
            lambda key: key_problem(key, version),
        )
    for i, pool in _items(raw, "workerPools"):
        extras = _get(pool, "nodeConfExtra", [])
        if isinstance(extras, list):
            path = ("workerPools", i, "nodeConfExtra")
            yield from field_issues(path, extras, NODE, version, NODE_LINES)
    for i, partition in _items(raw, "partitions"):
        options = _get(partition, "options", [])
        if isinstance(options, list):
            path = ("partitions", i, "options")
            yield from field_issues(path, options, PARTITION, version, PARTITION_LINES)


def owned_lines_not_overridden(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Extra sshd lines do not override what slurm-stack sets, and name keywords the login
    image's sshd knows (slurm_stack/spec/sshd.py)."""
    extras = _get(_get(raw, "login", {}), "sshdExtra", [])
    for j, line in enumerate(extras if isinstance(extras, list) else []):
        if isinstance(line, str) and (problem := sshd_line_problem(line, _version(raw))):
            yield SpecIssue(join_path("login", "sshdExtra", j), problem)


# slurm.conf keys a siteScripts field sets when given.
SITE_SCRIPT_KEYS = {
    "prolog": "Prolog",
    "prologSlurmctld": "PrologSlurmctld",
    "epilogSlurmctld": "EpilogSlurmctld",
    "taskProlog": "TaskProlog",
    "taskEpilog": "TaskEpilog",
    "jobSubmitLua": "JobSubmitPlugins",
    "cliFilterLua": "CliFilterPlugins",
}


def _slurm_conf_extra_pairs(raw: Raw) -> Iterator[tuple[int, Pair]]:
    """Each `Key=Value` of controller.slurmConfExtra with its line's index; a line that does
    not parse is slurm_lines' to report."""
    extras = _get(_get(raw, "controller", {}), "slurmConfExtra", [])
    for j, line in enumerate(extras if isinstance(extras, list) else []):
        if not isinstance(line, str):
            continue
        try:
            pairs = parse_line(line)
        except ValueError:
            continue
        for pair in pairs:
            yield j, pair


def site_scripts_own_their_keys(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """A slurmConfExtra line may not set a key that a given siteScripts field sets: one of
    the two would silently win."""
    site = _get(raw, "siteScripts", {})
    if not isinstance(site, dict):
        return
    given = {
        key.lower(): field
        for field, key in SITE_SCRIPT_KEYS.items()
        if site.get(field) not in (None, [], "")
    }
    for j, pair in _slurm_conf_extra_pairs(raw):
        if (field := given.get(pair.key.lower())) is not None:
            yield SpecIssue(
                join_path("controller", "slurmConfExtra", j),
                f"{pair.key} is set by siteScripts.{field}; give the script there "
                f"and drop this line",
            )


BYTE_RESOURCES = ("memory", "ephemeral-storage")
# Below this a memory or storage size is a unit left out ('20' for '20Gi'): no container
# starts in that little memory, and its logs alone take more disk.
MIN_BYTES = 2**20


def _resources_sections(raw: Raw) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    for section in ("controller", "login", "accounting"):
        yield (section, "resources"), _get(_get(raw, section, {}), "resources")
    yield (
        ("accounting", "embedded", "resources"),
        _get(_get(_get(raw, "accounting", {}), "embedded", {}), "resources"),
    )
    for i, pool in _items(raw, "workerPools"):
        yield ("workerPools", i, "resources"), _get(pool, "resources")


def _quantities(values: Any) -> dict[str, Any]:
    """The valid quantities of a requests or limits mapping (pydantic reports the others)."""
    out = {}
    for name, text in values.items() if isinstance(values, dict) else []:
        try:
            out[name] = parse_quantity(text) if isinstance(text, str) else None
        except ValueError:
            out[name] = None
    return {name: value for name, value in out.items() if value is not None}


def _bytes_in_words(value: Any) -> str:
    """A byte count of a kilobyte or more as a person reads it, ' (2.0 MB)'; else ''."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if value >= size:
            return f" ({float(value) / size:.1f} {unit})"
    return ""


def resources_make_sense(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Memory and ephemeral storage are whole bytes with a unit (a bare number is always a
    unit left out), limits are not 0, and no request is above its limit (Kubernetes would
    refuse the pod only at `pulumi up`)."""
    for path, resources in _resources_sections(raw):
        if not isinstance(resources, dict):
            continue
        requests = _quantities(_get(resources, "requests"))
        limits = _quantities(_get(resources, "limits"))
        for kind, values in (("requests", requests), ("limits", limits)):
            texts = _get(resources, kind)
            for name in BYTE_RESOURCES:
                if name not in values:
                    continue
                text, value = texts[name], values[name]
                key = join_path(*path, kind, name)
                if value == 0 and kind == "limits":
                    yield SpecIssue(
                        key,
                        f"a limit of {text!r} leaves no room at all: give a size, "
                        "or leave the limit out for none",
                    )
                elif value != value.to_integral_value():
                    milli = text.strip().endswith("m")
                    yield SpecIssue(
                        key,
                        f"{text!r} is {value.normalize():f} bytes, a fraction of a byte: "
                        + (
                            f"'m' means milli; write '{text.strip()[:-1]}Mi' for mebibytes"
                            if milli
                            else "give whole bytes, e.g. '512Mi' or '2Gi'"
                        ),
                    )
                elif str(text).strip().isdigit():
                    # Kubernetes reads a bare number as bytes: 2000000 is 2 MB, which no
                    # daemon runs in; a size without a unit is always a unit left out here.
                    yield SpecIssue(
                        key,
                        f"{text!r} has no unit, and Kubernetes reads it as {value:f} bytes"
                        f"{_bytes_in_words(value)}: add a unit, e.g. '{text}Mi' or '{text}Gi'",
                    )
                elif 0 < value < MIN_BYTES:
                    yield SpecIssue(
                        key,
                        f"{text!r} is {value:f} bytes, less than 1Mi: add a unit, e.g. '20Gi'",
                    )
        for name in sorted(requests.keys() & limits.keys()):
            if requests[name] > limits[name]:
                yield SpecIssue(
                    join_path(*path, "requests", name),
                    f"{_get(resources, 'requests')[name]!r} is more than limits.{name} "
                    f"{_get(resources, 'limits')[name]!r}: Kubernetes refuses a request above "
                    "its limit",
                )


def submounts_do_not_collide(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Within each pool (plus the jail's shared submounts) names and paths are unique."""
    shared = [
        (join_path("jail", "submounts", i), s)
        for i, s in _items(_get(raw, "jail", {}), "submounts")
    ]
    groups = [shared] + [
        shared
        + [(join_path("workerPools", p, "submounts", i), s) for i, s in _items(pool, "submounts")]
        for p, pool in _items(raw, "workerPools")
    ]
    seen: set[str] = set()
    for group in groups:
        for field in ("name", "mountPath"):
            counts = Counter(v for _, s in group if isinstance(v := _get(s, field), str))
            for path, submount in group:
                value = _get(submount, field)
                where = join_path(path, field)
                if isinstance(value, str) and counts[value] > 1 and where not in seen:
                    seen.add(where)
                    yield SpecIssue(where, f"{value!r} is used by more than one submount here")


# The jail plugin holds at most 64 binds per node (chroot_plugin/jail_args.h, JAIL_MAX_BINDS);
# the node's own Slurm client and files (paths.SLURM_CLIENT_PATHS and a few more) take ~28.
MAX_SUBMOUNTS_PER_NODE = 32


def submounts_fit_the_jail_plugin(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """A node's submounts (the jail's plus its pool's) fit in the plugin's bind table."""
    shared = len(_items(_get(raw, "jail", {}), "submounts"))
    for p, pool in _items(raw, "workerPools"):
        total = shared + len(_items(pool, "submounts"))
        if total > MAX_SUBMOUNTS_PER_NODE:
            yield SpecIssue(
                join_path("workerPools", p, "submounts"),
                f"a node of this pool would have {total} submounts (jail.submounts plus "
                f"these); at most {MAX_SUBMOUNTS_PER_NODE} are supported",
            )


def jail_claims_are_shared(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """A jail submount is mounted by every login and worker pod: a pvc one must be a claim
    that exists, not one new claim per node."""
    for i, submount in _items(_get(raw, "jail", {}), "submounts"):
        per_node = _get(submount, "size") is not None and _get(submount, "existingClaim") is None
        if _get(submount, "type") == "pvc" and per_node:
            name = _get(submount, "name")
            yield SpecIssue(
                join_path("jail", "submounts", i, "size"),
                f"jail submount {name!r} is shared by login and workers, so it needs "
                "existingClaim, not a per-node size",
            )


def gpu_health_checks(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """The NCCL benchmark and DCGM have GPU pools to test; the benchmark has a threshold for
    each GPU type."""
    nccl = _get(_get(raw, "healthChecks", {}), "nccl", {})
    gpu_pools = [
        (i, pool)
        for i, pool in _items(raw, "workerPools")
        if isinstance(_get(pool, "gpus"), int) and _get(pool, "gpus") > 0
    ]
    enabled = _get(nccl, "enabled")
    if enabled is True and not gpu_pools:
        yield SpecIssue(
            "healthChecks.nccl.enabled",
            "the NCCL benchmark needs a pool with gpus > 0; no pool has GPUs",
        )
    dcgm = _get(_get(raw, "healthChecks", {}), "dcgm", {})
    for key in ("quick", "periodic"):
        if _get(dcgm, key) is True and not gpu_pools:
            yield SpecIssue(
                f"healthChecks.dcgm.{key}",
                "DCGM diagnoses GPUs: it needs a pool with gpus > 0; no pool has GPUs",
            )
    if enabled is False or not gpu_pools:
        return
    thresholds = _get(nccl, "thresholdsGbps")
    if not isinstance(thresholds, dict):
        thresholds = {"a100": 0, "h100": 0, "h200": 0, "b200": 0}
    for i, pool in gpu_pools:
        gpu_type = _get(pool, "gpuType")
        if gpu_type is not None and not isinstance(gpu_type, str):
            continue  # a type error, reported by the model
        if gpu_type is None:
            yield SpecIssue(
                join_path("workerPools", i, "gpuType"),
                "GPU pools need a gpuType (e.g. 'h100') so the NCCL benchmark can pick a "
                "threshold; or set healthChecks.nccl.enabled: false",
            )
        elif gpu_type not in thresholds:
            yield SpecIssue(
                join_path("healthChecks", "nccl", "thresholdsGbps", str(gpu_type)),
                f"no bus-bandwidth threshold for gpuType {gpu_type!r} "
                f"(workerPools[{i}]); known: {', '.join(sorted(map(str, thresholds))) or '(none)'}",
            )


def external_db_password(raw: Raw, ctx: RuleContext) -> Iterator[SpecIssue]:
    """An external accounting database comes with a password."""
    accounting = _get(raw, "accounting", {})
    if _get(accounting, "enabled", True) is False or _get(accounting, "mode") != "external":
        return
    if _get(_get(accounting, "external", {}), "passwordSecret") is None and not (
        ctx.db_password_provided
    ):
        yield SpecIssue(
            "accounting.external.passwordSecret",
            "an external database needs a password: `pulumi config set --secret "
            f"{DB_PASSWORD_CONFIG_KEY.split(':')[1]} <password>` or external.passwordSecret "
            "(an existing Secret's name and key)",
        )


def user_ids_are_distinct(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """Declared users get distinct uids, and each gid names one group: a user's own group
    (named after the user) or a supplementary group. A derived id that happens to collide asks
    for an explicit one."""
    users = [
        (i, user)
        for i, user in _items(_get(raw, "login", {}), "users")
        if isinstance(_get(user, "name"), str)
    ]

    def declared(user: Raw, key: str) -> int | None:
        value = _get(user, key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    uids: dict[int, str] = {}
    gids: dict[int, str] = {}  # gid -> group name
    for i, user in users:
        name = _get(user, "name")
        uid = declared(user, "uid")
        uid = derived_id(name) if uid is None else uid
        uid_clash = uids.setdefault(uid, name) != name
        if uid_clash:
            yield SpecIssue(
                join_path("login", "users", i, "uid"),
                f"uid {uid} of {name!r} is also the uid of {uids[uid]!r}; "
                "set a distinct uid for one of them",
            )
        gid = declared(user, "gid")
        if gid is None and uid_clash:
            continue  # the group would follow the uid: one error says it
        key = "gid" if gid is not None else "uid"
        gid = uid if gid is None else gid
        if gids.setdefault(gid, name) != name:
            yield SpecIssue(
                join_path("login", "users", i, key),
                f"{name!r}'s own group would have gid {gid}, which is group {gids[gid]!r}'s; "
                "set a distinct gid (shared groups go in groups)",
            )
    own_groups = {_get(user, "name") for _, user in users}
    for i, user in users:
        groups = _get(user, "groups", [])
        for j, group in enumerate(groups if isinstance(groups, list) else []):
            if not isinstance(group, str) or group in own_groups:
                continue
            gid = derived_id(group)
            if gids.setdefault(gid, group) != group:
                yield SpecIssue(
                    join_path("login", "users", i, "groups", j),
                    f"group {group!r} would get gid {gid}, which is group {gids[gid]!r}'s; "
                    "rename one of them",
                )


def directory_bind_password(raw: Raw, ctx: RuleContext) -> Iterator[SpecIssue]:
    """A bind DN comes with its password, as a Pulumi secret; a password needs a bind DN."""
    directory = _get(raw, "directory")
    if not isinstance(directory, dict):
        return
    key = LDAP_PASSWORD_CONFIG_KEY.split(":")[1]
    if _get(directory, "bindDn") is not None and not ctx.ldap_password_provided:
        yield SpecIssue(
            "directory.bindDn",
            f"a bind DN needs its password: `pulumi config set --secret {key} <password>`",
        )
    if _get(directory, "bindDn") is None and ctx.ldap_password_provided:
        yield SpecIssue(
            "directory.bindDn",
            f"{key} is set but directory.bindDn is not: set the DN to bind as, or remove "
            f"the password to bind anonymously",
        )


def jail_cache_without_root_jobs(raw: Raw, ctx: RuleContext) -> Iterator[SpecIssue]:
    """The fetch program writes the jail's image cache as the pod's root: root in the jail,
    which root jobs run as, could race it into writing elsewhere in the pod."""
    containers = _get(raw, "containers")
    if (
        _get(containers, "enabled") is True
        and _get(containers, "cache") == "jail"
        and _get(_get(raw, "jail"), "allowRootJobs") is True
    ):
        yield SpecIssue(
            "containers.cache",
            "jail is refused with jail.allowRootJobs: root jobs could change the shared image "
            "cache; use cache: node",
        )


def registry_auth_needs_containers(raw: Raw, ctx: RuleContext) -> Iterator[SpecIssue]:
    """Registry credentials are for container jobs: without them, nothing would read them."""
    if ctx.registry_auth_provided and _get(_get(raw, "containers"), "enabled") is not True:
        key = REGISTRY_AUTH_CONFIG_KEY.split(":")[1]
        yield SpecIssue(
            "containers.enabled",
            f"{key} is set but container jobs are off: set containers.enabled: true, or "
            f"remove the credentials (`pulumi config rm {key}`)",
        )


def node_sshd_needs_cgroups(raw: Raw, _: RuleContext) -> Iterator[SpecIssue]:
    """sshd on workers adopts each session into the user's job, which only Slurm's cgroup
    plugins can do (pam_slurm_adopt needs proctrack/cgroup and task/cgroup); and the job's
    extern step to adopt into exists only with PrologFlags=Contain."""
    pools = [i for i, pool in _items(raw, "workerPools") if _get(pool, "sshd") is True]
    if not pools:
        return
    if _get(_get(raw, "cgroups", {}), "enforce") is not True:
        for i in pools:
            yield SpecIssue(
                join_path("workerPools", i, "sshd"),
                "needs `cgroups.enforce: true`: pam_slurm_adopt puts each ssh session into "
                "the user's job with Slurm's cgroup plugins (proctrack/cgroup, task/cgroup), "
                "which run only with cgroup enforcement",
            )
    for j, pair in _slurm_conf_extra_pairs(raw):
        flags = [flag.strip().lower() for flag in pair.value.split(",")]
        if pair.key.lower() == "prologflags" and "contain" not in flags:
            yield SpecIssue(
                join_path("controller", "slurmConfExtra", j),
                f"workerPools[{pools[0]}].sshd needs PrologFlags to include Contain (the "
                f"job's extern step that ssh sessions join): add it to this line, e.g. "
                f"'PrologFlags={pair.value},Contain'",
            )


RULES: tuple[Rule, ...] = (
    unique_names,
    pool_names_fit,
    features_are_not_pool_names,
    partitions_know_their_pools,
    outside_hosts_are_not_pods,
    node_count_fits,
    elastic_partitions_are_free,
    version_specific_options,
    pools_have_switches,
    node_labels_need_node_state,
    slurm_lines,
    owned_lines_not_overridden,
    site_scripts_own_their_keys,
    resources_make_sense,
    submounts_do_not_collide,
    submounts_fit_the_jail_plugin,
    jail_claims_are_shared,
    gpu_health_checks,
    external_db_password,
    user_ids_are_distinct,
    directory_bind_password,
    registry_auth_needs_containers,
    jail_cache_without_root_jobs,
    node_sshd_needs_cgroups,
)


def cross_field_issues(raw: Raw, ctx: RuleContext) -> list[SpecIssue]:
    """Every relational issue in the raw stack config."""
    return [issue for rule in RULES for issue in rule(raw, ctx)]
