"""Pure renderers: config files as text, from the spec alone (no Pulumi)."""

import hashlib
import json

from slurm_stack import naming
from slurm_stack.render.services import (
    database_endpoint,
    render_node_ssh_config,
    render_node_sshd_config,
    render_slurmdbd_conf,
    render_sshd_config,
)
from slurm_stack.render.site_scripts import site_files
from slurm_stack.render.slurm import (
    node_conf,
    render_cgroup_conf,
    render_gres_conf,
    render_plugstack_conf,
    render_slurm_conf,
    render_topology_conf,
    submount_binds,
    submount_staging_path,
)
from slurm_stack.render.users import authorized_keys, users_config_files
from slurm_stack.spec.models import ClusterSpec

HASH_LENGTH = 10


def slurm_config_files(spec: ClusterSpec) -> dict[str, str]:
    """The files slurmctld serves to every node (configless): name -> content."""
    return {
        "cgroup.conf": render_cgroup_conf(spec),
        "gres.conf": render_gres_conf(spec),
        "plugstack.conf": render_plugstack_conf(spec),
        "slurm.conf": render_slurm_conf(spec),
        **({"topology.conf": topology} if (topology := render_topology_conf(spec)) else {}),
        **({naming.ELASTIC_CONFIG_FILE: render_elastic_config(spec)} if spec.elastic_pools else {}),
        **(
            {naming.OUTSIDE_CONFIG_FILE: render_outside_config(spec)}
            if spec.external_nodes is not None
            else {}
        ),
        **site_files(spec),
    }


def render_elastic_config(spec: ClusterSpec) -> str:
    """elastic.json: what the elastic scaler (in the controller pod, and the reconfigure Job's
    node sync) knows of each elastic pool."""
    pools = []
    for pool in spec.elastic_pools:
        assert pool.elastic is not None
        pools.append(
            {
                "name": pool.name,
                "statefulSet": naming.pool_name(spec.name, pool.name),
                "minReplicas": pool.elastic.min_replicas,
                "maxReplicas": pool.elastic.max_replicas,
                "nodeConf": node_conf(pool),
                "startTimeoutSeconds": pool.elastic.start_timeout_seconds,
            }
        )
    return json.dumps({"namespace": spec.namespace, "pools": pools}, indent=2) + "\n"


def render_outside_config(spec: ClusterSpec) -> str:
    """outside.json: the hosts the outside pools declare, for the reconfigure Job's sync
    (healthchecks/.../outside_sync.py), which removes the nodes of hosts no pool has now."""
    hosts = sorted(spec.external_nodes.hosts) if spec.external_nodes is not None else []
    return json.dumps({"hosts": hosts}, indent=2) + "\n"


def login_config_files(spec: ClusterSpec) -> dict[str, str]:
    """sshd_config for the login pods; with sshd on nodes, the ssh_config that sessions use
    to reach them."""
    files = {"sshd_config": render_sshd_config(spec)}
    if spec.node_sshd_pools:
        files["node_ssh_config"] = render_node_ssh_config(spec)
    return files


def node_sshd_config_files(spec: ClusterSpec) -> dict[str, str]:
    """sshd_config for the nodes of pools with sshd (one for all of them)."""
    return {"node_sshd_config": render_node_sshd_config(spec)}


def accounting_config_files(spec: ClusterSpec) -> dict[str, str]:
    """slurmdbd.conf (without the password); none when accounting is off."""
    if not spec.accounting.enabled:
        return {}
    return {"slurmdbd.conf": render_slurmdbd_conf(spec)}


def content_hash(files: dict[str, str]) -> str:
    """A short, stable hash of a set of files; it names ConfigMaps and the reconfigure Job."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()[:HASH_LENGTH]


def node_sshd_config_map(spec: ClusterSpec) -> str:
    """The name of the nodes' sshd ConfigMap, which carries its content's hash."""
    return naming.node_sshd_config_map_name(spec.name, content_hash(node_sshd_config_files(spec)))


__all__ = [
    "accounting_config_files",
    "authorized_keys",
    "content_hash",
    "database_endpoint",
    "login_config_files",
    "node_conf",
    "node_sshd_config_files",
    "node_sshd_config_map",
    "slurm_config_files",
    "submount_binds",
    "submount_staging_path",
    "users_config_files",
]
