"""The validated cluster spec read from stack config."""

from slurm_stack.spec.errors import SpecError, SpecIssue
from slurm_stack.spec.load import load_spec
from slurm_stack.spec.models import ClusterSpec, Partition, WorkerPool
from slurm_stack.spec.rules import (
    DB_PASSWORD_CONFIG_KEY,
    LDAP_PASSWORD_CONFIG_KEY,
    REGISTRY_AUTH_CONFIG_KEY,
)

__all__ = [
    "DB_PASSWORD_CONFIG_KEY",
    "LDAP_PASSWORD_CONFIG_KEY",
    "REGISTRY_AUTH_CONFIG_KEY",
    "ClusterSpec",
    "Partition",
    "SpecError",
    "SpecIssue",
    "WorkerPool",
    "load_spec",
]
