"""slurmctld: StatefulSet, Service and state volume."""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    PARALLEL,
    ROLLING_UPDATE,
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
    resources,
    run_volume,
    selector_labels,
    tcp_probe,
    volume_claim,
)
from slurm_stack.k8s.directory import sss_pipes_mounts, sssd_sidecars, sssd_volumes
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.jail import jail_volume
from slurm_stack.k8s.rest_api import jwt_key_annotations, jwt_key_mounts, jwt_key_volumes
from slurm_stack.k8s.site_files import site_files_mounts, site_files_volumes
from slurm_stack.render.site_scripts import slurmctld_script_files
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "controller"


def state_claim_name(spec: ClusterSpec) -> str:
    """The PVC holding StateSaveLocation (jobs survive controller restarts through it)."""
    return f"{naming.controller_name(spec.name)}-state"


def state_pvc(spec: ClusterSpec) -> Manifest:
    """The controller's state volume."""
    return volume_claim(spec, state_claim_name(spec), COMPONENT, spec.controller.state_volume)


def controller_service(spec: ClusterSpec) -> Manifest:
    """A ClusterIP Service: the stable address in SlurmctldHost and --conf-server."""
    name = naming.controller_name(spec.name)
    return cluster_ip_service(spec, name, COMPONENT, "slurmctld", paths.SLURMCTLD_PORT)


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
        ],
        resources=resources(spec.controller.resources),
        securityContext=non_root(paths.SLURM_UID),
        startupProbe=tcp_probe(paths.SLURMCTLD_PORT, period=2, failures=150),
        readinessProbe=tcp_probe(paths.SLURMCTLD_PORT),
        livenessProbe={
            "exec": {"command": [paths.ENTRYPOINT, "probe-slurmctld"]},
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
    )
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": 1,
            "serviceName": name,
            # One slurmctld at a time all the same: a StatefulSet creates a pod of a name only
            # once the pod of that name before it is gone, so the old slurmctld has stopped
            # before the new one takes the state. Parallel: see ROLLING_UPDATE.
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
                    ],
                },
            },
        },
    }
