"""Register a builder's manifest as a typed pulumi-kubernetes resource."""

from collections.abc import Sequence
from typing import Any, TypeVar

import pulumi

T = TypeVar("T", bound=pulumi.CustomResource)

# Top-level manifest keys and the resource argument each becomes.
_ARGUMENTS = {
    "spec": "spec",
    "data": "data",
    "stringData": "string_data",
    "immutable": "immutable",
    "type": "type",
    "automountServiceAccountToken": "automount_service_account_token",
    "rules": "rules",
    "roleRef": "role_ref",
    "subjects": "subjects",
}

# Claims and custom resources that hold user data: never deleted by an update or destroy.
KEEP = pulumi.ResourceOptions(protect=True, retain_on_delete=True)


def register(
    cls: type[T],
    name: str,
    manifest: dict[str, Any],
    opts: pulumi.ResourceOptions,
    **overrides: Any,
) -> T:
    """``cls(name, metadata=…, spec=…, …)`` from a builder's manifest dict."""
    arguments: dict[str, Any] = {"metadata": manifest["metadata"]}
    for key, argument in _ARGUMENTS.items():
        if key in manifest:
            arguments[argument] = manifest[key]
    arguments.update(overrides)
    return cls(name, opts=opts, **arguments)


def custom_resource(
    name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """A custom resource (an operator's kind) from a builder's manifest."""
    from pulumi_kubernetes.apiextensions import CustomResource

    return CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )


def by_content(name: str, digest: str) -> str:
    """The logical name of an object named by its content (a ConfigMap or Job with a hash in
    its Kubernetes name): the digest is in both names. With a fixed logical name, a change
    is a replacement of one resource; if that update fails, the old object waits for deletion
    under the same name a revert would create again (AlreadyExists). With the digest in the
    logical name, reverting registers the old resource, which is still there: nothing to do."""
    return f"{name}-{digest}"


def child_options(
    parent: pulumi.Resource,
    *,
    depends_on: Sequence[pulumi.Resource] | None = None,
    keep: bool = False,
    timeout: str | None = None,
    delete_timeout: str | None = None,
    secret_outputs: list[str] | None = None,
    previously: str | None = None,
    ignore_changes: list[str] | None = None,
) -> pulumi.ResourceOptions:
    """Options for a component's child resource (``timeout``: for create and update;
    ``previously``: its logical name before; ``ignore_changes``: properties whose live value
    an update leaves alone)."""
    opts = pulumi.ResourceOptions(
        parent=parent,
        ignore_changes=ignore_changes,
        aliases=[pulumi.Alias(name=previously)] if previously else None,
        depends_on=depends_on or None,
        custom_timeouts=(
            pulumi.CustomTimeouts(create=timeout, update=timeout, delete=delete_timeout)
            if timeout or delete_timeout
            else None
        ),
        additional_secret_outputs=secret_outputs,
    )
    return pulumi.ResourceOptions.merge(opts, KEEP) if keep else opts
