"""What a rendered stack asks of the Kubernetes scheduler: CPU and memory requests per
component and for the largest pod, so a user sees what node size it needs before `pulumi up`.

A pod's request is the kube-scheduler's (the Pod's "effective request"): the larger of its
containers plus native sidecars, and each plain init container plus the sidecars started
before it. CronJobs are left out: their pods run now and then, not all the time.
"""

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from slurm_stack.spec.quantity import parse_quantity

COMPONENT_LABEL = "app.kubernetes.io/component"
MiB = Decimal(2**20)


@dataclass
class Requests:
    """CPU (cores) and memory (bytes) requested."""

    cpu: Decimal = Decimal(0)
    memory: Decimal = Decimal(0)

    def __add__(self, other: "Requests") -> "Requests":
        return Requests(self.cpu + other.cpu, self.memory + other.memory)

    def times(self, count: int) -> "Requests":
        return Requests(self.cpu * count, self.memory * count)

    def larger(self, other: "Requests") -> "Requests":
        return Requests(max(self.cpu, other.cpu), max(self.memory, other.memory))

    def text(self) -> str:
        return f"cpu {self.cpu.normalize():f}, memory {int(self.memory / MiB)}Mi"


@dataclass
class Workload:
    """A StatefulSet, Deployment or Job: its pods and what each requests."""

    kind: str
    name: str
    component: str
    pods: int
    per_pod: Requests


@dataclass
class Summary:
    """Requests by component, their total, and the largest single pod."""

    workloads: list[Workload] = field(default_factory=list)

    @property
    def total(self) -> Requests:
        total = Requests()
        for workload in self.workloads:
            total = total + workload.per_pod.times(workload.pods)
        return total

    def by_component(self) -> dict[str, Requests]:
        found: dict[str, Requests] = {}
        for workload in self.workloads:
            found[workload.component] = found.get(workload.component, Requests()) + (
                workload.per_pod.times(workload.pods)
            )
        return dict(sorted(found.items()))

    def largest_pods(self) -> list[Workload]:
        """The pod that requests the most CPU, and the one that requests the most memory."""
        pods = [w for w in self.workloads if w.pods]
        if not pods:
            return []
        by_cpu = max(pods, key=lambda w: (w.per_pod.cpu, w.per_pod.memory))
        by_memory = max(pods, key=lambda w: (w.per_pod.memory, w.per_pod.cpu))
        return [by_cpu] if by_cpu is by_memory else [by_cpu, by_memory]

    def lines(self) -> list[str]:
        """The summary `render` prints."""
        out = ["requests (what the Kubernetes scheduler reserves; CronJobs not counted):"]
        for component, requests in self.by_component().items():
            out.append(f"  {component:<16} {requests.text()}")
        out.append(f"  {'total':<16} {self.total.text()}")
        for largest, what in zip(self.largest_pods(), ("most CPU", "most memory"), strict=False):
            out.append(
                f"  {what}: a pod of {largest.kind} {largest.name}, {largest.per_pod.text()}"
            )
        return out


def _container_requests(container: dict[str, Any]) -> Requests:
    requests = (container.get("resources") or {}).get("requests") or {}
    return Requests(
        parse_quantity(str(requests.get("cpu", "0"))),
        parse_quantity(str(requests.get("memory", "0"))),
    )


def pod_requests(pod_spec: dict[str, Any]) -> Requests:
    """The scheduler's request for a pod with this spec."""
    running = Requests()
    for container in pod_spec.get("containers", []):
        running = running + _container_requests(container)
    sidecars = Requests()
    starting = Requests()
    for init in pod_spec.get("initContainers", []):
        if init.get("restartPolicy") == "Always":
            sidecars = sidecars + _container_requests(init)
        else:
            starting = starting.larger(sidecars + _container_requests(init))
    return (running + sidecars).larger(starting)


def summarize(documents: list[dict[str, Any]]) -> Summary:
    """The requests of every workload among rendered ``documents``."""
    summary = Summary()
    for document in documents:
        kind = document.get("kind")
        spec = document.get("spec") or {}
        if kind in ("StatefulSet", "Deployment"):
            pods = int(spec.get("replicas", 1))
        elif kind == "Job":
            pods = int(spec.get("parallelism", 1))
        else:
            continue
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        summary.workloads.append(
            Workload(
                kind,
                document["metadata"]["name"],
                labels.get(COMPONENT_LABEL, document["metadata"]["name"]),
                pods,
                pod_requests(template.get("spec") or {}),
            )
        )
    return summary
