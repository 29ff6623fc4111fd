"""Secrets stay out of logs (README, "Secrets stay secrets": "never an environment variable
or a log line"), read from what the running itest stack's containers printed."""

import base64
import json
import subprocess
from pathlib import Path

from slurm_stack import naming, paths
from slurm_stack.k8s.accounting import db_password_secret, db_root_password_secret
from slurm_stack.k8s.common import munge_key_secret_name
from slurm_stack.k8s.login import host_keys_secret_name
from slurm_stack.k8s.rest_api import openapi_versions
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


def use_every_secret(cluster: Cluster) -> None:
    """Work that goes through each secret, so its users have logged what they log about it:
    an ssh login (host keys), a job on two nodes (munge), accounting (slurmdbd's database
    password) and a REST API request with a token (the JWT key)."""
    spec = cluster.sandbox.spec
    assert cluster.ok(cluster.login("srun -N2 hostname")).split(), "srun printed nothing"
    assert spec.name in cluster.ok(cluster.login("sacctmgr -n -P show cluster format=cluster"))
    host = naming.service_host(naming.rest_api_name(spec.name), spec.namespace)
    url = f"http://{host}:{paths.SLURMRESTD_PORT}/slurm/{openapi_versions(spec)[-1]}/diag"
    token = '"X-SLURM-USER-TOKEN: $(scontrol token | cut -d= -f2)"'
    status = cluster.ok(
        cluster.login(f"curl -sS -o /dev/null -w '%{{http_code}}' -H {token} {url}")
    )
    assert status == "200", status


def test_no_secret_value_is_in_any_log(cluster: Cluster) -> None:
    """itest's secrets: the munge key, the SSH host keys (private halves), slurmdbd's database
    password and MariaDB's root password, the REST API's JWT key, and the node-state
    controller's ServiceAccount token. It has no registry credentials (`containers` without
    `containerRegistryAuth`), no external database password and no LDAP bind password (the
    `directory` stack's, tests/cluster/test_directory.py)."""
    spec = cluster.sandbox.spec
    secrets = stack_secrets(cluster)
    names = {where.split()[1].split("/")[0] for where in secrets if where.startswith("Secret ")}
    assert names >= {
        munge_key_secret_name(spec),
        host_keys_secret_name(spec),
        db_password_secret(spec)[0],
        db_root_password_secret(spec)[0],
        naming.jwt_key_secret_name(cluster.name),
    }, names
    assert any(where.startswith("token of ") for where in secrets), sorted(secrets)
    # What was collected is what the pods hold: the key munged reads in the controller pod.
    munge = f"{cluster.controller}--munge"
    key = subprocess.run(
        ["podman", "exec", munge, "cat", f"{paths.MUNGE_KEY_DIR}/munge.key"],
        capture_output=True,
        check=True,
    ).stdout
    assert key == secrets[f"Secret {munge_key_secret_name(spec)}/munge.key"]

    use_every_secret(cluster)
    logs = stack_logs(cluster)
    printed = {where: text for where, text in logs.items() if text}
    # Enough was read that a leak would be seen: every Slurm daemon's log, and some Job's.
    assert any(b"slurmctld version" in text for text in printed.values()), sorted(printed)
    assert any(where.startswith("file ") and "/jobs/" in where for where in printed), sorted(logs)
    leaks = [
        f"{secret} in {where}"
        for secret, value in secrets.items()
        for form in forms(value)
        for where, text in printed.items()
        if form in text
    ]
    assert not leaks, "\n".join(sorted(set(leaks)))
    size = sum(map(len, printed.values()))
    print(f"{len(secrets)} secret values, {len(printed)} logs ({size} bytes) scanned")
