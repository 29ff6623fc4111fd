"""The component provider other languages reach `SlurmCluster` through.

`provider/__main__.py` serves it; Pulumi's Python SDK infers the schema from the type
annotations of SlurmCluster and its args (slurm_stack/package/args.py).
"""

import json
from importlib.metadata import version
from typing import Any

from pulumi import Inputs, ResourceOptions
from pulumi.errors import InputPropertiesError
from pulumi.provider import main
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.provider import ConstructResult

from slurm_stack.components.cluster import SlurmCluster
from slurm_stack.package.convert import spec_and_secrets
from slurm_stack.spec.errors import SpecError

PACKAGE = "slurm-stack"
"""The package name: type tokens are `slurm-stack:index:<Component>`."""


class SlurmStackProvider(ComponentProvider):
    """Constructs SlurmCluster; a bad argument is reported per property, with the spec's
    message, before any resource is registered."""

    def __init__(self) -> None:
        super().__init__([SlurmCluster], PACKAGE, version=version(PACKAGE))

    def construct(
        self,
        name: str,
        resource_type: str,
        inputs: Inputs,
        options: ResourceOptions | None = None,
    ) -> ConstructResult:
        component = resource_type.rsplit(":", maxsplit=1)[-1]
        if component == SlurmCluster.__name__:
            args = self.map_inputs(inputs, self._component_defs[component])
            try:
                spec_and_secrets(args)
            except SpecError as error:
                raise InputPropertiesError(str(error), _property_errors(error)) from None
        return super().construct(name, resource_type, inputs, options)


def _property_errors(error: SpecError) -> list[Any]:
    return [{"property_path": issue.path, "reason": issue.message} for issue in error.issues]


def schema_text() -> str:
    """The package schema as provider/schema.json holds it (for review; tests compare)."""
    schema = SlurmStackProvider().schema
    assert schema is not None  # a ComponentProvider builds its schema as it starts
    return json.dumps(json.loads(schema), indent=2, sort_keys=True) + "\n"


def serve(args: list[str]) -> None:
    """Run the provider: ``args`` are the engine's (the plugin's command line)."""
    main(SlurmStackProvider(), args)
