"""Every Pulumi custom timeout (create and update), in one place.

docs/deploy.md lists this table; tests/test_awaits.py checks that they agree. A Job's
timeout is its `activeDeadlineSeconds` plus `JOB_MARGIN`: Kubernetes ends the Job first,
and pulumi-kubernetes reports its `DeadlineExceeded` condition (a clear error) instead of
timing out while the Job still runs.
"""

from slurm_stack.k8s.jail import POPULATE_DEADLINE_SECONDS
from slurm_stack.k8s.jobs import POOL_UPDATE_DEADLINE_SECONDS
from slurm_stack.k8s.workers import termination_grace_seconds
from slurm_stack.spec.models import WorkerPool

JOB_MARGIN_SECONDS = 5 * 60


def _minutes(seconds: int) -> str:
    return f"{-(-seconds // 60)}m"


def pool_delete_timeout(pool: WorkerPool) -> str:
    """Deleting a worker pool's StatefulSet (a removed pool, or a replacement) waits for its
    pods, each of which drains under the pool's policy within its termination grace."""
    return _minutes(termination_grace_seconds(pool) + JOB_MARGIN_SECONDS)


# A ClusterIP Service with a selector waits while a selected pod is not Ready
# (pulumi-kubernetes await/service.go, `endpointsPending`): it gets its workload's timeout.
TIMEOUTS: dict[str, str] = {
    "mariadb": "20m",  # embedded MariaDB StatefulSet
    "mariadb-service": "20m",  # its Service
    "mariadb-operator": "20m",  # `MariaDB` custom resource, awaited for condition Ready
    "slurmdbd": "60m",  # Deployment: its startup probe allows an hour (a database upgrade)
    "slurmdbd-service": "60m",  # its Service
    "slurmctld": "15m",  # StatefulSet
    "slurmctld-service": "15m",  # its Service
    "populate-jail": _minutes(POPULATE_DEADLINE_SECONDS + JOB_MARGIN_SECONDS),  # Job
    "login": "20m",  # StatefulSet
    "login-service": "15m",  # Service
    "reconfigure": _minutes(15 * 60 + JOB_MARGIN_SECONDS),  # Job, activeDeadlineSeconds 900
    "users": _minutes(15 * 60 + JOB_MARGIN_SECONDS),  # Job, activeDeadlineSeconds 900
    "pool-update": _minutes(POOL_UPDATE_DEADLINE_SECONDS + JOB_MARGIN_SECONDS),  # Job
    "exporter": "10m",  # Deployment: ready once munge (or sackd) runs and it listens
    "exporter-service": "10m",  # its Service
    "node-state": "10m",  # Deployment: ready once munge (or sackd) runs
    "rest-api": "10m",  # Deployment: ready once slurmrestd listens
    "rest-api-service": "10m",  # its Service
}
