"""Kubernetes manifests from the resources a program registered, in a stable order and form."""

import base64
import copy
from collections.abc import Iterable
from typing import Any

import yaml

from slurm_stack.offline.engine import RecordedResource
from slurm_stack.offline.mocks import kubernetes_kind

REDACTED = "redacted"
"""What a redacted stringData value reads; under `data`, its base64 (REDACTED_DATA), so that
the manifests stay valid Kubernetes (`kubectl apply --dry-run=server` decodes `data`)."""
REDACTED_DATA = base64.b64encode(REDACTED.encode()).decode()
REDACTED_NOTE = "# Secret values redacted: render with --show-secrets to write them\n"

# Documents sort by this kind order, then by kind name, namespace and name.
KIND_ORDER = (
    "Namespace",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Service",
    "StatefulSet",
    "Deployment",
    "Job",
    "CronJob",
)
_CUSTOM_RESOURCE = "kubernetes:apiextensions.k8s.io:CustomResource"
# pulumi-kubernetes types that are not Kubernetes objects of their own.
_NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/")

Manifest = dict[str, Any]


def _api_version_and_kind(resource: RecordedResource) -> tuple[str, str] | None:
    if not resource.custom or resource.type.startswith(_NOT_OBJECTS):
        return None
    if resource.type == _CUSTOM_RESOURCE:
        return resource.inputs["apiVersion"], resource.inputs["kind"]
    found = kubernetes_kind(resource.type)
    # Server-side-apply patches (`DeploymentPatch`, …) are partial objects, not manifests.
    if found is None or found[1].endswith("Patch"):
        return None
    return found


def is_manifest(resource: RecordedResource) -> bool:
    """Whether `resource` is a Kubernetes object (not a provider, chart, patch or component)."""
    return _api_version_and_kind(resource) is not None


def to_manifest(resource: RecordedResource) -> Manifest:
    """The object `resource` would apply: apiVersion, kind, metadata, then the rest sorted.

    An auto-named object (no `metadata.name` in its inputs) gets the name the mocks gave it.
    """
    found = _api_version_and_kind(resource)
    if found is None:
        raise ValueError(f"{resource.urn} is not a Kubernetes object")
    api_version, kind = found
    body = {
        k: copy.deepcopy(v)
        for k, v in resource.inputs.items()
        if not k.startswith("__") and k not in ("apiVersion", "kind")
    }
    metadata = body.pop("metadata", {})
    if "name" not in metadata and "generateName" not in metadata:
        metadata["name"] = resource.outputs.get("metadata", {}).get("name", resource.name)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        **{k: body[k] for k in sorted(body)},
    }


def manifest_sort_key(manifest: Manifest) -> tuple[int, str, str, str]:
    """Kind order (`KIND_ORDER`, others after it by kind), then namespace, then name."""
    kind = manifest["kind"]
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    meta = manifest.get("metadata", {})
    return rank, kind, meta.get("namespace", ""), meta.get("name", "")


def manifests(resources: Iterable[RecordedResource]) -> list[Manifest]:
    """The manifests of all Kubernetes objects among `resources`, in `manifest_sort_key` order."""
    return sorted((to_manifest(r) for r in resources if is_manifest(r)), key=manifest_sort_key)


def redact_secrets(manifest: Manifest) -> Manifest:
    """A copy of `manifest` with every value under a Secret's data/stringData redacted."""
    redacted = copy.deepcopy(manifest)
    if redacted.get("kind") == "Secret":
        for key, placeholder in (("data", REDACTED_DATA), ("stringData", REDACTED)):
            if isinstance(redacted.get(key), dict):
                redacted[key] = dict.fromkeys(redacted[key], placeholder)
    return redacted


def _is_redacted(document: Manifest) -> bool:
    values = [
        *(document.get("data") or {}).values(),
        *(document.get("stringData") or {}).values(),
    ]
    return document.get("kind") == "Secret" and set(values) <= {REDACTED, REDACTED_DATA}


class _Dumper(yaml.SafeDumper):
    """Never emits anchors/aliases; multi-line strings (config files) as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(documents: Iterable[Manifest]) -> str:
    """Documents as multi-document YAML, each starting with `---`, keys in their given order."""
    return "".join(
        "---\n"
        + (REDACTED_NOTE if _is_redacted(doc) else "")
        + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=4096)
        for doc in documents
    )
