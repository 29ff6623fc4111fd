"""A change of `slurmVersion` on a deployed stack: allowed only the way Slurm upgrades.

Slurm converts its state files and accounting database when a newer major starts, and reads
state of a few majors back only (doc/html/upgrades.shtml, "Compatibility Window"): going back
to an older major, or jumping past the window, loses controller state and accounting data. The
stack's last deployed version is its own `slurmVersion` output, read through the engine's
`pulumi:pulumi:readStackOutputs` invoke (the one StackReference uses; pulumi/pulumi
pkg/resource/deploy/builtins.go). The invoke is synchronous, so the check runs before the
program registers any resource.
"""

import re
from typing import Any

import pulumi

from slurm_stack.spec.errors import SpecError, SpecIssue
from slurm_stack.spec.versions import SUPPORTED_VERSIONS, at_least

READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
VERSION_OUTPUT = "slurmVersion"

# Slurm's compatibility table: the majors whose state each major converts (upgrades.shtml).
UPGRADES_FROM: dict[str, tuple[str, ...]] = {
    "24.11": ("24.05", "23.11", "23.02"),
    "26.05": ("25.11", "25.05", "24.11"),
}


DEPLOYED_VERSION_CONFIG_KEY = "deployedSlurmVersion"
NEVER_DEPLOYED = "none"


class OutputsUnknown(Exception):
    """The backend cannot give this stack's last outputs; why."""


def deployed_outputs() -> dict[str, Any]:
    """This stack's outputs from its last update; empty on the first `up`. OutputsUnknown
    where the backend cannot say (one without stack outputs): a version change could then
    not be checked."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    try:
        result = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": name})
    except Exception as error:  # whatever the backend raises: the check decides, not this
        raise OutputsUnknown(str(error)) from error
    outputs = (result.value or {}).get("outputs") or {}
    return outputs if isinstance(outputs, dict) else {}


def outputs_from_config(given: str | None, why: str, config_key: str) -> dict[str, Any]:
    """Where the backend cannot say, the outputs the user states in config
    `deployedSlurmVersion`: the version the stack runs now, or `none` for a stack never
    deployed. SpecError at ``config_key`` (that key's) when it is not given, or is no
    version."""
    if given is None:
        raise SpecError(
            [
                SpecIssue(
                    "",
                    f"this stack's backend cannot give its last outputs ({why}), so a change "
                    "of slurmVersion cannot be checked against the version it runs: say which "
                    f"Slurm it runs with `pulumi config set {DEPLOYED_VERSION_CONFIG_KEY} "
                    f"<version>` (e.g. 26.05), or `{NEVER_DEPLOYED}` for a stack never "
                    "deployed",
                )
            ],
            config_key,
        )
    if given == NEVER_DEPLOYED:
        return {}
    if not re.fullmatch(r"\d{2}\.\d{2}", given):
        raise SpecError(
            [
                SpecIssue(
                    "",
                    f"{given!r} is no Slurm version: give the major the stack runs now "
                    f"(e.g. 26.05), or `{NEVER_DEPLOYED}` for a stack never deployed",
                )
            ],
            config_key,
        )
    return {VERSION_OUTPUT: given}


def deployed_slurm_version(outputs: dict[str, Any]) -> str | None:
    """The `slurmVersion` of the last update's ``outputs``; None on the first `up`."""
    version = outputs.get(VERSION_OUTPUT)
    return version if isinstance(version, str) else None


def version_change_issue(deployed: str | None, wanted: str) -> SpecIssue | None:
    """Why the stack cannot go from Slurm ``deployed`` to ``wanted``, or None when it can."""
    if deployed is None or deployed == wanted:
        return None
    if at_least(deployed, wanted):
        return SpecIssue(
            "slurmVersion",
            f"this stack runs Slurm {deployed}; going back to {wanted} is not supported: "
            f"Slurm {deployed} converted the controller's state and the accounting database, "
            f"which {wanted} cannot read (restore backups taken before the upgrade instead). "
            f"Keep slurmVersion {deployed!r}",
        )
    if deployed not in UPGRADES_FROM.get(wanted, ()):
        steps = [v for v in SUPPORTED_VERSIONS if deployed in UPGRADES_FROM.get(v, ())]
        return SpecIssue(
            "slurmVersion",
            f"this stack runs Slurm {deployed}, and Slurm {wanted} cannot convert its state "
            f"(it upgrades from {', '.join(UPGRADES_FROM.get(wanted, ())) or 'no release'}); "
            f"upgrade in steps, first to {' or '.join(steps) or 'a release between them'}",
        )
    return None


def refuse_version_change(deployed: str | None, wanted: str, config_key: str) -> None:
    """Raise SpecError when Slurm ``wanted`` cannot follow the ``deployed`` one."""
    if issue := version_change_issue(deployed, wanted):
        raise SpecError([issue], config_key)
