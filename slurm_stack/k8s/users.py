"""The users ConfigMap and the Job that makes the jail's accounts match it."""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    CONFIG_FILES_LABEL,
    Manifest,
    client_auth_mounts,
    client_auth_sidecars,
    client_auth_volumes,
    container,
    env,
    image_pull,
    metadata,
    pod_security,
)
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.jail import jail_volume
from slurm_stack.render.users import USERS_FILE
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "users"


def users_config_map(spec: ClusterSpec, files: dict[str, str]) -> Manifest:
    """Not immutable and not renamed on change: the kubelet updates it in running login pods,
    so adding a user or a key restarts nothing."""
    name = naming.users_config_map_name(spec.name)
    return {
        "metadata": metadata(spec, name, COMPONENT, extra_labels={CONFIG_FILES_LABEL: "true"}),
        "data": dict(sorted(files.items())),
    }


def users_job(spec: ClusterSpec, config_map: str, users_hash: str) -> Manifest:
    """`sync-users` once per version of the users: accounts and homes in the jail, and Slurm
    associations. It fails, changing nothing, when a declared user collides with an account
    it did not create."""
    name = naming.users_job_name(spec.name, users_hash)
    sync = container(
        spec,
        "sync-users",
        spec.image("ops"),
        "sync-users",
        env=env(
            SLURM_CONF=f"{paths.SLURM_CONF_DIR}/slurm.conf",
            USERS_FILE=f"{paths.USERS_DIR}/{USERS_FILE}",
        ),
        volumeMounts=[
            {"name": "jail", "mountPath": paths.JAIL_DIR},
            {"name": "users", "mountPath": paths.USERS_DIR, "readOnly": True},
            {"name": "slurm-config", "mountPath": paths.SLURM_CONF_DIR, "readOnly": True},
            *client_auth_mounts(spec),
        ],
        resources={"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        # Root edits the jail's root-owned account files; CHOWN hands a new home directory
        # to its user. sacctmgr runs as root, an accounting administrator.
        securityContext={
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    )
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": 900,
            "template": {
                "metadata": {"labels": metadata(spec, name, COMPONENT)["labels"]},
                "spec": {
                    **pod_identity(spec, COMPONENT),
                    **pod_security(),
                    **image_pull(spec),
                    "restartPolicy": "Never",
                    "initContainers": client_auth_sidecars(spec),
                    "containers": [sync],
                    "volumes": [
                        jail_volume(spec),
                        {
                            "name": "users",
                            "configMap": {"name": naming.users_config_map_name(spec.name)},
                        },
                        {"name": "slurm-config", "configMap": {"name": config_map}},
                        *client_auth_volumes(spec),
                    ],
                },
            },
        },
    }
