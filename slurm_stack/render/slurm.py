"""slurm.conf, cgroup.conf, gres.conf, plugstack.conf and a pool's dynamic-node --conf."""

from dataclasses import dataclass

from slurm_stack import naming, paths
from slurm_stack.render.environment import render_template
from slurm_stack.render.site_scripts import site_settings
from slurm_stack.spec.fields import key_of
from slurm_stack.spec.models import ClusterSpec, OutsidePool, Partition, WorkerPool
from slurm_stack.spec.versions import at_least, key_problem


@dataclass(frozen=True)
class Section:
    """A commented group of slurm.conf settings."""

    title: str
    settings: list[tuple[str, str]]


@dataclass(frozen=True)
class SubmountBind:
    """A node-local submount: staged at `source` in the pod, bound at `target` in the jail."""

    source: str
    target: str


def render_slurm_conf(spec: ClusterSpec) -> str:
    """slurm.conf for configless dynamic nodes: its size does not depend on node counts."""
    extra = list(spec.controller.slurm_conf_extra)
    for line in extra:
        if problem := key_problem(key_of(line), spec.slurm_version):
            raise ValueError(f"controller.slurmConfExtra {line!r}: {problem}")
    overridden = {key_of(line).lower() for line in extra}

    def keep(settings: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(key, value) for key, value in settings if key.lower() not in overridden]

    sections = [Section(title, keep(settings)) for title, settings in _sections(spec)]
    return render_template(
        "slurm.conf.j2",
        cluster=spec.name,
        version=spec.slurm_version,
        sections=[section for section in sections if section.settings],
        pools=spec.pool_names,
        partitions=[_partition(spec, partition) for partition in spec.effective_partitions],
        elastic_partitions=[_elastic_partition(pool) for pool in spec.elastic_pools],
        extra=extra,
    )


def _elastic_partition(pool: WorkerPool) -> str:
    """The hidden, inactive partition over an elastic pool's nodes: Slurm reads SuspendTime
    and ResumeTimeout per partition (a node takes the highest of its partitions' values),
    and a fixed pool's nodes, in no such partition, keep the global SuspendTime: never."""
    assert pool.elastic is not None
    return (
        f"PartitionName={naming.elastic_partition_name(pool.name)} Nodes={pool.name} "
        f"Hidden=YES State=INACTIVE Default=NO SuspendTime={pool.elastic.idle_seconds} "
        f"ResumeTimeout={pool.elastic.start_timeout_seconds}"
    )


def always_running_nodes(spec: ClusterSpec) -> str:
    """SuspendExcNodes: each elastic pool's minReplicas lowest ordinals, as a hostlist."""
    ranges = []
    for pool in spec.elastic_pools:
        assert pool.elastic is not None
        prefix, count = f"{naming.pool_name(spec.name, pool.name)}-", pool.elastic.min_replicas
        if count == 1:
            ranges.append(f"{prefix}0")
        elif count > 1:
            ranges.append(f"{prefix}[0-{count - 1}]")
    return ",".join(ranges)


def power_saving(spec: ClusterSpec) -> list[tuple[str, str]]:
    """Slurm's power saving drives the elastic pools (docs/elastic.md); the programs are links
    to the controller image's healthcheck program (healthchecks/.../elastic.py)."""
    if not spec.elastic_pools:
        return []
    settings = [
        ("ResumeProgram", paths.ELASTIC_RESUME),
        ("SuspendProgram", paths.ELASTIC_SUSPEND),
        ("ResumeFailProgram", paths.ELASTIC_RESUME_FAIL),
    ]
    if nodes := always_running_nodes(spec):
        settings.append(("SuspendExcNodes", nodes))
    return settings


POWER_SAVE_INTERVAL = 1


def slurmctld_parameters(spec: ClusterSpec) -> str:
    """SlurmctldParameters: configless; with elastic pools also idle_on_node_suspend (a node
    given back leaves any drain or down state behind: its next pod is a new one) and
    power_save_interval=1 (Slurm looks for nodes to power up or down every second, not every
    10: a queued job's pods are asked for at once). A node's address is learned as it
    registers (Slurm's default since cloud_reg_addrs went)."""
    parameters = ["enable_configless"]
    if spec.elastic_pools:
        parameters += ["idle_on_node_suspend", f"power_save_interval={POWER_SAVE_INTERVAL}"]
    return ",".join(parameters)


def _partition(spec: ClusterSpec, partition: Partition) -> dict[str, object]:
    nodesets = partition.pools or spec.pool_names
    options = list(partition.options)
    own_default = any(key_of(o).lower() in DEFAULT_MEMORY_KEYS for o in options)
    if not own_default and (per_cpu := default_mem_per_cpu(spec, nodesets)) is not None:
        options.insert(0, f"DefMemPerCPU={per_cpu}")
    return {
        "name": partition.name,
        "nodesets": nodesets,
        "default": partition.default,
        "max_time": partition.max_time,
        "options": options,
    }


# Seconds a requeued batch job waits before it may start again (Slurm 26.05's requeue_delay;
# before it, the credential lifetime, 120 s). The wait keeps a relaunch on the same node from
# meeting the old run's revoked credential; 10 s covers that, and a job requeued because its
# pod went away starts elsewhere two minutes sooner.
REQUEUE_DELAY_SECONDS = 10


def scheduler_parameters(spec: ClusterSpec) -> list[str]:
    """controller.scheduler.parameters plus our requeue_delay, unless the list sets one."""
    parameters = list(spec.controller.scheduler.parameters)
    own = any(p.split("=", 1)[0] == "requeue_delay" for p in parameters)
    if at_least(spec.slurm_version, "26.05") and not own:
        parameters.append(f"requeue_delay={REQUEUE_DELAY_SECONDS}")
    return parameters


def jwt_auth(spec: ClusterSpec) -> list[tuple[str, str]]:
    """With the REST API, slurmctld and slurmdbd also accept JSON Web Tokens signed with the
    generated key (doc/html/jwt.shtml); only those two daemons load AuthAltTypes."""
    if not spec.rest_api.enabled:
        return []
    return [
        ("AuthAltTypes", "auth/jwt"),
        ("AuthAltParameters", f"jwt_key={paths.JWT_KEY_DIR}/{paths.JWT_KEY_FILE}"),
    ]


def _sections(spec: ClusterSpec) -> list[tuple[str, list[tuple[str, str]]]]:
    cluster, namespace = spec.name, spec.namespace
    enforce = spec.cgroups.enforce
    scheduler = spec.controller.scheduler
    sections: list[tuple[str, list[tuple[str, str]]]] = [
        (
            "Daemons",
            [
                ("ClusterName", cluster),
                *(
                    ("SlurmctldHost", f"{host}({address})")
                    for host, address in naming.controller_pod_hosts(
                        cluster, namespace, spec.controller.replicas
                    )
                ),
                *(
                    [("SlurmctldTimeout", str(spec.controller.takeover_after_seconds))]
                    if spec.controller.takeover_after_seconds is not None
                    else []
                ),
                ("SlurmctldPort", str(paths.SLURMCTLD_PORT)),
                ("SlurmdPort", str(paths.SLURMD_PORT)),
                ("SrunPortRange", "{}-{}".format(*paths.SRUN_PORT_RANGE)),
                ("SlurmUser", "slurm"),
                ("SlurmdUser", "root"),
                ("AuthType", f"auth/{spec.auth}"),
                ("CredType", f"cred/{spec.auth}"),
                *jwt_auth(spec),
                ("StateSaveLocation", paths.STATE_SAVE_DIR),
                ("SlurmdSpoolDir", paths.SLURMD_SPOOL_DIR),
                ("SlurmctldPidFile", f"{paths.SLURM_RUN_DIR}/slurmctld.pid"),
                ("SlurmdPidFile", f"{paths.SLURM_RUN_DIR}/slurmd.pid"),
                # The images have no mailer: Slurm's default (/bin/mail) made slurmctld log
                # "Configured MailProg is invalid" at every start. --mail-type sends nothing.
                ("MailProg", "/bin/true"),
            ],
        ),
        (
            "Configless dynamic nodes (slurmd -Z --conf-server): no per-node lines here",
            [
                ("SlurmctldParameters", slurmctld_parameters(spec)),
                ("MaxNodeCount", str(spec.controller.max_node_count)),
                ("TreeWidth", "65533"),
                ("ReturnToService", "2"),
            ],
        ),
        (
            "Scheduling",
            [
                ("SchedulerType", scheduler.type),
                *(
                    [("SchedulerParameters", ",".join(parameters))]
                    if (parameters := scheduler_parameters(spec))
                    else []
                ),
                # sbatch/srun refuse a job a partition's limits forbid, instead of queueing
                # it forever; a slurmConfExtra line overrides it.
                ("EnforcePartLimits", "ALL"),
                ("SelectType", "select/cons_tres"),
                ("SelectTypeParameters", scheduler.select_type_parameters),
                # Also without GPU pools: slurmd reads gres.conf (its AutoDetect=off) before
                # Slurm 26.05's GPU probe of a dynamic node only where a GRES type is named;
                # else every CPU node probes each GPU library and logs "System GPU detection
                # failed" at start (slurmd.c, _insert_gpu_conf; gres.c, gres_parse_conf).
                ("GresTypes", "gpu"),
                ("ProctrackType", "proctrack/cgroup" if enforce else "proctrack/linuxproc"),
                ("TaskPlugin", "task/affinity,task/cgroup" if enforce else "task/affinity"),
                (
                    "JobAcctGatherType",
                    "jobacct_gather/cgroup" if enforce else "jobacct_gather/linux",
                ),
                ("LaunchParameters", "use_interactive_step"),
                ("MpiDefault", "none"),
                # Each job gets an extern step on every node at allocation: the step that
                # pam_slurm_adopt puts a user's ssh session into (workerPools[].sshd).
                *([("PrologFlags", "Contain")] if spec.node_sshd_pools else []),
            ],
        ),
    ]
    sections.append(
        (
            "Job isolation: each job's private /tmp and /dev/shm go, and its leftover "
            "processes are killed, when it ends",
            [
                ("Epilog", paths.EPILOG),
                *([] if spec.jail.allow_root_jobs else [("DisableRootJobs", "YES")]),
            ],
        )
    )
    if settings := site_settings(spec):
        sections.append(("The site's scripts (siteScripts)", settings))
    if spec.accounting.enabled:
        sections.append(
            (
                "Accounting through slurmdbd",
                [
                    ("AccountingStorageType", "accounting_storage/slurmdbd"),
                    ("AccountingStorageHost", naming.accounting_host(cluster, namespace)),
                    ("AccountingStoragePort", str(paths.SLURMDBD_PORT)),
                    # Only users with an association may submit (the users Job makes them),
                    # and a removed user's association allows no more submissions.
                    ("AccountingStorageEnforce", "associations,limits,qos"),
                    *([("AccountingStorageTRES", "gres/gpu")] if spec.gpu_pools else []),
                    # A job's comment reaches sacct only with this flag: the NCCL benchmark's
                    # verdict is its job's comment, and the metrics exporter reads it there.
                    # A slurmConfExtra line of this key replaces it.
                    ("AccountingStoreFlags", "job_comment"),
                ],
            )
        )
    if settings := power_saving(spec):
        sections.append(
            (
                "Elastic pools: Slurm's power saving starts and gives back their pods; each "
                "pool's SuspendTime and ResumeTimeout are on its hidden partition",
                settings,
            )
        )
    quick = spec.health_checks.quick
    if quick.enabled:
        sections.append(
            (
                "Quick health checks; failures drain with a 'healthcheck:' reason",
                [
                    ("HealthCheckProgram", paths.HEALTHCHECK_PROGRAM),
                    ("HealthCheckInterval", str(quick.interval_seconds)),
                    ("HealthCheckNodeState", ",".join(quick.node_states)),
                    *health_check_timeout(spec),
                ],
            )
        )
    if spec.controller.metrics.enabled and at_least(spec.slurm_version, "25.11"):
        sections.append(("Metrics", [("MetricsType", "metrics/openmetrics")]))
    if spec.topology:
        sections.append(
            (
                "Network topology (topology.conf): each dynamic node joins its pool's switch "
                "as it registers",
                [("TopologyPlugin", "topology/tree")],
            )
        )
    return sections


def render_cgroup_conf(spec: ClusterSpec) -> str:
    """cgroup.conf: enforcement only when the stack asks for it (privileged slurmd)."""
    return render_template("cgroup.conf.j2", cluster=spec.name, cgroups=spec.cgroups.enforce)


def render_topology_conf(spec: ClusterSpec) -> str | None:
    """topology.conf: the root switch over every pool's leaf switch (and the leaf that nodes
    whose switch is a label's wait on), each leaf declared without nodes; a dynamic node
    joins its leaf as it registers (node_conf's Topology=). None without a topology."""
    if not spec.topology:
        return None
    leaves = sorted(
        {pool.switch for pool in spec.worker_pools if pool.switch}
        | ({naming.UNPLACED_SWITCH} if any(p.switch_label for p in spec.worker_pools) else set())
    )
    lines = [f"# topology.conf rendered by slurm-stack for cluster {spec.name}."]
    lines += [f"SwitchName={leaf}" for leaf in leaves]
    root = f"SwitchName={spec.topology.root_switch}"
    lines.append(f"{root} Switches={','.join(leaves)}" if leaves else root)
    return "\n".join(lines) + "\n"


def render_gres_conf(spec: ClusterSpec) -> str:
    """gres.conf: each node's GPUs come from the file its entrypoint writes (NODE_GRES_CONF)."""
    pools = [
        {"name": pool.name, "gpus": pool.gpus, "gpu_type": pool.gpu_type} for pool in spec.gpu_pools
    ]
    return render_template(
        "gres.conf.j2",
        cluster=spec.name,
        gpu_pools=pools,
        node_gres_conf=paths.NODE_GRES_CONF,
    )


def submount_binds(spec: ClusterSpec) -> list[SubmountBind]:
    """Every submount of the jail and of all pools, by jail path; each node binds those it has."""
    targets = sorted(
        {s.mount_path for s in spec.jail.submounts}
        | {s.mount_path for pool in spec.worker_pools for s in pool.submounts}
    )
    return [SubmountBind(submount_staging_path(target), target) for target in targets]


def submount_staging_path(mount_path: str) -> str:
    """Where a pod mounts a submount before the jail plugin binds it at ``mount_path``."""
    return f"{paths.SUBMOUNT_STAGING_DIR}{mount_path}"


# Bound read-only into every task's jail: the pod's name service files (cluster DNS and the
# pod's own name are node-local, the jail's copies know neither) and the project's library
# directory (srun inside a job loads the plugin from the same path; the NCCL job runs the
# health-check program).
NODE_LOCAL_READ_ONLY = ("/etc/hosts", "/etc/resolv.conf", paths.PROJECT_LIB_DIR)


def container_cache_dir(spec: ClusterSpec) -> str:
    """Where worker pods keep container jobs' unpacked images (containers.cache)."""
    if spec.containers.cache == "jail":
        return paths.CONTAINER_CACHE_JAIL_DIR
    return paths.CONTAINER_CACHE_NODE_DIR


def _container_args(spec: ClusterSpec) -> dict[str, str]:
    """The plugin's container_* arguments: none unless containers are on."""
    if not spec.containers.enabled:
        return {}
    args = {
        "container_fetch": paths.CONTAINER_FETCH,
        "container_cache": container_cache_dir(spec),
    }
    if spec.containers.insecure_registries:
        args["container_insecure"] = ",".join(spec.containers.insecure_registries)
    return args


def render_plugstack_conf(spec: ClusterSpec) -> str:
    """plugstack.conf loading the chroot SPANK plugin with the jail and its binds."""
    return render_template(
        "plugstack.conf.j2",
        cluster=spec.name,
        plugin=paths.CHROOT_PLUGIN,
        jail=paths.JAIL_DIR,
        spool=paths.SLURMD_SPOOL_DIR,
        munge=paths.MUNGE_SOCKET_DIR,
        job_tmp=paths.JOB_TMP_DIR,
        job_shm=paths.JOB_SHM_DIR,
        gpu_driver=paths.GPU_DRIVER_DIR if spec.gpu_pools else None,
        # A step sees only its GPUs: its /dev holds no other (with cgroups.enforce Slurm's
        # device cgroup confines them instead, and numbers them for tasks itself).
        gpus=paths.NODE_GRES_CONF if spec.gpu_pools and not spec.cgroups.enforce else None,
        allow_opt_out=spec.jail.allow_opt_out,
        containers=_container_args(spec),
        submounts=submount_binds(spec),
        client=paths.SLURM_CLIENT_PATHS,
        read_only=(
            *NODE_LOCAL_READ_ONLY,
            # auth/slurm: tasks' clients (srun in a batch script) ask slurmd's sack socket.
            *([paths.SLURM_RUN_DIR] if spec.auth == "slurm" else []),
            # A directory: tasks resolve its users through the node's sssd.
            *([paths.SSS_PIPES_DIR] if spec.directory else []),
        ),
    )


def node_conf(pool: WorkerPool) -> str:
    """The `slurmd -Z --conf` string of a pool's nodes."""
    features = ",".join([pool.name, *pool.features])
    parts = [f"Feature={features}"]
    if pool.gpus:
        gres_type = f"{pool.gpu_type}:" if pool.gpu_type else ""
        parts.append(f"Gres=gpu:{gres_type}{pool.gpus}")
    parts.append(f"Weight={pool.weight}")
    if pool.switch:
        # The topology.conf topology is named "default"; the leaf exists there already.
        parts.append(f"Topology=default:{pool.switch}")
    elif pool.switch_label:
        # Its switch is the Kubernetes node's label, which only the node-state controller
        # reads: no job lands on the node before the controller has placed it.
        parts.append(f'State=DRAIN Reason="{naming.AWAITING_SWITCH_REASON}"')
        parts.append(f"Topology=default:{naming.UNPLACED_SWITCH}")
    extra_keys = {key_of(line).lower() for line in pool.node_conf_extra}
    memory, cpus = pool.real_memory, pool.cpus
    if memory is not None and "realmemory" not in extra_keys:
        parts.append(f"RealMemory={memory}")
    if cpus is not None and "cpus" not in extra_keys:
        parts.append(f"CPUs={cpus}")
    parts.extend(pool.node_conf_extra)
    return " ".join(parts)


def outside_node_conf(pool: OutsidePool) -> str:
    """The `slurmd -Z --conf` string of an outside pool's hosts: CPUs and memory as declared,
    else what slurmd finds on the host."""
    parts = [f"Feature={','.join([pool.name, *pool.features])}", f"Weight={pool.weight}"]
    if pool.real_memory is not None:
        parts.append(f"RealMemory={pool.real_memory}")
    if pool.cpus is not None:
        parts.append(f"CPUs={pool.cpus}")
    return " ".join(parts)


DEFAULT_MEMORY_KEYS = ("defmempercpu", "defmempergpu", "defmempernode")


def default_mem_per_cpu(spec: ClusterSpec, pools: list[str]) -> int | None:
    """A partition's DefMemPerCPU: the smallest memory per CPU among its pools' nodes (a
    pool's `defMemPerCpu`, else RealMemory over CPUs), so a job that asks no --mem gets its
    CPUs' share of a node, not the whole node (and a second job fits beside it). None when a
    pool's memory or CPUs are unknown at render time, or the user set a default of their own
    in controller.slurmConfExtra."""
    if any(
        key_of(line).lower() in DEFAULT_MEMORY_KEYS for line in spec.controller.slurm_conf_extra
    ):
        return None
    shares = []
    for outside in (p for p in spec.outside_pools if p.name in pools):
        memory, cpus = outside.real_memory, outside.cpus
        if memory is None or cpus is None:
            return None
        shares.append(max(memory // cpus, 1))
    for pool in (p for p in spec.worker_pools if p.name in pools):
        if pool.def_mem_per_cpu is not None:
            shares.append(pool.def_mem_per_cpu)
            continue
        memory, cpus = pool.node_value("RealMemory"), pool.node_value("CPUs")
        if memory is None or cpus is None:
            return None
        shares.append(max(memory // cpus, 1))
    return min(shares) if shares else None


DEFAULT_HEALTH_CHECK_TIMEOUT = 60  # Slurm's, read_config.h


def health_check_timeout(spec: ClusterSpec) -> list[tuple[str, str]]:
    """HealthCheckTimeout below HealthCheckInterval: Slurm 26.05 logs an error at every start
    when its default (60 s) is not below the interval (read_config.c); 24.11 has no such key.
    Set only where the default does not do: a config that 24.11 also parses is one that the
    older daemons still running during a version change can read."""
    interval = spec.health_checks.quick.interval_seconds
    if not at_least(spec.slurm_version, "26.05") or interval > DEFAULT_HEALTH_CHECK_TIMEOUT:
        return []
    return [("HealthCheckTimeout", str(interval - 1))]
