"""The stand-in Kubernetes API of one sandbox (`kube_api_server.py` in a container), and the
stand-in nodes its pods run on.

Each pod of the sandbox runs on a stand-in node of its own, `node-<pod>`, schedulable,
Ready and without labels until a test or `sandbox kube-node` says otherwise. The node-state
controller's pod (the only one with `automountServiceAccountToken: true`) gets what the
kubelet gives such a pod: KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount volume (token,
ca.crt, namespace), here pointing at the stand-in (plan.py adds them).
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # podman.py imports plan.py, which imports this module
    from slurm_stack.sandbox.podman import Podman

PORT = 6443
CONTAINER_SUFFIX = "kube-api"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVER_SCRIPT = Path(__file__).with_name("kube_api_server.py")
Manifest = dict[str, Any]


def kube_api_address(subnet: str) -> str:
    """The stand-in's address on the sandbox's network: .8, of the .2-.9 kept for tools
    (the LDAP server takes .5, Prometheus .6)."""
    return str(list(ipaddress.ip_network(subnet).hosts())[7])


def node_of(pod: str) -> str:
    """The stand-in node a pod runs on."""
    return f"node-{pod}"


def service_account_dir(state_dir: str) -> str:
    """Where the sandbox keeps what it mounts as a pod's ServiceAccount volume."""
    return f"{state_dir}/kube-api/serviceaccount"


def wants_kube_api(manifests: list[Manifest]) -> bool:
    """Whether a pod of the stack reads the Kubernetes API (it mounts a token)."""
    return any(_pod_spec(m).get("automountServiceAccountToken") for m in manifests)


def _pod_spec(manifest: Manifest) -> Manifest:
    if manifest.get("kind") in ("StatefulSet", "Deployment", "Job"):
        return manifest["spec"]["template"]["spec"]
    return {}


def api_pods(manifests: list[Manifest]) -> list[Manifest]:
    """Every long-running pod as the API lists it: name, namespace, labels, node."""
    pods = []
    for m in manifests:
        if m.get("kind") not in ("StatefulSet", "Deployment"):
            continue
        labels = m["spec"]["template"]["metadata"]["labels"]
        for i in range(m["spec"].get("replicas", 1)):
            name = f"{m['metadata']['name']}-{i}"
            namespace = m["metadata"].get("namespace", "default")
            pods.append(
                {"name": name, "namespace": namespace, "labels": labels, "nodeName": node_of(name)}
            )
    return pods


class SandboxKubeApi:
    """The stand-in API container of one sandbox and its state files."""

    def __init__(self, sandbox: str, network: str, subnet: str, state_dir: Path, podman: Podman):
        self.name = f"{sandbox}-{CONTAINER_SUFFIX}"
        self.network, self.address = network, kube_api_address(subnet)
        self.dir = state_dir / "kube-api"
        self.pid_file = state_dir / "pids" / self.name
        self.podman = podman

    def prepare(self, manifests: list[Manifest]) -> None:
        """The token, the TLS identity (made once), the ServiceAccount volume's files, and
        the pods and nodes as they are now (a node's cordon, readiness and labels are kept)."""
        account = Path(service_account_dir(str(self.dir.parent)))
        account.mkdir(parents=True, exist_ok=True)
        if not (self.dir / "token").exists():
            (self.dir / "token").write_text(secrets.token_hex(32))
            self._make_certificates()
        (account / "token").write_text((self.dir / "token").read_text())
        (account / "ca.crt").write_bytes((self.dir / "ca.crt").read_bytes())
        pods = api_pods(manifests)
        namespaces = {p["namespace"] for p in pods}
        (account / "namespace").write_text(sorted(namespaces)[0] if namespaces else "default")
        (self.dir / "pods.json").write_text(json.dumps(pods, indent=1))
        nodes = self.nodes()
        fresh = {p["nodeName"]: nodes.get(p["nodeName"], {}) for p in pods}
        self._write_nodes(
            {n: {"unschedulable": False, "ready": True, **s} for n, s in fresh.items()}
        )

    def nodes(self) -> dict[str, dict[str, Any]]:
        path = self.dir / "nodes.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def set_node(
        self,
        node: str,
        *,
        unschedulable: bool | None = None,
        ready: bool | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        """Cordon or uncordon a stand-in node, make it (not) Ready, or set its labels (a
        None value removes one, as `kubectl label node NAME key-` does); seen on the next
        read."""
        nodes = self.nodes()
        if node not in nodes:
            raise KeyError(f"no stand-in node {node} (known: {', '.join(sorted(nodes))})")
        if unschedulable is not None:
            nodes[node]["unschedulable"] = unschedulable
        if ready is not None:
            nodes[node]["ready"] = ready
        if labels:
            current = {**nodes[node].get("labels", {}), **labels}
            nodes[node]["labels"] = {k: v for k, v in current.items() if v is not None}
        self._write_nodes(nodes)

    def _write_nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        partial = self.dir / "nodes.json.new"
        partial.write_text(json.dumps(nodes, indent=1, sort_keys=True))
        partial.rename(self.dir / "nodes.json")  # the server never reads half a file

    def _make_certificates(self) -> None:
        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)

        # Python 3.13's default verification is strict (VERIFY_X509_STRICT): a CA with key
        # usage, a server certificate naming its issuer's key and its address.
        curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
                "-subj", "/CN=sandbox-kube-api-ca",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-addext", "subjectKeyIdentifier=hash")  # fmt: skip
        openssl("req", *curve, "-keyout", "server.key", "-out", "server.csr",
                "-subj", "/CN=kube-api")  # fmt: skip
        (self.dir / "server.cnf").write_text(
            f"subjectAltName=IP:{self.address}\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
            "authorityKeyIdentifier=keyid\n"
            "basicConstraints=CA:FALSE\n"
        )
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", "server.crt", "-days", "3650",
                "-extfile", "server.cnf")  # fmt: skip
        (self.dir / "server.key").chmod(0o644)  # read by the server's unprivileged user

    def running(self) -> bool:
        return self.podman.runs(self.name, self.pid_file)

    def start(self, image: str) -> None:
        """Start the server (python3 of ``image``) unless it runs."""
        if self.running():
            return
        self.podman.run(["rm", "--force", "--time", "0", self.name], check=False)
        self.podman.run_tracked(
            [
                "--name", self.name,
                "--network", self.network, "--ip", self.address,
                "--user", "65534:65534",
                "--volume", f"{self.dir}:/srv/state:ro",
                "--volume", f"{SERVER_SCRIPT}:/srv/kube_api_server.py:ro",
                "--entrypoint", "python3", image,
                "/srv/kube_api_server.py", "/srv/state", str(PORT),
            ],
            self.pid_file,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not self._listening():
            if not self.running() or time.monotonic() > deadline:
                logs = self.podman.logs(self.name)
                raise RuntimeError(f"the stand-in Kubernetes API did not start: {logs}")
            time.sleep(0.2)

    def _listening(self) -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.3)
            return probe.connect_ex((self.address, PORT)) == 0

    def stop(self) -> None:
        # At once: python3 runs as the container's PID 1, which ignores SIGTERM, so podman's
        # stop would wait out its 10 s; the server keeps nothing in memory.
        self.podman.run(["rm", "--force", "--time", "0", self.name], check=False)
