"""Pulumi components: thin wrappers that register the builders' objects and wire outputs."""

from slurm_stack.components.accounting import Accounting
from slurm_stack.components.cluster import SlurmCluster
from slurm_stack.components.controller import Controller
from slurm_stack.components.health import HealthChecks
from slurm_stack.components.jail import Jail
from slurm_stack.components.login import LoginPool
from slurm_stack.components.metrics import Metrics
from slurm_stack.components.secrets import ClusterSecrets
from slurm_stack.components.workers import WorkerPool

__all__ = [
    "Accounting",
    "ClusterSecrets",
    "Controller",
    "HealthChecks",
    "Jail",
    "LoginPool",
    "Metrics",
    "SlurmCluster",
    "WorkerPool",
]
