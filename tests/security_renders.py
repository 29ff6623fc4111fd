"""The renders the security tests (checkov, Pod Security Standards) look at, and their pods."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from slurm_stack.offline.render import render_stack
from tests.conftest import DEV_STACK, PROD_STACK, ROOT

ITEST_STACK = ROOT / "tests" / "cluster" / "Pulumi.itest.yaml"
STACKS = {"dev": DEV_STACK, "prod": PROD_STACK, "itest": ITEST_STACK}
COMPONENT = "app.kubernetes.io/component"
WORKLOADS = ("StatefulSet", "Deployment", "Job", "CronJob", "DaemonSet")


def enforcing_stack(directory: Path) -> Path:
    """The dev stack file with `cgroups.enforce: true`, written under ``directory``."""
    data = yaml.safe_load(DEV_STACK.read_text())
    data["config"]["slurm-stack:cluster"]["cgroups"] = {"enforce": True}
    path = directory / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def render(stack: Path, out: Path) -> list[dict[str, Any]]:
    """Render ``stack`` into ``out`` (manifests.yaml, as `slurm_stack render` writes it)."""
    return render_stack(stack, out).manifests


def pod_spec(document: dict[str, Any]) -> dict[str, Any]:
    """The pod template spec of a workload object."""
    spec = document["spec"]
    if document["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def pod_templates(documents: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(component label, pod spec) of every workload in ``documents``."""
    for document in documents:
        if document.get("kind") in WORKLOADS:
            yield document["metadata"]["labels"][COMPONENT], pod_spec(document)
