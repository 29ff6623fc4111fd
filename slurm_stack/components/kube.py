"""Register a builder's manifest as a typed pulumi-kubernetes resource."""

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


def child_options(
    parent: pulumi.Resource,
    *,
    depends_on: list[pulumi.Resource] | None = None,
    keep: bool = False,
    timeout: str | None = None,
    secret_outputs: list[str] | None = None,
) -> pulumi.ResourceOptions:
    """Options for a component's child resource."""
    opts = pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on or None,
        custom_timeouts=(
            pulumi.CustomTimeouts(create=timeout, update=timeout) if timeout else None
        ),
        additional_secret_outputs=secret_outputs,
    )
    return pulumi.ResourceOptions.merge(opts, KEEP) if keep else opts
