"""slurmctld: StatefulSet, Service and state volume."""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    PARALLEL,
    ROLLING_UPDATE,
    SKIP_AWAIT,
    Manifest,
    auth_mounts,
    auth_sidecars,
    auth_volumes,
    cluster_ip_service,
    container,
    env,
    image_pull,
    metadata,
    non_root,
    placement,
    pod_security,
    pvc,
    resources,
    run_volume,
    selector_labels,
    tcp_probe,
)
from slurm_stack.k8s.directory import sss_pipes_mounts, sssd_sidecars, sssd_volumes
from slurm_stack.k8s.elastic_access import api_access_mounts, api_access_volumes
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.jail import jail_volume
from slurm_stack.k8s.rest_api import jwt_key_annotations, jwt_key_mounts, jwt_key_volumes
from slurm_stack.k8s.site_files import site_files_mounts, site_files_volumes
from slurm_stack.render.site_scripts import slurmctld_script_files
from slurm_stack.spec.fields import setting_value
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "controller"


def state_claim_name(spec: ClusterSpec) -> str:
    """The PVC holding StateSaveLocation (jobs survive controller restarts through it)."""
    return f"{naming.controller_name(spec.name)}-state"


def has_backup(spec: ClusterSpec) -> bool:
    """A primary and a backup slurmctld (`controller.replicas: 2`)."""
    return spec.controller.replicas == 2


def state_pvc(spec: ClusterSpec) -> Manifest:
    """The controller's state volume: ReadWriteMany when a backup shares it."""
    volume = spec.controller.state_volume
    return pvc(
        spec,
        state_claim_name(spec),
        COMPONENT,
        size=volume.size,
        storage_class=volume.storage_class,
        access_mode="ReadWriteMany" if has_backup(spec) else "ReadWriteOnce",
    )


def controller_service(spec: ClusterSpec) -> Manifest:
    """A ClusterIP Service: the stable address in SlurmctldHost and --conf-server of one
    controller."""
    name = naming.controller_name(spec.name)
    return cluster_ip_service(spec, name, COMPONENT, "slurmctld", paths.SLURMCTLD_PORT)


def controller_pods_service(spec: ClusterSpec) -> Manifest:
    """With a backup: the headless Service that names each slurmctld pod, which
    SlurmctldHost and --conf-server list; not awaited. Names are published before a pod is
    ready: the primary must be found while it starts."""
    return {
        "metadata": metadata(
            spec, naming.controller_pods_service(spec.name), COMPONENT, annotations=SKIP_AWAIT
        ),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(spec, COMPONENT),
            "ports": [
                {"name": "slurmctld", "port": paths.SLURMCTLD_PORT, "targetPort": "slurmctld"}
            ],
        },
    }


def _apart(spec: ClusterSpec) -> Manifest:
    """A primary and a backup on different Kubernetes nodes where there are two: losing one
    node must not take both. Preferred, so a one-node cluster still runs them."""
    if not has_backup(spec):
        return {}
    term = {
        "weight": 100,
        "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": selector_labels(spec, COMPONENT)},
        },
    }
    return {
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    }


def site_scripts_mounts(scripts: list[str]) -> list[Manifest]:
    """The site's PrologSlurmctld/EpilogSlurmctld scripts, where slurm.conf names them."""
    if not scripts:
        return []
    return [
        {"name": "slurmctld-scripts", "mountPath": paths.SLURMCTLD_SCRIPTS_DIR, "readOnly": True}
    ]


def site_scripts_volumes(config_map: str, scripts: list[str]) -> list[Manifest]:
    """Those scripts of the config ConfigMap, executable: slurmctld runs them itself."""
    if not scripts:
        return []
    items = [{"key": name, "path": name, "mode": 0o755} for name in scripts]
    return [{"name": "slurmctld-scripts", "configMap": {"name": config_map, "items": items}}]


# Slurm's default MessageTimeout: how long a client waits for a controller's answer.
DEFAULT_MESSAGE_TIMEOUT_SECONDS = 10
PROBE_MARGIN_SECONDS = 5


def message_timeout_seconds(spec: ClusterSpec) -> int:
    """slurm.conf's MessageTimeout: a controller.slurmConfExtra line's, else Slurm's default."""
    value = setting_value(spec.controller.slurm_conf_extra, "MessageTimeout")
    return int(value) if value and value.isdigit() else DEFAULT_MESSAGE_TIMEOUT_SECONDS


def liveness_timeout_seconds(spec: ClusterSpec) -> int:
    """The liveness probe's timeout. `scontrol ping` asks every controller in turn, each for
    up to MessageTimeout, before it prints the line of this pod's own (`ping_all_controllers`
    in Slurm's src/api/reconfigure.c). A peer that stands still (a frozen node: its port
    still takes the connection) cost each probe of the healthy controller that long: with a
    10 s timeout a real cluster's backup failed every probe while the primary was stopped,
    and the kubelet killed both controllers."""
    return message_timeout_seconds(spec) * spec.controller.replicas + PROBE_MARGIN_SECONDS


def controller_statefulset(spec: ClusterSpec, config_hash: str) -> Manifest:
    """slurmctld as the SlurmUser with no capabilities; rolls when the config (its hash,
    ``config_hash``, names the ConfigMap) changes."""
    name = naming.controller_name(spec.name)
    config_map = naming.config_map_name(spec.name, config_hash)
    config_dir = paths.controller_config_dir(config_hash)
    scripts = slurmctld_script_files(spec)
    slurmctld = container(
        spec,
        "slurmctld",
        spec.image("controller"),
        "slurmctld",
        ports=[{"name": "slurmctld", "containerPort": paths.SLURMCTLD_PORT}],
        env=env(SLURM_CONF=f"{config_dir}/slurm.conf"),
        volumeMounts=[
            {"name": "slurm-config", "mountPath": config_dir, "readOnly": True},
            {"name": "state", "mountPath": paths.STATE_SAVE_DIR},
            {"name": "run", "mountPath": paths.SLURM_RUN_DIR},
            # Only for users and groups (the image resolves them from the jail's /etc).
            {"name": "jail", "mountPath": paths.JAIL_DIR, "readOnly": True},
            *auth_mounts(spec, sack_dir="/run/slurmctld"),
            *jwt_key_mounts(spec),
            *sss_pipes_mounts(spec),  # directory users' names for accounting and limits
            *site_scripts_mounts(scripts),
            *site_files_mounts(spec),
            # The elastic scaler's token (k8s/elastic.py): in this container alone.
            *api_access_mounts(spec),
        ],
        resources=resources(spec.controller.resources),
        securityContext=non_root(paths.SLURM_UID),
        startupProbe=tcp_probe(paths.SLURMCTLD_PORT, period=2, failures=150),
        readinessProbe=tcp_probe(paths.SLURMCTLD_PORT),
        livenessProbe={
            "exec": {"command": [paths.ENTRYPOINT, "probe-slurmctld"]},
            "periodSeconds": 30,
            "timeoutSeconds": liveness_timeout_seconds(spec),
            "failureThreshold": 4,
        },
    )
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": spec.controller.replicas,
            "serviceName": naming.controller_pods_service(spec.name) if has_backup(spec) else name,
            # One slurmctld per pod name at a time all the same: a StatefulSet creates a pod of
            # a name only once the pod of that name before it is gone, so the old slurmctld has
            # stopped before the new one takes the state (a primary and a backup take turns
            # in control as Slurm decides). Parallel: see ROLLING_UPDATE.
            "podManagementPolicy": PARALLEL,
            "updateStrategy": dict(ROLLING_UPDATE),
            "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
            "template": {
                "metadata": {
                    "labels": metadata(spec, name, COMPONENT)["labels"],
                    **jwt_key_annotations(spec),
                },
                "spec": {
                    **pod_identity(spec, COMPONENT),
                    **image_pull(spec),
                    **placement(spec.controller.placement),
                    **_apart(spec),
                    **pod_security(fsGroup=paths.SLURM_UID, fsGroupChangePolicy="OnRootMismatch"),
                    "terminationGracePeriodSeconds": 60,
                    "initContainers": [*auth_sidecars(spec), *sssd_sidecars(spec)],
                    "containers": [slurmctld],
                    "volumes": [
                        {"name": "slurm-config", "configMap": {"name": config_map}},
                        *site_scripts_volumes(config_map, scripts),
                        *site_files_volumes(spec),
                        {
                            "name": "state",
                            "persistentVolumeClaim": {"claimName": state_claim_name(spec)},
                        },
                        run_volume(),
                        jail_volume(spec, read_only=True),
                        *auth_volumes(spec, sack=True),
                        *jwt_key_volumes(spec),
                        *sssd_volumes(spec),
                        *api_access_volumes(spec),
                    ],
                },
            },
        },
    }
