"""The node-state controller: its Deployment and the only Kubernetes API access in the stack.

One pod runs `healthcheck node-state` as the SlurmUser with the cluster's Slurm config: it
lists the Kubernetes nodes and the cluster's worker pods and drains (with a `k8s:` reason)
or resumes their Slurm nodes. Its ServiceAccount may get and list nodes (a ClusterRole:
nodes are cluster-wide) and list pods in the cluster's namespace (a Role); nothing else,
and no other pod mounts a token but, with elastic pools, the slurmctld container
(k8s/elastic.py).
"""

import json

from slurm_stack import naming
from slurm_stack.k8s.common import POOL_LABEL, Manifest, env, metadata, selector_labels
from slurm_stack.k8s.identity import service_account_name
from slurm_stack.k8s.jobs import client_pod
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "node-state"
HEARTBEAT_FILE = "/tmp/node-state.alive"
RBAC_API = "rbac.authorization.k8s.io"


def node_state_name(spec: ClusterSpec) -> str:
    """The Deployment, its ServiceAccount, Role and RoleBinding."""
    return naming.node_state_name(spec.name)


def cluster_role_name(spec: ClusterSpec) -> str:
    """ClusterRoles are cluster-wide: the namespace keeps two clusters' names apart."""
    return f"{spec.namespace}-{node_state_name(spec)}"


def worker_selector(spec: ClusterSpec) -> str:
    """The label selector of the cluster's worker pods, as the API takes it."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(spec, "worker").items()))


def pool_labels_setting(spec: ClusterSpec) -> str:
    """NODE_STATE_POOLS: for each pool that reads node labels, its switch label and root
    switch (`switchLabel`) and its features' labels (`labelFeatures`, by full feature
    prefix), as the controller's ``PoolLabels.from_json`` takes them."""
    pools = {}
    for pool in spec.worker_pools:
        if not (pool.switch_label or pool.label_features):
            continue
        pools[pool.name] = {
            "switchLabel": pool.switch_label,
            "rootSwitch": spec.topology.root_switch if spec.topology else None,
            "features": {
                f"{naming.LABEL_FEATURE_PREFIX}{name}-": label
                for name, label in sorted(pool.label_features.items())
            },
        }
    return json.dumps(pools, sort_keys=True, separators=(",", ":"))


def node_state_deployment(spec: ClusterSpec, config_map: str) -> Manifest:
    """One controller pod with the cluster's Slurm config and an API token."""
    settings = env(
        NODE_STATE_NAMESPACE=spec.namespace,
        NODE_STATE_POD_SELECTOR=worker_selector(spec),
        NODE_STATE_INTERVAL_SECONDS=str(spec.node_state.interval_seconds),
        NODE_STATE_POOL_LABEL=POOL_LABEL,
        NODE_STATE_POOLS=pool_labels_setting(spec),
    )
    pod = client_pod(spec, config_map, COMPONENT, settings, restart_policy="Always")
    [controller] = pod["containers"]
    # The loop touches HEARTBEAT_FILE after each pass (healthcheck's node_state.py).
    controller["readinessProbe"] = {
        "exec": {"command": ["test", "-e", HEARTBEAT_FILE]},
        "periodSeconds": 5,
    }
    # A loop that stopped passing (a hung API call or scontrol) is restarted.
    stale = max(60, 3 * spec.node_state.interval_seconds)
    controller["livenessProbe"] = {
        "exec": {
            "command": [
                "sh",
                "-c",
                f"test $(( $(date +%s) - $(stat -c %Y {HEARTBEAT_FILE}) )) -lt {stale}",
            ]
        },
        "periodSeconds": 30,
        "failureThreshold": 2,
    }
    # The one pod that talks to the Kubernetes API: its token is what the Roles below grant.
    pod["automountServiceAccountToken"] = True
    name = node_state_name(spec)
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": 1,
            # Two at once would only act twice; a new one starts once the old one is gone.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
            "template": {
                "metadata": {"labels": metadata(spec, name, COMPONENT)["labels"]},
                "spec": pod,
            },
        },
    }


def _cluster_scoped(spec: ClusterSpec, name: str) -> Manifest:
    """Metadata of a cluster-wide object: no namespace."""
    meta = metadata(spec, name, COMPONENT)
    meta.pop("namespace", None)
    return meta


def node_reader_cluster_role(spec: ClusterSpec) -> Manifest:
    """Read the nodes: whether each is cordoned and Ready."""
    return {
        "metadata": _cluster_scoped(spec, cluster_role_name(spec)),
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
    }


def node_reader_binding(spec: ClusterSpec) -> Manifest:
    return {
        "metadata": _cluster_scoped(spec, cluster_role_name(spec)),
        "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": cluster_role_name(spec)},
        "subjects": [_subject(spec)],
    }


def pod_reader_role(spec: ClusterSpec) -> Manifest:
    """List the cluster's pods: which node each worker runs on."""
    return {
        "metadata": metadata(spec, node_state_name(spec), COMPONENT),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    }


def pod_reader_binding(spec: ClusterSpec) -> Manifest:
    return {
        "metadata": metadata(spec, node_state_name(spec), COMPONENT),
        "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": node_state_name(spec)},
        "subjects": [_subject(spec)],
    }


def _subject(spec: ClusterSpec) -> Manifest:
    return {
        "kind": "ServiceAccount",
        "name": service_account_name(spec, COMPONENT),
        "namespace": spec.namespace,
    }
