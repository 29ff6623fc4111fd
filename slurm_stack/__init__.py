"""slurm-stack: Slurm clusters on Kubernetes as typed Pulumi components.

Importing the package is cheap; Pulumi components load on first use:

    from slurm_stack import SlurmCluster, load_spec
"""

from typing import TYPE_CHECKING, Any

from slurm_stack.spec import ClusterSpec, SpecError, load_spec

if TYPE_CHECKING:
    from slurm_stack.components import SlurmCluster

__all__ = ["ClusterSpec", "SlurmCluster", "SpecError", "load_spec"]


def __getattr__(name: str) -> Any:
    if name == "SlurmCluster":
        from slurm_stack.components import SlurmCluster

        return SlurmCluster
    raise AttributeError(name)
