"""Plugin entry point of the slurm-stack component package (see PulumiPlugin.yaml)."""

import sys

from slurm_stack.package.provider import serve

if __name__ == "__main__":
    # The language host runs `python <this directory> <engine address> [flags]`.
    serve(sys.argv[1:])
