"""Program evaluation time and slurm.conf size, small and large (prints `name: value` lines).

Targets: the 50 pools x 200 nodes program evaluates in <= 1.5 s under the mock engine, and
slurm.conf stays <= 16 KiB whatever the node count.
"""

import json
import statistics
import time

from slurm_stack.offline import run_program
from slurm_stack.program import run
from slurm_stack.render import render_slurm_conf
from slurm_stack.spec import load_spec

REPEATS = 5


MAX_NODES = 10_000


def cluster_config(pools: int, nodes: int) -> dict:
    """A cluster of ``pools`` CPU pools with ``nodes`` replicas each."""
    return {
        "name": "bench",
        "controller": {"maxNodeCount": MAX_NODES},
        "workerPools": [
            {"name": f"pool{i:03d}", "replicas": nodes, "features": ["bench"]} for i in range(pools)
        ],
        "partitions": [
            {"name": "all", "default": True},
            *({"name": f"p{i:03d}", "pools": [f"pool{i:03d}"]} for i in range(pools)),
        ],
        "jail": {"storageClass": "nfs"},
    }


def evaluation_seconds(config: dict) -> float:
    """Median wall time of the whole program (config -> spec -> components) under mocks."""
    settings = {"slurm-stack:cluster": json.dumps(config)}
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run_program(run, config=settings)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the figures."""
    run_program(run, config={"slurm-stack:cluster": json.dumps(cluster_config(1, 1))})  # warm up
    for label, pools, nodes in (("3x4", 3, 4), ("50x200", 50, 200)):
        config = cluster_config(pools, nodes)
        size = len(render_slurm_conf(load_spec(config)).encode())
        print(f"program_eval_seconds_{label}: {evaluation_seconds(config):.3f}")
        print(f"slurm_conf_bytes_{label}: {size}")
    same_pools = cluster_config(50, 1)
    independent = render_slurm_conf(load_spec(same_pools)) == render_slurm_conf(
        load_spec(cluster_config(50, 200))
    )
    print(f"slurm_conf_independent_of_node_count: {str(independent).lower()}")


if __name__ == "__main__":
    main()
