"""The stand-in Kubernetes API of one sandbox (`kube_api_server.py` in a container), and the
stand-in nodes its pods run on.

Each pod of the sandbox runs on a stand-in node of its own, `node-<pod>`, schedulable,
Ready and without labels until a test or `sandbox kube-node` says otherwise. A pod that mounts
its ServiceAccount's token (`automountServiceAccountToken: true`, as the node-state
controller's, or a projected volume of the kubelet's shape with a `serviceAccountToken`
source, as slurmctld's with elastic pools) gets what the kubelet gives it:
KUBERNETES_SERVICE_HOST/PORT and the token, ca.crt and namespace, here those of the
stand-in (plan.py adds them). Each such ServiceAccount has a token of its own, and the
stand-in authorizes each request by the stack's Roles, ClusterRoles and their bindings
(kube_rbac.py).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurm_stack.sandbox.kube_rbac import RBAC_KINDS
from slurm_stack.sandbox.state import SandboxState
from slurm_stack.sandbox.statefulsets import API_SERVER_USER, prepare_live_dir

if TYPE_CHECKING:  # podman.py imports plan.py, which imports this module
    from slurm_stack.sandbox.podman import Podman

PORT = 6443
CONTAINER_SUFFIX = "kube-api"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVER_SCRIPT = Path(__file__).with_name("kube_api_server.py")
RBAC_MODULE = Path(__file__).with_name("kube_rbac.py")
FINGERPRINT_LABEL = "slurm-stack.io/kube-api"  # how the server was started (`start`)
# The kubelet's own Root CA ConfigMap, which Kubernetes publishes in every namespace.
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
Manifest = dict[str, Any]


def kube_api_address(subnet: str) -> str:
    """The stand-in's address on the sandbox's network: .8, of the .2-.9 kept for tools
    (the LDAP server takes .5, Prometheus .6)."""
    return str(list(ipaddress.ip_network(subnet).hosts())[7])


def node_of(pod: str) -> str:
    """The stand-in node a pod runs on."""
    return f"node-{pod}"


def service_account_dir(state_dir: str, namespace: str, account: str) -> str:
    """Where the sandbox keeps ServiceAccount ``account``'s volume: its token, the stand-in's
    CA and the namespace."""
    return f"{state_dir}/kube-api/serviceaccounts/{namespace}/{account}"


def projects_token(volume: Manifest) -> bool:
    """Whether a pod volume is a projected one with a ServiceAccount token."""
    sources = (volume.get("projected") or {}).get("sources") or []
    return any("serviceAccountToken" in source for source in sources)


def gets_token(pod_spec: Manifest) -> bool:
    """Whether a pod mounts its ServiceAccount's token (automounted or projected)."""
    return bool(pod_spec.get("automountServiceAccountToken")) or any(
        projects_token(volume) for volume in pod_spec.get("volumes", [])
    )


def service_account_of(manifest: Manifest) -> tuple[str, str]:
    """The namespace and ServiceAccount of a workload's pods (`default` where unnamed)."""
    namespace = manifest["metadata"].get("namespace", "default")
    return namespace, _pod_spec(manifest).get("serviceAccountName") or "default"


def token_accounts(manifests: Iterable[Manifest]) -> list[tuple[str, str]]:
    """The ServiceAccounts (namespace, name) some pod of the stack mounts the token of."""
    return sorted({service_account_of(m) for m in manifests if gets_token(_pod_spec(m))})


def wants_kube_api(manifests: list[Manifest]) -> bool:
    """Whether a pod of the stack reads the Kubernetes API (it mounts a token)."""
    return bool(token_accounts(manifests))


def _pod_spec(manifest: Manifest) -> Manifest:
    if manifest.get("kind") in ("StatefulSet", "Deployment", "Job"):
        return manifest["spec"]["template"]["spec"]
    return {}


def selector_string(selector: Manifest) -> str:
    """A label selector as the API server writes it (a Scale's ``status.selector``):
    requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`."""
    terms = [(key, f"{key}={value}") for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = ",".join(sorted(expression.get("values") or []))
        written = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }[operator]
        terms.append((key, written))
    return ",".join(term for _, term in sorted(terms))


def api_statefulsets(manifests: Iterable[Manifest]) -> dict[str, dict[str, Manifest]]:
    """The StatefulSets as the stand-in serves their scale: by namespace and name, their
    selector and manifest replicas."""
    found: dict[str, dict[str, Manifest]] = {}
    for m in manifests:
        if m.get("kind") == "StatefulSet":
            namespace = m["metadata"].get("namespace", "default")
            found.setdefault(namespace, {})[m["metadata"]["name"]] = {
                "selector": selector_string(m["spec"].get("selector") or {}),
                "replicas": int(m["spec"].get("replicas", 1)),
            }
    return found


def api_pods(manifests: list[Manifest], sizes: Mapping[str, int] | None = None) -> list[Manifest]:
    """Every long-running pod as the API lists it: name, namespace, labels, node and grace
    period; a StatefulSet's pods by its size in ``sizes`` where given."""
    pods = []
    for m in manifests:
        if m.get("kind") not in ("StatefulSet", "Deployment"):
            continue
        labels = m["spec"]["template"]["metadata"]["labels"]
        grace = m["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        replicas = m["spec"].get("replicas", 1)
        if m["kind"] == "StatefulSet":
            replicas = (sizes or {}).get(m["metadata"]["name"], replicas)
        for i in range(replicas):
            name = f"{m['metadata']['name']}-{i}"
            namespace = m["metadata"].get("namespace", "default")
            pods.append(
                {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "nodeName": node_of(name),
                    "grace": grace,
                }
            )
    return pods


class SandboxKubeApi:
    """The stand-in API container of one sandbox and its state files."""

    def __init__(self, sandbox: str, network: str, subnet: str, state_dir: Path, podman: Podman):
        self.name = f"{sandbox}-{CONTAINER_SUFFIX}"
        self.network, self.address = network, kube_api_address(subnet)
        self.state = SandboxState(state_dir)
        self.dir = self.state.kube_api_dir
        self.pid_file = state_dir / "pids" / self.name
        self.podman = podman

    def prepare(self, manifests: list[Manifest], sizes: Mapping[str, int] | None = None) -> None:
        """The TLS identity (made once), a token for each ServiceAccount that mounts one (kept
        across runs) and its volume's files, the RBAC objects, the StatefulSets, and the pods
        (StatefulSets' at ``sizes``) and nodes as they are now (a node's cordon, readiness
        and labels are kept)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not (self.dir / "ca.crt").exists():
            self._make_certificates()
        self._write_tokens(token_accounts(manifests))
        rbac = [
            {k: m[k] for k in ("kind", "metadata", "rules", "roleRef", "subjects") if k in m}
            for m in manifests
            if m.get("kind") in RBAC_KINDS
        ]
        self._write("rbac.json", rbac)
        statefulsets = api_statefulsets(manifests)
        self._write("statefulsets.json", statefulsets)
        prepare_live_dir(self.state, sorted(statefulsets))
        self.publish_pods(api_pods(manifests, sizes))

    def publish_pods(self, pods: list[Manifest]) -> None:
        """Make ``pods`` the pods the API lists, each on a stand-in node (new nodes
        schedulable and Ready; a node whose pod is gone goes too)."""
        nodes = self.nodes()
        fresh = {p["nodeName"]: nodes.get(p["nodeName"], {}) for p in pods}
        self._write_nodes(
            {n: {"unschedulable": False, "ready": True, **s} for n, s in fresh.items()}
        )
        self._write("pods.json", pods)

    def _write_tokens(self, accounts: list[tuple[str, str]]) -> None:
        """A token per account (the one it had, or a new one), its volume's files, and the
        tokens the server accepts; an account no pod mounts any more loses its token."""
        tokens = self._read("tokens.json", {})
        by_account = {(a["namespace"], a["name"]): token for token, a in tokens.items()}
        kept = {}
        for namespace, account in accounts:
            token = by_account.get((namespace, account)) or secrets.token_hex(32)
            kept[token] = {"namespace": namespace, "name": account}
            volume = Path(service_account_dir(str(self.state.root), namespace, account))
            volume.mkdir(parents=True, exist_ok=True)
            (volume / "token").write_text(token)
            (volume / "ca.crt").write_bytes((self.dir / "ca.crt").read_bytes())
            (volume / "namespace").write_text(namespace)
        self._write("tokens.json", kept)
        for namespace, account in set(by_account) - set(accounts):
            shutil.rmtree(service_account_dir(str(self.state.root), namespace, account), True)
        # The one token and volume of earlier versions, which every token pod shared.
        (self.dir / "token").unlink(missing_ok=True)
        shutil.rmtree(self.dir / "serviceaccount", ignore_errors=True)

    def _read(self, name: str, default: Any) -> Any:
        path = self.dir / name
        return json.loads(path.read_text()) if path.exists() else default

    def _write(self, name: str, document: Any) -> None:
        partial = self.dir / f"{name}.new"
        partial.write_text(json.dumps(document, indent=1, sort_keys=True))
        partial.rename(self.dir / name)  # the server never reads half a file

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
        self._write("nodes.json", nodes)

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
        """Start the server (python3 of ``image``) unless it runs as this version starts it
        (its script, its RBAC module, its mounts); one started otherwise is replaced."""
        arguments = [
            "--network", self.network, "--ip", self.address,
            "--user", f"{API_SERVER_USER}:{API_SERVER_USER}",
            "--volume", f"{self.dir}:/srv/state:ro",
            # The one directory it writes: StatefulSet sizes and pod deletions.
            "--volume", f"{self.state.kube_api_live_dir}:/srv/state/live:rw",
            "--volume", f"{SERVER_SCRIPT}:/srv/kube_api_server.py:ro",
            "--volume", f"{RBAC_MODULE}:/srv/kube_rbac.py:ro",
            "--entrypoint", "python3", image,
            "/srv/kube_api_server.py", "/srv/state", str(PORT),
        ]  # fmt: skip
        digest = hashlib.sha256("\0".join(arguments).encode())
        for source in (SERVER_SCRIPT, RBAC_MODULE):
            digest.update(source.read_bytes())
        fingerprint = digest.hexdigest()[:16]
        started_as = self.pid_file.with_name(f"{self.name}.started-as")
        if self.running() and started_as.exists() and started_as.read_text() == fingerprint:
            return
        self.podman.run(["rm", "--force", "--time", "0", self.name], check=False)
        self.podman.run_tracked(
            ["--name", self.name, "--label", f"{FINGERPRINT_LABEL}={fingerprint}", *arguments],
            self.pid_file,
        )
        started_as.write_text(fingerprint)
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
