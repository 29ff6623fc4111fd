"""A real Prometheus beside a sandbox, configured from the stack's rendered ServiceMonitors and
PrometheusRules as the Prometheus Operator would configure one.

For each ServiceMonitor endpoint, every pod of every Service it selects is a target at the pod's
address and the container port the Service's port names, labelled as the operator labels it
(prometheus-operator pkg/prometheus/promcfg.go: `job` is the Service's name, plus `namespace`,
`service`, `pod`, `container` and `endpoint`, the port's name). The PrometheusRules' groups
become its rule file.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from slurm_stack.sandbox.plan import workload_pod_names
from slurm_stack.sandbox.podman import Podman
from slurm_stack.spec.models import IMAGE_REVISION

Manifest = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "images" / "prometheus" / "Containerfile"
# The Debian suite whose package is Prometheus 3 (forky and sid; trixie has 2.53).
BASE_SLURM_VERSION = "26.05"
PORT = 9090
# How often rules are evaluated: the operator's default is 30s; tests need less.
EVALUATION_INTERVAL = "10s"
CONTAINER_SUFFIX = "prometheus"


def _matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _container_port(template: Manifest, port: int | str) -> tuple[str, int] | None:
    """(container, port number) of a Service's targetPort in a pod template."""
    for container in template["spec"]["containers"]:
        for declared in container.get("ports", []):
            if port in (declared.get("name"), declared["containerPort"]):
                return container["name"], declared["containerPort"]
    return None


def scrape_configs(manifests: list[Manifest], hosts: Mapping[str, str]) -> list[Manifest]:
    """One Prometheus scrape config per ServiceMonitor endpoint, with static targets."""
    kinds: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        kinds.setdefault(manifest["kind"], []).append(manifest)
    workloads = kinds.get("Deployment", []) + kinds.get("StatefulSet", [])
    configs = []
    for monitor in kinds.get("ServiceMonitor", []):
        spec = monitor["spec"]
        namespaces = spec.get("namespaceSelector", {}).get(
            "matchNames", [monitor["metadata"]["namespace"]]
        )
        services = [
            s
            for s in kinds.get("Service", [])
            if s["metadata"]["namespace"] in namespaces
            and _matches(s["metadata"].get("labels", {}), spec["selector"]["matchLabels"])
        ]
        for index, endpoint in enumerate(spec["endpoints"]):
            targets = []
            for service in services:
                port = next(
                    (p for p in service["spec"]["ports"] if p.get("name") == endpoint["port"]),
                    None,
                )
                if port is None:
                    continue
                for workload in workloads:
                    template = workload["spec"]["template"]
                    if not _matches(template["metadata"]["labels"], service["spec"]["selector"]):
                        continue
                    found = _container_port(template, port.get("targetPort", port["port"]))
                    if found is None:
                        continue
                    container, number = found
                    for pod in workload_pod_names(workload):
                        if pod not in hosts:
                            continue
                        labels = {
                            "job": service["metadata"]["name"],
                            "namespace": service["metadata"]["namespace"],
                            "service": service["metadata"]["name"],
                            "pod": pod,
                            "container": container,
                            "endpoint": endpoint["port"],
                        }
                        targets.append({"targets": [f"{hosts[pod]}:{number}"], "labels": labels})
            meta = monitor["metadata"]
            configs.append(
                {
                    # The operator's job name for a ServiceMonitor endpoint.
                    "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
                    "metrics_path": endpoint.get("path", "/metrics"),
                    "scrape_interval": endpoint.get("interval", "30s"),
                    "scrape_timeout": endpoint.get("scrapeTimeout", "10s"),
                    "static_configs": targets,
                }
            )
    return configs


def rule_groups(manifests: list[Manifest]) -> list[Manifest]:
    """The groups of every PrometheusRule."""
    return [
        group
        for manifest in manifests
        if manifest["kind"] == "PrometheusRule"
        for group in manifest["spec"]["groups"]
    ]


def wants_prometheus(manifests: list[Manifest]) -> bool:
    """Whether the stack renders anything a Prometheus would read."""
    return any(m["kind"] in ("ServiceMonitor", "PrometheusRule") for m in manifests)


def prometheus_address(subnet: str) -> str:
    """The address Prometheus gets on the sandbox's network: .6, of the .2-.9 kept for tools
    (the directory tests' LDAP server takes .5)."""
    return str(list(ipaddress.ip_network(subnet).hosts())[5])


def image_tag() -> str:
    """The image's tag: a hash of its Containerfile and the base it builds on."""
    digest = hashlib.sha256(CONTAINERFILE.read_bytes() + IMAGE_REVISION.encode()).hexdigest()
    return f"localhost/slurm-stack/prometheus:{digest[:12]}"


def ensure_image(podman: Podman) -> str:
    """Build the Prometheus image once per Containerfile; returns its tag."""
    tag = image_tag()
    if podman.run(["image", "exists", tag], check=False).returncode != 0:
        base = f"localhost/slurm-stack/base:{BASE_SLURM_VERSION}-{IMAGE_REVISION}"
        subprocess.run(
            [
                "podman",
                "build",
                "--quiet",
                "--pull=never",
                "--build-arg",
                f"BASE={base}",
                "-t",
                tag,
                "-f",
                str(CONTAINERFILE),
                str(CONTAINERFILE.parent),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return tag


class SandboxPrometheus:
    """The Prometheus container of one sandbox."""

    def __init__(self, sandbox: str, network: str, subnet: str, state_dir: Path, podman: Podman):
        self.name = f"{sandbox}-{CONTAINER_SUFFIX}"
        self.network, self.address = network, prometheus_address(subnet)
        self.config_dir = state_dir / "prometheus"
        self.pid_file = state_dir / "pids" / self.name
        self.podman = podman

    @property
    def url(self) -> str:
        return f"http://{self.address}:{PORT}"

    def write_config(self, manifests: list[Manifest], hosts: Mapping[str, str]) -> bool:
        """Write prometheus.yml and rules.yml; returns whether either changed."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        files = {
            "prometheus.yml": {
                "global": {"evaluation_interval": EVALUATION_INTERVAL},
                "rule_files": ["/etc/prometheus/rules.yml"],
                "scrape_configs": scrape_configs(manifests, hosts),
            },
            "rules.yml": {"groups": rule_groups(manifests)},
        }
        changed = False
        for name, content in files.items():
            text = yaml.safe_dump(content, sort_keys=False)
            path = self.config_dir / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                changed = True
        return changed

    def running(self) -> bool:
        return self.podman.runs(self.name, self.pid_file)

    def start(self, image: str) -> None:
        """Start it, or have a running one reread its configuration."""
        if self.running():
            self.post("/-/reload")
            return
        self.podman.run(["rm", "--force", self.name], check=False)
        self.podman.run_tracked(
            [
                "--name", self.name,
                "--network", self.network, "--ip", self.address,
                "--volume", f"{self.config_dir}:/etc/prometheus:ro",
                "--entrypoint", "prometheus", image,
                "--config.file=/etc/prometheus/prometheus.yml",
                "--storage.tsdb.path=/tmp/prometheus",
                f"--web.listen-address=:{PORT}",
                "--web.enable-lifecycle",
            ],
            self.pid_file,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("/-/ready")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        self.podman.run(["rm", "--force", self.name], check=False)

    def get(self, path: str, **params: str) -> Any:
        """GET ``path``; JSON answers are decoded."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=20) as answer:
            body = answer.read().decode()
        return json.loads(body) if body.startswith("{") else body

    def post(self, path: str) -> None:
        request = urllib.request.Request(f"{self.url}{path}", method="POST")
        with urllib.request.urlopen(request, timeout=20):
            pass

    def query(self, expr: str) -> list[Manifest]:
        """An instant query's result vector."""
        answer = self.get("/api/v1/query", query=expr)
        return answer["data"]["result"]
