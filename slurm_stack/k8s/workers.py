"""A worker pool: slurmd pods that register as dynamic nodes and enter the jail for every task."""

import hashlib
import json

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    AWAIT_EXISTENCE_ONLY,
    PARALLEL,
    POOL_LABEL,
    ROLLING_UPDATE,
    SKIP_AWAIT,
    Manifest,
    auth_mounts,
    auth_sidecars,
    auth_volumes,
    conf_server,
    container,
    env,
    image_pull,
    metadata,
    placement,
    pod_security,
    resources,
    root_with,
    run_volume,
    selector_labels,
    tcp_probe,
)
from slurm_stack.k8s.directory import sss_pipes_mounts, sssd_sidecars, sssd_volumes
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.jail import (
    jail_volume,
    submount_claim_template,
    submount_mount,
    submount_volume,
    wait_for_jail,
)
from slurm_stack.k8s.site_files import site_files_mounts, site_files_volumes
from slurm_stack.render import node_conf, node_sshd_config_map
from slurm_stack.spec.models import (
    WAIT_POLICY_GRACE_SECONDS,
    ClusterSpec,
    PvcSubmount,
    WorkerPool,
)

COMPONENT = "worker"
# slurmd starts tasks as users (SETUID/SETGID), cleans up after them (KILL, CHOWN, FOWNER,
# DAC_OVERRIDE, FSETID), pins tasks owned by users to their CPUs (SYS_NICE), raises their
# limits to the job's (SYS_RESOURCE), moves slurmstepd into the jail (SYS_ADMIN for the
# mount namespace and binds, SYS_CHROOT) and takes every other capability out of each task's
# bounding set (SETPCAP). A task keeps none of SYS_ADMIN, SYS_CHROOT, SYS_NICE,
# SYS_RESOURCE or SETPCAP (chroot_plugin/task_limits.c).
SLURMD_CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_ADMIN",
    "SYS_CHROOT",
    "SYS_NICE",
    "SYS_RESOURCE",
]
GPU_RESOURCE = "nvidia.com/gpu"


def pool_labels(pool: WorkerPool) -> dict[str, str]:
    """The extra label that tells pools apart."""
    return {POOL_LABEL: pool.name}


def pool_service(spec: ClusterSpec, pool: WorkerPool) -> Manifest:
    """A headless Service giving each node a DNS name; not awaited (pods may wait for GPUs)."""
    return {
        "metadata": metadata(
            spec,
            naming.pool_name(spec.name, pool.name),
            COMPONENT,
            annotations=SKIP_AWAIT,
            extra_labels=pool_labels(pool),
        ),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(spec, COMPONENT, **pool_labels(pool)),
            "ports": [{"name": "slurmd", "port": paths.SLURMD_PORT, "targetPort": "slurmd"}],
        },
    }


def _node_container_cache(spec: ClusterSpec) -> bool:
    return spec.containers.enabled and spec.containers.cache == "node"


def _container_mounts(spec: ClusterSpec) -> list[Manifest]:
    """Container jobs: the registry credentials and, with containers.cache node, the pod's own
    directory of unpacked images."""
    if not spec.containers.enabled:
        return []
    mounts = [{"name": "registry-auth", "mountPath": paths.REGISTRY_AUTH_DIR, "readOnly": True}]
    if _node_container_cache(spec):
        mounts.append({"name": "container-cache", "mountPath": paths.CONTAINER_CACHE_NODE_DIR})
    return mounts


def _container_volumes(spec: ClusterSpec) -> list[Manifest]:
    if not spec.containers.enabled:
        return []
    volumes: list[Manifest] = [
        {
            "name": "registry-auth",
            # Optional: the Secret exists only with containerRegistryAuth, and setting or
            # removing that later changes the files, not the pod template (no worker restarts).
            "secret": {
                "secretName": naming.registry_auth_secret_name(spec.name),
                "optional": True,
                "defaultMode": 0o400,
            },
        }
    ]
    if _node_container_cache(spec):
        # On the node's disk, as the pod's other files; it lives as long as the pod.
        volumes.append({"name": "container-cache", "emptyDir": {}})
    return volumes


def _sshd_mounts(pool: WorkerPool) -> list[Manifest]:
    """workerPools[].sshd: the nodes' sshd_config, the users' keys and the host keys."""
    if not pool.sshd:
        return []
    return [
        {"name": "sshd-config", "mountPath": paths.SSHD_CONFIG_DIR, "readOnly": True},
        {"name": "authorized-keys", "mountPath": paths.SSH_AUTHORIZED_KEYS_DIR, "readOnly": True},
        {"name": "host-keys", "mountPath": paths.SSH_HOST_KEY_DIR, "readOnly": True},
    ]


def _sshd_volumes(spec: ClusterSpec, pool: WorkerPool) -> list[Manifest]:
    if not pool.sshd:
        return []
    return [
        {
            "name": "sshd-config",
            "configMap": {
                "name": node_sshd_config_map(spec),
                "items": [{"key": "node_sshd_config", "path": "sshd_config"}],
            },
        },
        # As on login pods: kept up to date by the kubelet, so key changes need no restart.
        {"name": "authorized-keys", "configMap": {"name": naming.users_config_map_name(spec.name)}},
        {
            "name": "host-keys",
            "secret": {
                "secretName": naming.node_host_keys_secret_name(spec.name),
                "defaultMode": 0o400,
            },
        },
    ]


def _pool_resources(pool: WorkerPool) -> Manifest:
    out = resources(pool.resources)
    if pool.gpus:
        out.setdefault("requests", {})[GPU_RESOURCE] = str(pool.gpus)
        out.setdefault("limits", {})[GPU_RESOURCE] = str(pool.gpus)
        out = {key: dict(sorted(value.items())) for key, value in out.items()}
    return out


def _security_context(spec: ClusterSpec, pool: WorkerPool) -> Manifest:
    if spec.cgroups.enforce:
        # Slurm's cgroup plugins write the node's cgroup tree, which only a privileged
        # container may do; cgroups.enforce is the documented opt-in for this.
        return {"privileged": True, "runAsUser": 0}
    # The XID check reads the kernel log (/dev/kmsg) on GPU nodes.
    return root_with(SLURMD_CAPABILITIES + (["SYSLOG"] if pool.gpus else []))


def _placement(pool: WorkerPool) -> Manifest:
    out = placement(pool.placement)
    if pool.gpus and not any(t.key == GPU_RESOURCE for t in pool.placement.tolerations):
        out["tolerations"] = [
            *out.get("tolerations", []),
            {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        ]
    return out


CPU_NODE_CHECKS = ["jail", "munge", "disk"]  # munge: only with auth/munge
GPU_NODE_CHECKS = ["gpu_driver", "gpu_count", "gpu_ecc", "gpu_xid"]


def healthcheck_config(spec: ClusterSpec, pool: WorkerPool) -> str:
    """The quick checks' JSON config for a pool's nodes (the entrypoint writes it to a file)."""
    quick = spec.health_checks.quick
    config = {
        "checks": (GPU_NODE_CHECKS if pool.gpus else [])
        + [check for check in CPU_NODE_CHECKS if check != "munge" or spec.auth == "munge"],
        "expected_gpus": pool.gpus,
        "gpu_type": pool.gpu_type,
        "jail_marker": f"{paths.JAIL_DIR}/{paths.JAIL_MARKER}",
        "disk_paths": ["/tmp", paths.SLURMD_SPOOL_DIR],
        "min_free_disk_percent": quick.min_free_disk_percent,
        **(
            {"dcgm": True, "dcgm_timeout_seconds": spec.health_checks.dcgm.timeout_seconds}
            if spec.health_checks.dcgm.quick and pool.gpus
            else {}
        ),
        **(
            {"results_dir": f"{paths.JAIL_DIR}/{paths.HEALTHCHECK_RESULTS_IN_JAIL}"}
            if spec.metrics.enabled
            else {}
        ),
    }
    return json.dumps(config, sort_keys=True)


# After the pool's wait, the preStop hook requeues or cancels what is left, lets slurmd clean
# up (KillWait, 30 s by default) and deletes the node record; then slurmd gets SIGTERM.
DRAIN_CLEANUP_SECONDS = 50
SLURMD_STOP_SECONDS = 10


def termination_grace_seconds(pool: WorkerPool) -> int:
    """A worker pod's grace: the longer of the pool's waits for jobs (a stop, an update)
    plus what the preStop hook does after."""
    waits = [pool.drain.effective_wait_seconds, pool.update.effective_wait_seconds]
    if None in waits:
        return WAIT_POLICY_GRACE_SECONDS
    return max(w for w in waits if w is not None) + DRAIN_CLEANUP_SECONDS + SLURMD_STOP_SECONDS


TEMPLATE_HASH_ENV = "POD_TEMPLATE_HASH"


def template_hash(template: Manifest) -> str:
    """A short hash of a pod template: it names the Job that announces a pool's update."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode())
    return digest.hexdigest()[:10]


def pool_template_hash(statefulset: Manifest) -> str:
    """The template hash a pool's pods carry (POD_TEMPLATE_HASH in slurmd's env)."""
    [slurmd] = statefulset["spec"]["template"]["spec"]["containers"]
    return next(e["value"] for e in slurmd["env"] if e["name"] == TEMPLATE_HASH_ENV)


def _seconds(seconds: int | None) -> str:
    """A wait for the entrypoint: empty for none (as long as jobs run)."""
    return "" if seconds is None else str(seconds)


def pool_statefulset(spec: ClusterSpec, pool: WorkerPool) -> Manifest:
    """slurmd pods of one pool; each registers itself as `<cluster>-<pool>-<ordinal>`."""
    name = naming.pool_name(spec.name, pool.name)
    slurmd = container(
        spec,
        "slurmd",
        spec.image("worker"),
        "slurmd",
        ports=[
            {"name": "slurmd", "containerPort": paths.SLURMD_PORT},
            *([{"name": "ssh", "containerPort": paths.SSH_PORT}] if pool.sshd else []),
        ],
        env=env(
            DRAIN_CLEANUP_SECONDS=str(DRAIN_CLEANUP_SECONDS),
            DRAIN_POLICY=pool.drain.policy,
            DRAIN_WAIT_SECONDS=_seconds(pool.drain.effective_wait_seconds),
            UPDATE_POLICY=pool.update.policy,
            UPDATE_WAIT_SECONDS=_seconds(pool.update.effective_wait_seconds),
            HEALTHCHECK_CONFIG=healthcheck_config(spec, pool),
            SLURMD_CONF_SERVER=conf_server(spec),
            SLURMD_NODE_CONF=node_conf(pool),
            # Elastic pools: slurmd reports its start as the node's boot (docs/elastic.md).
            **({"SLURMD_BOOTS_WITH_POD": "1"} if pool.elastic is not None else {}),
            # workerPools[].sshd: sshd beside slurmd, in the same container, so that the
            # sessions pam_slurm_adopt puts into a job share slurmd's process namespace (the
            # job's slurmstepd moves them by PID) and see the GPUs the device plugin gives
            # this container alone.
            **({"NODE_SSHD_CONFIG": f"{paths.SSHD_CONFIG_DIR}/sshd_config"} if pool.sshd else {}),
            **(
                {
                    "GPU_DRIVER_DIR": paths.GPU_DRIVER_DIR,
                    "NODE_GPUS": str(pool.gpus),
                    "NODE_GPU_TYPE": pool.gpu_type or "",
                }
                if pool.gpus
                else {}
            ),
        ),
        volumeMounts=[
            {"name": "jail", "mountPath": paths.JAIL_DIR},
            {"name": "spool", "mountPath": paths.SLURMD_SPOOL_DIR},
            {"name": "run", "mountPath": paths.SLURM_RUN_DIR},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "job-tmp", "mountPath": paths.JOB_TMP_DIR},
            *auth_mounts(spec, root=True),
            *sss_pipes_mounts(spec),
            *(submount_mount(s) for s in [*spec.jail.submounts, *pool.submounts]),
            *site_files_mounts(spec),
            *_container_mounts(spec),
            *_sshd_mounts(pool),
        ],
        resources=_pool_resources(pool),
        securityContext=_security_context(spec, pool),
        startupProbe=tcp_probe(paths.SLURMD_PORT, period=2, failures=150),
        readinessProbe=tcp_probe(paths.SLURMD_PORT),
        livenessProbe=tcp_probe(paths.SLURMD_PORT, period=30, failures=4),
        lifecycle={"preStop": {"exec": {"command": [paths.ENTRYPOINT, "drain-node"]}}},
    )
    submounts = [*spec.jail.submounts, *pool.submounts]
    claim_templates = [
        submount_claim_template(spec, s)
        for s in pool.submounts
        if isinstance(s, PvcSubmount) and s.existing_claim is None
    ]
    labels = metadata(spec, name, COMPONENT, extra_labels=pool_labels(pool))["labels"]
    statefulset_spec: Manifest = {
        # An elastic pool's size after its creation is the scaler's (SCALED_BY_ANNOTATION).
        "replicas": pool.initial_replicas,
        "serviceName": name,
        # Nodes are independent: start and stop them all at once.
        "podManagementPolicy": PARALLEL,
        # A template change replaces one pod at a time, highest ordinal first, each once the
        # one before is Ready; each drains and waits for its jobs (pool.update) in its
        # preStop hook. With Parallel, a pod of a template that never became Ready is
        # replaced by the next template without a hand (see ROLLING_UPDATE).
        "updateStrategy": dict(ROLLING_UPDATE),
        "selector": {"matchLabels": selector_labels(spec, COMPONENT, **pool_labels(pool))},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                **pod_identity(spec, COMPONENT, pool),
                **pod_security(),
                **image_pull(spec),
                **_placement(pool),
                "terminationGracePeriodSeconds": termination_grace_seconds(pool),
                "initContainers": [
                    *auth_sidecars(spec, key_copy=False),
                    *sssd_sidecars(spec),
                    wait_for_jail(spec, spec.image("worker")),
                ],
                "containers": [slurmd],
                "volumes": [
                    jail_volume(spec),
                    {"name": "spool", "emptyDir": {}},
                    # Each job's private /tmp, on the node's disk like any /tmp.
                    {"name": "job-tmp", "emptyDir": {}},
                    run_volume(),
                    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": pool.shm_size}},
                    *auth_volumes(spec),
                    *sssd_volumes(spec),
                    *(volume for s in submounts if (volume := submount_volume(s))),
                    *site_files_volumes(spec),
                    *_container_volumes(spec),
                    *_sshd_volumes(spec, pool),
                ],
            },
        },
    }
    if claim_templates:
        statefulset_spec["volumeClaimTemplates"] = claim_templates
    # The pods know their template's hash: their preStop hook tells an update (the pool's
    # update Job marked the node for another template) from any other stop.
    hashed = template_hash(statefulset_spec["template"])
    slurmd["env"].append({"name": TEMPLATE_HASH_ENV, "value": hashed})
    annotations = dict(AWAIT_EXISTENCE_ONLY)
    if pool.elastic is not None:
        annotations[naming.SCALED_BY_ANNOTATION] = naming.SCALED_BY_POWER_SAVING
    return {
        "metadata": metadata(
            spec, name, COMPONENT, annotations=annotations, extra_labels=pool_labels(pool)
        ),
        "spec": statefulset_spec,
    }


def scaled_by_slurm(statefulset: Manifest) -> bool:
    """Whether a StatefulSet's live size is the elastic scaler's, not the stack's."""
    annotations = statefulset["metadata"].get("annotations", {})
    return annotations.get(naming.SCALED_BY_ANNOTATION) == naming.SCALED_BY_POWER_SAVING
