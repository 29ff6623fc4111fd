"""What a rendered stack asks of the scheduler, and the dev stack on a small node."""

import re
from decimal import Decimal
from pathlib import Path

from slurm_stack.offline import ProgramRun
from slurm_stack.offline.manifests import manifests
from slurm_stack.offline.requests import Requests, pod_requests, summarize

GiB = Decimal(2**30)
MiB = Decimal(2**20)


def container(cpu: str, memory: str, **extra: object) -> dict[str, object]:
    return {"resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


def test_a_pods_request_counts_sidecars_and_its_largest_init_container() -> None:
    pod = {
        "initContainers": [
            container("50m", "16Mi", restartPolicy="Always"),  # a native sidecar: runs along
            container("2", "64Mi"),  # runs alone (beside the sidecar) before the containers
        ],
        "containers": [container("500m", "1Gi"), container("250m", "256Mi")],
    }
    assert pod_requests(pod) == Requests(Decimal("2.05"), (1024 + 256 + 16) * MiB)


def test_the_dev_stack_fits_a_two_cpu_four_gib_node(dev_run: ProgramRun) -> None:
    # minikube's default node: 2 CPUs, 4 GiB. Kubernetes' own pods there request 750m CPU
    # and 170 MiB (kubeadm's static pods: API server 250m, controller manager 200m,
    # scheduler 100m, etcd 100m/100Mi; CoreDNS 100m/70Mi).
    room = Requests(Decimal(2) - Decimal("0.75"), 4 * GiB - 170 * MiB)
    summary = summarize(manifests(dev_run.resources))
    total = summary.total
    assert total.cpu <= room.cpu and total.memory <= room.memory, total.text()
    components = summary.by_component()
    assert {"controller", "worker", "login", "database", "accounting"} <= set(components)
    # README states the total.
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    stated = re.search(r"The dev stack requests ([0-9.]+) CPU and ([0-9.]+) GiB in all", readme)
    assert stated, "README no longer states the dev stack's requests"
    assert Decimal(stated[1]) == round(total.cpu, 2)
    assert Decimal(stated[2]) == round(total.memory / GiB, 1)


def test_render_prints_the_requests(dev_run: ProgramRun) -> None:
    lines = summarize(manifests(dev_run.resources)).lines()
    assert lines[0].startswith("requests (what the Kubernetes scheduler reserves")
    assert any(line.strip().startswith("total ") for line in lines)
    assert any("most CPU: a pod of StatefulSet" in line for line in lines)
