"""Small lookups over a recorded program run."""

import re
from typing import Any

from slurm_stack.offline import ProgramRun, RecordedResource

K8S = "kubernetes:"


def kube(run: ProgramRun, kind: str) -> list[RecordedResource]:
    """Kubernetes resources of ``kind`` (e.g. "apps/v1:StatefulSet")."""
    return [r for r in run.resources if r.type == f"{K8S}{kind}"]


def by_name(run: ProgramRun, kind: str, name: str) -> RecordedResource:
    """The Kubernetes resource of ``kind`` whose metadata.name is ``name``."""
    found = [r for r in kube(run, kind) if r.inputs["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def by_content(run: ProgramRun, type_: str, name: str) -> RecordedResource:
    """The one resource of ``type_`` whose logical name is ``name`` plus a content digest
    (`<name>-<hex>`: ConfigMaps and Jobs named by what they hold)."""
    pattern = re.compile(re.escape(name) + r"-[0-9a-f]+")
    found = [r for r in run.resources if r.type == type_ and pattern.fullmatch(r.name)]
    assert len(found) == 1, f"{len(found)} {type_} named {name}-<digest>"
    return found[0]


def containers(resource: RecordedResource) -> dict[str, dict[str, Any]]:
    """Containers and init containers of a workload's pod template, by name."""
    spec = resource.inputs["spec"]
    template = spec.get("template") or spec["jobTemplate"]["spec"]["template"]
    pod = template["spec"]
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def spec_error_text(error: BaseException) -> str:
    """The messages of ``error`` and its causes, asserting a SpecError is among them: a
    secret's check raises while the engine resolves it, and the engine may wrap it."""
    from slurm_stack.spec import SpecError

    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    assert any(isinstance(e, SpecError) for e in chain), chain
    return "\n".join(str(e) for e in chain)
