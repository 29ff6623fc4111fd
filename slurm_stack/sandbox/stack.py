"""The manifests a sandbox runs: the stack rendered as `pulumi up` would create it.

Two things are added to what the stack file says, both as a deployed cluster would have them:
- a declared login user of the sandbox's own (`SANDBOX_USER`, uid `SANDBOX_UID`) with a key
  generated for this sandbox, so `sandbox ssh` can log in (the stack's users keep their own
  keys); the stack's users Job creates it like any other;
- Secret values kept from the first `up`: Pulumi state keeps the values of random resources, so
  a re-apply never rotates the munge key, the host keys or the database password (a Secret
  rendered from the stack config follows the config instead: sssd's, the registry
  credentials, and an external database's password from `accountingDbPassword`).
"""

import base64
import functools
import hashlib
import json
import os
import secrets
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurm_stack import naming
from slurm_stack.k8s.accounting import db_password_secret
from slurm_stack.k8s.outside import POD_NAME_LABEL
from slurm_stack.k8s.rest_api import KEY_GENERATION_ANNOTATION
from slurm_stack.offline import manifests, validate_manifests
from slurm_stack.offline.engine import run_program
from slurm_stack.sandbox.plan import allocate_ips
from slurm_stack.sandbox.render_cache import load_render, render_key, save_render
from slurm_stack.sandbox.state import SandboxState, hold_ips
from slurm_stack.spec import (
    ClusterSpec,
    load_spec,
)
from slurm_stack.stackfile import load_stack_config

SANDBOX_USER = "sandbox"
SANDBOX_UID = 2000

Manifest = dict[str, Any]


class SandboxStackError(RuntimeError):
    """The stack cannot run in a sandbox (schema problems, unsupported settings)."""


@dataclass(frozen=True)
class SandboxStack:
    """A rendered stack ready for the sandbox plan."""

    spec: ClusterSpec
    manifests: list[Manifest]
    outputs: dict[str, Any]


def cluster_key(project: str) -> str:
    """The config key of the cluster definition."""
    return f"{project}:cluster"


def cluster_name(stack_file: Path, project: str) -> str | None:
    """The cluster's `name` as the stack file gives it, read without rendering (so without
    touching the sandbox's state); None where the file gives none (rendering names the
    problem). Parsed once per content of the file: a sandbox asks several times an `up`."""
    try:
        content = stack_file.read_bytes()
    except OSError:
        return None
    return _cluster_name(stack_file, hashlib.sha256(content).hexdigest(), project)


@functools.lru_cache(maxsize=64)
def _cluster_name(stack_file: Path, _content_digest: str, project: str) -> str | None:
    try:
        stack = load_stack_config(stack_file, project)
        cluster = json.loads(stack.config.get(cluster_key(project), "null"))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    name = cluster.get("name") if isinstance(cluster, dict) else None
    return name if isinstance(name, str) else None


def with_sandbox_user(cluster: dict[str, Any], public_key: str) -> dict[str, Any]:
    """``cluster`` with the sandbox's login user added (or its keys replaced)."""
    login = dict(cluster.get("login") or {})
    users = [u for u in login.get("users") or [] if u.get("name") != SANDBOX_USER]
    users.append({"name": SANDBOX_USER, "uid": SANDBOX_UID, "authorizedKeys": [public_key]})
    login["users"] = users
    return {**cluster, "login": login}


def load_balancer_stand_in(
    state: SandboxState, subnet: str
) -> Callable[[Mapping[str, Any]], str | None]:
    """The sandbox's cloud load balancer: a LoadBalancer Service that selects one pod by name
    answers at that pod's address (handed out now if the pod has none yet, and kept for the
    pod as every address is). Others get the engine's default (an unreachable address)."""

    def address(service_spec: Mapping[str, Any]) -> str | None:
        pod = (service_spec.get("selector") or {}).get(POD_NAME_LABEL)
        if not isinstance(pod, str):
            return None
        with hold_ips(state):
            known = state.load_ips()
            if pod not in known:
                known[pod] = allocate_ips([pod], subnet, known)[pod]
                state.save_ips(known)
            return known[pod]

    return address


def render_for_sandbox(
    stack_file: Path, project: str, state: SandboxState, subnet: str | None = None
) -> SandboxStack:
    """Run the stack program offline with the sandbox user (or take the last render, when
    nothing it follows from changed: `render_cache`); keep Secret values across runs. With
    ``subnet``, a LoadBalancer Service that selects one pod by name gets that pod's address
    as its own (`load_balancer_stand_in`)."""
    from slurm_stack.program import run

    stack = load_stack_config(stack_file, project)
    key = cluster_key(project)
    if key not in stack.config:
        raise SandboxStackError(f"{stack_file}: no {key} in the stack config")
    cluster = with_sandbox_user(json.loads(stack.config[key]), state.ssh_public_key())

    spec = load_spec(cluster, **stack.secrets_given())
    config = {**stack.config, key: json.dumps(cluster)}
    previous_outputs = state.load_outputs()
    kept_under = render_key(
        project=project,
        stack=stack.stack,
        config=config,
        secret_keys=stack.secret_keys,
        previous_outputs=previous_outputs,
    )
    kept = load_render(state.render_file, kept_under)
    if kept is not None:
        documents, outputs = kept
    else:
        salts = RandomSalts(state.random_salts_file)
        result = run_program(
            run,
            project=project,
            stack=stack.stack,
            config=config,
            secret_keys=stack.secret_keys,
            previous_outputs=previous_outputs,
            load_balancer_address=load_balancer_stand_in(state, subnet) if subnet else None,
            random_salt=salts,
        )
        salts.save()
        documents, outputs = manifests(result.resources), dict(result.outputs)
        known_valid = state.load_valid_manifests()
        problems = validate_manifests(documents, unknown_kinds="skip", known_valid=known_valid)
        state.save_valid_manifests(known_valid)
        if problems:
            raise SandboxStackError("rendered objects fail the schema:\n  " + "\n  ".join(problems))
        save_render(state.render_file, kept_under, documents, outputs)
    rendered = config_rendered_secrets(spec)
    return SandboxStack(spec, keep_secrets(documents, state.secrets_file, rendered), outputs)


class RandomSalts:
    """The sandbox's random provider: a salt per `random:` resource (the mock engine derives
    its value from its URN and the salt), new when the resource is created, kept while the
    program declares it, forgotten when it no longer does, as `pulumi up` deletes it: a
    resource declared again (the REST API's key, turned off and on) has a new value."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.recorded: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        self.used: dict[str, str] = {}
        self.lock = threading.Lock()

    def __call__(self, urn: str) -> str:
        with self.lock:
            salt = self.used[urn] = self.recorded.get(urn) or secrets.token_hex(16)
            return salt

    def save(self) -> None:
        """Keep the salts of the resources the last run declared, and only those."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.used, handle, indent=2, sort_keys=True)


# Secrets rendered from the stack config (and its secret values) rather than generated:
# `pulumi up` rewrites them whenever the config changes, so the sandbox does too.
RENDERED_SECRET_COMPONENTS = frozenset({"directory"})


def config_rendered_secrets(spec: ClusterSpec) -> frozenset[str]:
    """The Secrets, by name, that the program renders from stack config values rather than
    generates, beside those of `RENDERED_SECRET_COMPONENTS`: the registry credentials
    (`registryAuth`) and, with an external database and no `passwordSecret`, its password
    (`accountingDbPassword`; otherwise that Secret holds a random password)."""
    names = {naming.registry_auth_secret_name(spec.name)}
    accounting = spec.accounting
    if accounting.mode == "external" and accounting.external.password_secret is None:
        names.add(db_password_secret(spec)[0])
    return frozenset(names)


def keep_secrets(
    documents: list[Manifest], path: Path, rendered: Collection[str] = ()
) -> list[Manifest]:
    """Generated Secrets get the data they had at the first apply; new ones are recorded.
    Those ``rendered`` names and those of `RENDERED_SECRET_COMPONENTS`, rendered from the
    stack config, take the data they are rendered with. A Secret with a new generation
    annotation (the JWT key's) holds a new value: the program replaced what generates it.
    One the render no longer has is forgotten, as `pulumi up` deletes a random resource the
    program stopped declaring: declared again (the REST API turned off and on), it is new."""
    recorded: dict[str, dict[str, str]] = json.loads(path.read_text()) if path.exists() else {}
    kept: dict[str, dict[str, str]] = {}
    out = []
    for document in documents:
        if document["kind"] == "Secret":
            name = document["metadata"]["name"]
            component = document["metadata"].get("labels", {}).get("app.kubernetes.io/component")
            if component in RENDERED_SECRET_COMPONENTS or name in rendered:
                data = _base64_data(document)
            else:
                annotations = document["metadata"].get("annotations", {})
                if (generation := annotations.get(KEY_GENERATION_ANNOTATION)) is not None:
                    name = f"{name}@{generation}"
                data = kept[name] = recorded.get(name) or _base64_data(document)
            document = {**document, "data": data}
            document.pop("stringData", None)
        out.append(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(kept, handle, indent=2, sort_keys=True)
    return out


def _base64_data(secret: Manifest) -> dict[str, str]:
    data = dict(secret.get("data", {}))
    for name, value in secret.get("stringData", {}).items():
        data[name] = base64.b64encode(value.encode()).decode()
    return dict(sorted(data.items()))
