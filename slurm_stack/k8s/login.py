"""Login pods: sshd chrooted into the jail, sackd for configless Slurm clients."""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    PARALLEL,
    ROLLING_UPDATE,
    Manifest,
    auth_mounts,
    auth_sidecars,
    auth_volumes,
    container,
    env,
    image_pull,
    metadata,
    placement,
    pod_security,
    resources,
    root_with,
    run_volume,
    sackd_sidecar,
    selector_labels,
    tcp_probe,
)
from slurm_stack.k8s.directory import sss_pipes_mounts, sssd_sidecars, sssd_volumes
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.jail import jail_volume, submount_mount, submount_volume, wait_for_jail
from slurm_stack.render.services import SSH_HOST_KEY_TYPES, node_host_key_alias
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "login"
# sshd writes the login record (AUDIT_WRITE), hands terminals to users (CHOWN, FOWNER,
# DAC_OVERRIDE), stops sessions (KILL), listens on 22 (NET_BIND_SERVICE), becomes the user
# (SETUID, SETGID) and chroots each session into the jail (SYS_CHROOT). SYS_ADMIN binds the
# pod's node-local pieces into the jail at start; SETPCAP then takes SYS_ADMIN out of the
# bounding set before sshd starts, so no session holds it (images/base/entrypoint), and
# takes SYS_CHROOT out of root's sessions (images/login/root-session).
LOGIN_CAPABILITIES = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "KILL",
    "NET_BIND_SERVICE",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_ADMIN",
    "SYS_CHROOT",
]


def host_keys_secret_name(spec: ClusterSpec) -> str:
    """The Secret with the login nodes' SSH host keys (stable across restarts)."""
    return f"{spec.name}-ssh-host-keys"


def host_key_files() -> list[str]:
    """File names in the host key Secret, private and public."""
    return [
        name
        for kind in SSH_HOST_KEY_TYPES
        for name in (f"ssh_host_{kind}_key", f"ssh_host_{kind}_key.pub")
    ]


def _node_ssh_env(spec: ClusterSpec) -> dict[str, str]:
    """workerPools[].sshd: where the entrypoint finds what sessions need to ssh to nodes."""
    if not spec.node_sshd_pools:
        return {}
    return {
        "NODE_SSH_CONFIG": f"{paths.NODE_SSH_CONFIG_DIR}/node_ssh_config",
        "NODE_HOST_KEYS_DIR": paths.NODE_HOST_KEYS_DIR,
        "NODE_HOST_KEY_ALIAS": node_host_key_alias(spec),
        "NODE_SSH_CONFIG_TARGET": paths.NODE_SSH_CONFIG_IN_JAIL,
        "NODE_KNOWN_HOSTS_TARGET": paths.NODE_KNOWN_HOSTS_IN_JAIL,
    }


def _node_ssh_mounts(spec: ClusterSpec) -> list[Manifest]:
    if not spec.node_sshd_pools:
        return []
    return [
        {"name": "node-ssh-config", "mountPath": paths.NODE_SSH_CONFIG_DIR, "readOnly": True},
        {"name": "node-host-keys", "mountPath": paths.NODE_HOST_KEYS_DIR, "readOnly": True},
    ]


def _node_ssh_volumes(spec: ClusterSpec, config_map: str) -> list[Manifest]:
    if not spec.node_sshd_pools:
        return []
    return [
        {
            "name": "node-ssh-config",
            "configMap": {
                "name": config_map,
                "items": [{"key": "node_ssh_config", "path": "node_ssh_config"}],
            },
        },
        # The nodes' public host keys only: their private keys never reach a login pod.
        {
            "name": "node-host-keys",
            "secret": {
                "secretName": naming.node_host_keys_secret_name(spec.name),
                "items": [
                    {"key": f"ssh_host_{kind}_key.pub", "path": f"ssh_host_{kind}_key.pub"}
                    for kind in SSH_HOST_KEY_TYPES
                ],
            },
        },
    ]


def login_service(spec: ClusterSpec) -> Manifest:
    """How users reach sshd: LoadBalancer (default), NodePort or ClusterIP."""
    service = spec.login.service
    port: Manifest = {"name": "ssh", "port": service.port, "targetPort": "ssh", "protocol": "TCP"}
    if service.node_port is not None:
        port["nodePort"] = service.node_port
    service_spec: Manifest = {
        "type": service.type,
        "selector": selector_labels(spec, COMPONENT),
        "ports": [port],
        # Keep one user's parallel connections (scp, ControlMaster) on one login pod.
        "sessionAffinity": "ClientIP",
    }
    if service.type in ("LoadBalancer", "NodePort"):
        # "Local" preserves the client source IP and routes external traffic only to nodes
        # with a ready login endpoint, never on to another node (which would put that node's
        # address in place of the client's): so loadBalancerSourceRanges, NetworkPolicies and
        # sshd's logs see the real client. A load balancer health-checks nodes for it; with
        # NodePort, connect to a node that runs a login pod. See
        # https://kubernetes.io/docs/reference/networking/virtual-ips/#external-traffic-policy
        # and https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/#preserving-the-client-source-ip
        service_spec["externalTrafficPolicy"] = "Local"
    if service.load_balancer_source_ranges:
        service_spec["loadBalancerSourceRanges"] = list(service.load_balancer_source_ranges)
    return {
        "metadata": metadata(
            spec, naming.login_name(spec.name), COMPONENT, annotations=service.annotations
        ),
        "spec": service_spec,
    }


def login_statefulset(spec: ClusterSpec, config_map: str) -> Manifest:
    """sshd pods; they wait for the jail and reach slurmctld through sackd (configless)."""
    name = naming.login_name(spec.name)
    sackd = sackd_sidecar(spec, spec.image("login"), "run")
    sshd = container(
        spec,
        "sshd",
        spec.image("login"),
        "sshd",
        ports=[{"name": "ssh", "containerPort": paths.SSH_PORT}],
        env=env(
            SLURM_CONF=f"{paths.SLURM_RUN_DIR}/conf/slurm.conf",
            SSHD_CONFIG=f"{paths.SSHD_CONFIG_DIR}/sshd_config",
            SLURM_CLIENT_PATHS=":".join(paths.SLURM_CLIENT_PATHS),
            **_node_ssh_env(spec),
        ),
        volumeMounts=[
            {"name": "jail", "mountPath": paths.JAIL_DIR},
            {"name": "sshd-config", "mountPath": paths.SSHD_CONFIG_DIR, "readOnly": True},
            {
                "name": "authorized-keys",
                "mountPath": paths.SSH_AUTHORIZED_KEYS_DIR,
                "readOnly": True,
            },
            {"name": "host-keys", "mountPath": paths.SSH_HOST_KEY_DIR, "readOnly": True},
            {"name": "run", "mountPath": paths.SLURM_RUN_DIR},
            # Users' clients authenticate through munged's socket, or with auth/slurm through
            # sackd's socket in /run/slurm: the key itself never enters this container.
            *(auth_mounts(spec) if spec.auth == "munge" else []),
            *sss_pipes_mounts(spec),
            *(submount_mount(s) for s in spec.jail.submounts),
            *_node_ssh_mounts(spec),
        ],
        resources=resources(spec.login.resources),
        securityContext=root_with(LOGIN_CAPABILITIES),
        readinessProbe=tcp_probe(paths.SSH_PORT),
        livenessProbe=tcp_probe(paths.SSH_PORT, period=30, failures=4),
    )
    volumes = [
        jail_volume(spec),
        {
            "name": "sshd-config",
            "configMap": {
                "name": config_map,
                "items": [{"key": "sshd_config", "path": "sshd_config"}],
            },
        },
        # The users ConfigMap, read by sshd's AuthorizedKeysCommand; kept up to date by the
        # kubelet, so key changes need no restart.
        {"name": "authorized-keys", "configMap": {"name": naming.users_config_map_name(spec.name)}},
        {
            "name": "host-keys",
            "secret": {"secretName": host_keys_secret_name(spec), "defaultMode": 0o400},
        },
        run_volume(),
        *auth_volumes(spec),
        *sssd_volumes(spec),
        *(volume for s in spec.jail.submounts if (volume := submount_volume(s))),
        *_node_ssh_volumes(spec, config_map),
    ]
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": spec.login.replicas,
            "serviceName": name,
            # Login pods are interchangeable; see ROLLING_UPDATE for the update strategy.
            "podManagementPolicy": PARALLEL,
            "updateStrategy": dict(ROLLING_UPDATE),
            "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
            "template": {
                "metadata": {"labels": metadata(spec, name, COMPONENT)["labels"]},
                "spec": {
                    **pod_identity(spec, COMPONENT),
                    **pod_security(),
                    **image_pull(spec),
                    **placement(spec.login.placement),
                    "initContainers": [
                        *auth_sidecars(spec),
                        *sssd_sidecars(spec),
                        sackd,
                        wait_for_jail(spec, spec.image("login")),
                    ],
                    "containers": [sshd],
                    "volumes": volumes,
                },
            },
        },
    }
