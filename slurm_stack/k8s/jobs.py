"""Jobs that act on the running cluster: config push and the NCCL benchmark."""

import json

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    Manifest,
    client_auth_mounts,
    client_auth_sidecars,
    client_auth_volumes,
    container,
    env,
    image_pull,
    metadata,
    non_root,
    pod_security,
)
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.spec.models import ClusterSpec, WorkerPool

CLIENT_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}


def client_pod(
    spec: ClusterSpec,
    config_map: str,
    role: str,
    extra_env: list[Manifest],
    component: str | None = None,
    restart_policy: str = "OnFailure",
) -> Manifest:
    """A pod running a Slurm client command as the SlurmUser with the cluster's config,
    under the ServiceAccount of ``component`` (default: the role's)."""
    client = container(
        spec,
        role,
        spec.image("ops"),
        role,
        env=[*env(SLURM_CONF=f"{paths.SLURM_CONF_DIR}/slurm.conf"), *extra_env],
        volumeMounts=[
            {"name": "slurm-config", "mountPath": paths.SLURM_CONF_DIR, "readOnly": True},
            *client_auth_mounts(spec),
        ],
        resources=CLIENT_RESOURCES,
        securityContext=non_root(paths.SLURM_UID),
    )
    return {
        # The role is the component (reconfigure, nccl-benchmark, exporter) unless named.
        **pod_identity(spec, component or role),
        **pod_security(),
        **image_pull(spec),
        "restartPolicy": restart_policy,
        "initContainers": client_auth_sidecars(spec),
        "containers": [client],
        "volumes": [
            {"name": "slurm-config", "configMap": {"name": config_map}},
            *client_auth_volumes(spec),
        ],
    }


def reconfigure_job(spec: ClusterSpec, config_map: str, config_hash: str) -> Manifest:
    """`scontrol reconfigure` once the controller runs config ``config_hash``: every slurmd
    gets the new files without restarting."""
    name = naming.reconfigure_job_name(spec.name, config_hash)
    return {
        "metadata": metadata(spec, name, "reconfigure"),
        "spec": {
            "backoffLimit": 6,
            "activeDeadlineSeconds": 900,
            "template": {
                "metadata": {"labels": metadata(spec, name, "reconfigure")["labels"]},
                "spec": client_pod(
                    spec, config_map, "reconfigure", env(EXPECTED_CONFIG_HASH=config_hash)
                ),
            },
        },
    }


def pool_update_job(
    spec: ClusterSpec, pool: WorkerPool, config_map: str, template_hash: str
) -> Manifest:
    """Before a pool's StatefulSet takes a new pod template: mark the pool's registered
    nodes (those that stay) with the template they are to be replaced by, so that each
    one's preStop hook treats its stop as an update (the pool's `update` policy) and not as
    a scale-down or eviction (its `drain` policy)."""
    name = naming.pool_update_job_name(spec.name, template_hash)
    return {
        "metadata": metadata(spec, name, "pool-update"),
        "spec": {
            "backoffLimit": 6,
            "activeDeadlineSeconds": POOL_UPDATE_DEADLINE_SECONDS,
            "template": {
                "metadata": {"labels": metadata(spec, name, "pool-update")["labels"]},
                "spec": client_pod(
                    spec,
                    config_map,
                    "mark-pool-update",
                    component="pool-update",
                    extra_env=env(
                        POOL_NODE_PREFIX=f"{naming.pool_name(spec.name, pool.name)}-",
                        POOL_REPLICAS=str(pool.most_replicas),
                        TEMPLATE_HASH=template_hash,
                        # An elastic pool's nodes that failed to start get another chance
                        # with the new template (the fix for a broken image is one).
                        **({"POOL_ELASTIC": "1"} if pool.elastic is not None else {}),
                    ),
                ),
            },
        },
    }


POOL_UPDATE_DEADLINE_SECONDS = 600


def nccl_cronjob(spec: ClusterSpec, config_map: str) -> Manifest:
    """Submits one exclusive, low-priority all_reduce_perf job per idle GPU node."""
    nccl = spec.health_checks.nccl
    name = f"{spec.name}-nccl-benchmark"
    pools = {pool.name: pool.gpu_type or "" for pool in spec.gpu_pools}
    values = {
        "NCCL_GPU_POOLS": json.dumps(pools, sort_keys=True),
        "NCCL_MAX_BYTES": nccl.max_bytes,
        "NCCL_MIN_BYTES": nccl.min_bytes,
        "NCCL_THRESHOLDS_GBPS": json.dumps(nccl.thresholds_gbps, sort_keys=True),
    }
    dcgm = spec.health_checks.dcgm
    if dcgm.periodic:
        values["NCCL_DCGM_TIMEOUT_SECONDS"] = str(dcgm.periodic_timeout_seconds)
    settings = env(**values)
    return {
        "metadata": metadata(spec, name, "nccl-benchmark"),
        "spec": {
            "schedule": nccl.schedule,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 3600,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 1,
                    "activeDeadlineSeconds": 6 * 3600,
                    "template": {
                        "metadata": {"labels": metadata(spec, name, "nccl-benchmark")["labels"]},
                        "spec": client_pod(spec, config_map, "nccl-benchmark", settings),
                    },
                }
            },
        },
    }
