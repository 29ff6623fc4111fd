"""What the secrets-in-logs tests read: every secret value a running stack has, and every
log its containers, Jobs and the sandbox's stand-ins printed."""

import base64
import json
import subprocess
from pathlib import Path

from slurm_stack.sandbox.apply import job_log
from slurm_stack.sandbox.podman import SANDBOX_LABEL
from tests.cluster.conftest import Cluster

PUBLIC = ".pub"  # an SSH host key Secret's public halves: no secret


def stack_secrets(cluster: Cluster) -> dict[str, bytes]:
    """Every secret value the running stack has, by where it was found: each key of each
    Secret the sandbox applied (rendered with the values it keeps, `sandbox/stack.py`
    `keep_secrets`), the values its state keeps (`secrets.json`, every generation) and the
    ServiceAccount tokens of the stand-in Kubernetes API."""
    sandbox = cluster.sandbox
    sandbox.current_plan  # rendered  # noqa: B018
    found: dict[str, bytes] = {}
    for manifest in sandbox._manifests:
        if manifest["kind"] == "Secret":
            name = manifest["metadata"]["name"]
            for key, value in manifest.get("data", {}).items():
                found[f"Secret {name}/{key}"] = base64.b64decode(value)
            for key, value in manifest.get("stringData", {}).items():
                found[f"Secret {name}/{key}"] = value.encode()
    for name, data in json.loads(sandbox.state.secrets_file.read_text()).items():
        for key, value in data.items():
            found[f"kept {name}/{key}"] = base64.b64decode(value)
    tokens = sandbox.kube_api().dir / "tokens.json"
    if tokens.exists():
        for token, account in json.loads(tokens.read_text()).items():
            found[f"token of ServiceAccount {account['name']}"] = token.encode()
    named: dict[bytes, str] = {}  # each value once, by the first name it was found under
    for where, value in found.items():
        if not where.endswith(PUBLIC):
            named.setdefault(value, where)
    return {where: value for value, where in named.items()}


def forms(value: bytes) -> list[bytes]:
    """``value`` as a log could show it: raw (and without surrounding whitespace), as hex, and
    in base64 at each of the three offsets it may start at within a longer encoded text (less
    the last characters, which depend on what follows it)."""
    shown = [value, value.strip(), value.hex().encode()]
    for offset in range(3):
        encoded = base64.b64encode(value[offset:]).rstrip(b"=")
        shown.append(encoded[:-4])
    return [form for form in shown if len(form) >= 16]


def stack_logs(cluster: Cluster) -> dict[str, bytes]:
    """What every container of the stack printed (`podman logs`): each container of each pod
    the sandbox labels as this cluster's, machines outside labelled so too, the stand-in
    Kubernetes API and Prometheus; the saved output of finished Jobs' pods (`job_log`); and
    the sandbox's own event and controller logs."""
    sandbox = cluster.sandbox
    label = f"{SANDBOX_LABEL}={cluster.name}"
    names = {
        str(container["Names"])
        for pod in sandbox.podman.labelled("pod", label)
        for container in pod.get("Containers") or []  # type: ignore[attr-defined]
    }
    for container in sandbox.podman.labelled("container", label):
        names.update(str(name) for name in container.get("Names") or [])  # type: ignore[attr-defined]
    names.update(
        name
        for name in (sandbox.kube_api().name, sandbox.prometheus().name)
        if sandbox.podman.exists("container", name)
    )
    logs = {}
    for name in sorted(names):
        printed = subprocess.run(["podman", "logs", name], capture_output=True, check=True)
        logs[f"container {name}"] = printed.stdout + printed.stderr
    saved = job_log(sandbox.state, "*", "*")
    files: list[Path] = sorted(saved.parent.glob(saved.name))
    files += [sandbox.state.liveness_events_file, sandbox.state.controller_log]
    for path in files:
        if path.exists():
            logs[f"file {path}"] = path.read_bytes()
    return logs


def leaks(cluster: Cluster, secrets: dict[str, bytes]) -> tuple[list[str], dict[str, bytes]]:
    """Where any form of any of ``secrets`` appears in the stack's logs, and the logs read
    (those that printed anything). Fails when the logs read hold no slurmctld start (the
    scan would have read nothing that counts)."""
    printed = {where: text for where, text in stack_logs(cluster).items() if text}
    assert any(b"slurmctld version" in text for text in printed.values()), sorted(printed)
    found = [
        f"{secret} in {where}"
        for secret, value in secrets.items()
        for form in forms(value)
        for where, text in printed.items()
        if form in text
    ]
    return sorted(set(found)), printed
