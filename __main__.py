"""slurm-stack's Pulumi program: `pulumi up` deploys the cluster described in stack config."""

from slurm_stack.program import run

run()
