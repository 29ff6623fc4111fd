"""Offline verification: run the stack under Pulumi's mock engine, render and validate manifests.

Nothing here needs the Pulumi CLI, provider plugins or a Kubernetes cluster.
"""

from slurm_stack.offline.engine import (
    UNKNOWN,
    OfflineEngineError,
    ProgramRun,
    RecordedResource,
    run_program,
)
from slurm_stack.offline.manifests import (
    KIND_ORDER,
    REDACTED,
    REDACTED_DATA,
    dump_yaml,
    is_manifest,
    manifest_sort_key,
    manifests,
    redact_secrets,
    to_manifest,
)
from slurm_stack.offline.mocks import LOAD_BALANCER_IP, mock_state
from slurm_stack.offline.validate import (
    available_versions,
    default_versions,
    validate_manifest,
    validate_manifests,
)

__all__ = [
    "KIND_ORDER",
    "LOAD_BALANCER_IP",
    "REDACTED",
    "REDACTED_DATA",
    "UNKNOWN",
    "OfflineEngineError",
    "ProgramRun",
    "RecordedResource",
    "available_versions",
    "default_versions",
    "dump_yaml",
    "is_manifest",
    "manifest_sort_key",
    "manifests",
    "mock_state",
    "redact_secrets",
    "run_program",
    "to_manifest",
    "validate_manifest",
    "validate_manifests",
]
