"""The join script: what a host outside Kubernetes runs to become a node of the cluster.

`python -m slurm_stack join-script` prints it for a stack (docs/hybrid.md) from the stack
config and the stack's outputs (`pulumi stack output --json`): the controllers' names and
load balancer addresses and, only when asked, the auth key. It installs
Debian's slurmd of the cluster's version, the key with the owner and mode Slurm requires, the
declared users, the jail plugin (built on the host; it leaves jobs on the host's own root
filesystem there), the node Epilog, and starts configless `slurmd -Z` with the pool's
features, under systemd with the leave hook (outside_leave.py) as its ExecStop.
"""

import base64
import io
import json
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_stack import paths
from slurm_stack.render.environment import render_template
from slurm_stack.render.slurm import outside_node_conf
from slurm_stack.render.users import users_document
from slurm_stack.spec.models import ClusterSpec, OutsidePool

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "chroot_plugin"
EPILOG = REPO / "images" / "worker" / "epilog"
LEAVE_PROGRAM = REPO / "healthchecks" / "slurm_stack_healthchecks" / "outside_leave.py"
LEAVE_PATH = f"{paths.PROJECT_LIB_DIR}/leave"
# The Debian release whose slurmd is each Slurm major (images/base/Containerfile SUITE).
DEBIAN_RELEASES = {"24.11": "trixie (Debian 13)", "26.05": "forky (Debian 14)"}
KEY_FILES = {
    "munge": ("/etc/munge/munge.key", "munge", "0400"),
    "slurm": ("/etc/slurm/slurm.key", paths.SLURM_USER, "0600"),
}


class JoinError(Exception):
    """The join script cannot be made: what is missing, and where to get it."""


@dataclass(frozen=True)
class Controller:
    """One slurmctld as a host reaches it."""

    host: str
    in_cluster_address: str
    address: str


def controllers_from_outputs(outputs: dict[str, Any]) -> list[Controller]:
    """The controllers in the stack's `outsideControllers` output."""
    listed = outputs.get("outsideControllers")
    if not isinstance(listed, list) or not listed:
        raise JoinError(
            "the stack's outputs have no outsideControllers: set externalNodes in the stack "
            "config and run `pulumi up` first"
        )
    controllers = [
        Controller(c["slurmctldHost"], c["inClusterAddress"], c.get("address") or "")
        for c in listed
    ]
    if pending := [c.host for c in controllers if not c.address]:
        raise JoinError(
            f"the load balancer of {', '.join(pending)} has no address yet: wait for the cloud "
            "to give one (`kubectl get svc -n <namespace>`), then `pulumi refresh`"
        )
    return controllers


def _plugin_archive() -> str:
    """The jail plugin's sources as a base64 tar.gz (the host builds them against its
    libslurm-dev)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(PLUGIN_DIR.iterdir()):
            if path.suffix in (".c", ".h") or path.name == "Makefile":
                archive.add(path, arcname=path.name)
    return base64.b64encode(buffer.getvalue()).decode()


def pool_named(spec: ClusterSpec, name: str) -> OutsidePool:
    """The outside pool ``name``."""
    for pool in spec.outside_pools:
        if pool.name == name:
            return pool
    known = ", ".join(p.name for p in spec.outside_pools) or "(none: set externalNodes.pools)"
    raise JoinError(f"no outside pool {name!r}; outside pools: {known}")


def render_join_script(
    spec: ClusterSpec, pool_name: str, outputs: dict[str, Any], auth_key: str | None
) -> str:
    """The script for ``pool_name``'s hosts; ``auth_key`` (base64) embeds the key, else the
    script reads it from the file SLURM_STACK_AUTH_KEY_FILE names."""
    pool = pool_named(spec, pool_name)
    controllers = controllers_from_outputs(outputs)
    key_file, key_owner, key_mode = KEY_FILES[spec.auth]
    drain = pool.drain
    wait = drain.effective_wait_seconds
    return render_template(
        "join.sh.j2",
        cluster=spec.name,
        pool=pool.name,
        hosts=" ".join(pool.hosts),
        version=spec.slurm_version,
        debian_release=DEBIAN_RELEASES[spec.slurm_version],
        auth=spec.auth,
        key_file=key_file,
        key_owner=key_owner,
        key_mode=key_mode,
        auth_key=auth_key,
        hosts_lines=[f"{c.address} {c.in_cluster_address}" for c in controllers],
        conf_server=",".join(f"{c.in_cluster_address}:{paths.SLURMCTLD_PORT}" for c in controllers),
        node_conf=shlex.quote(outside_node_conf(pool)),
        users=users_document(spec)["users"],
        lib_dir=paths.PROJECT_LIB_DIR,
        run_dir=paths.SLURM_RUN_DIR,
        spool_dir=paths.SLURMD_SPOOL_DIR,
        host_root_marker=paths.OUTSIDE_HOST_ROOT_MARKER,
        healthcheck=paths.HEALTHCHECK_PROGRAM,
        epilog_path=paths.EPILOG,
        epilog=EPILOG.read_text(),
        leave_path=LEAVE_PATH,
        leave_program=LEAVE_PROGRAM.read_text(),
        leave_args=shlex.join([drain.policy, *([] if wait is None else [str(wait)])]),
        # systemd stops slurmd after its ExecStop: the pool's wait and the clean-up after it.
        stop_timeout="infinity" if wait is None else str(wait + 120),
        plugin_archive=_plugin_archive(),
        slurmctld_port=paths.SLURMCTLD_PORT,
        json=json,
    )
