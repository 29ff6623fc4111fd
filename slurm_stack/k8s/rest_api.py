"""Slurm's REST API: the slurmrestd Deployment and Service, and the JWT key's place in the
slurmctld and slurmdbd pods (docs/rest-api.md).

slurmrestd holds no key and no munge socket. With `SLURM_JWT=daemon` it authenticates each
request to slurmctld and slurmdbd with the request's own token (`rest_auth/jwt`: the
X-SLURM-USER-NAME and X-SLURM-USER-TOKEN headers), so it can do nothing its callers could not.
Only slurmctld (which signs tokens for `scontrol token`) and slurmdbd (which checks them) read
the key (doc/html/jwt.shtml).
"""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    Manifest,
    env,
    image_pull,
    metadata,
    non_root,
    placement,
    pod_security,
    resources,
    selector_labels,
    tcp_probe,
)
from slurm_stack.k8s.directory import sss_pipes_mounts, sssd_sidecars, sssd_volumes
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.jail import jail_volume
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "rest"
PORT_NAME = "http"
# The pod-template annotation that rolls slurmctld and slurmdbd onto a new key.
KEY_GENERATION_ANNOTATION = "slurm-stack.io/jwt-key-generation"
# The OpenAPI versions (data_parser plugins) each Slurm major ships: src/plugins/data_parser
# at tags slurm-24-11-5-1 and slurm-26-05-3-1. slurmrestd serves exactly these.
OPENAPI_VERSIONS = {
    "24.11": ("v0.0.40", "v0.0.41", "v0.0.42"),
    "26.05": ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"),
}

# slurmrestd's lock-down calls unshare(CLONE_SYSVSEM) and unshare(CLONE_FILES) at start
# (slurmrestd.c, _lock_down). Neither needs a privilege of the kernel, but the runtimes'
# default seccomp profiles allow unshare(2) only with CAP_SYS_ADMIN (containerd's
# contrib/seccomp/seccomp_default.go; CRI-O's since 1.29.9), so under RuntimeDefault the
# daemon died with "Unable to unshare System V namespace". Both are turned off through the
# documented setting (slurmrestd(8), SLURMRESTD_SECURITY). They give nothing in a pod:
# the container's first process shares no semaphore-undo list and no file table with a
# parent (the runtime forks and execs it), and the pod has an IPC namespace of its own.
SLURMRESTD_SECURITY = "disable_unshare_sysv,disable_unshare_files"


def openapi_versions(spec: ClusterSpec) -> tuple[str, ...]:
    """The `/slurm/<version>/` paths the cluster's slurmrestd serves."""
    return OPENAPI_VERSIONS[spec.slurm_version]


def rest_api_url(spec: ClusterSpec) -> str:
    """The API's address inside the Kubernetes cluster."""
    host = naming.service_host(naming.rest_api_name(spec.name), spec.namespace)
    return f"http://{host}:{paths.SLURMRESTD_PORT}"


def jwt_key_volumes(spec: ClusterSpec) -> list[Manifest]:
    """The key Secret as a volume: root-owned, readable by the pod's fsGroup (SlurmUser) and
    nobody else, which auth/jwt insists on (it refuses a key that others may read)."""
    if not spec.rest_api.enabled:
        return []
    return [
        {
            "name": "jwt-key",
            "secret": {
                "secretName": naming.jwt_key_secret_name(spec.name),
                "items": [{"key": paths.JWT_KEY_FILE, "path": paths.JWT_KEY_FILE}],
                "defaultMode": 0o440,
            },
        }
    ]


def jwt_key_mounts(spec: ClusterSpec) -> list[Manifest]:
    """Where slurmctld and slurmdbd find the key (AuthAltParameters=jwt_key=...)."""
    if not spec.rest_api.enabled:
        return []
    return [{"name": "jwt-key", "mountPath": paths.JWT_KEY_DIR, "readOnly": True}]


def jwt_key_annotations(spec: ClusterSpec) -> Manifest:
    """Pod-template annotations of slurmctld and slurmdbd: a new key generation restarts them,
    as both read the key only when they start."""
    if not spec.rest_api.enabled:
        return {}
    return {"annotations": {KEY_GENERATION_ANNOTATION: str(spec.rest_api.key_generation)}}


def rest_api_deployment(spec: ClusterSpec, config_map: str) -> Manifest:
    """slurmrestd as its own unprivileged user, with the cluster's slurm.conf (its ConfigMap,
    ``config_map``: a config change rolls the pods, which keep no state)."""
    name = naming.rest_api_name(spec.name)
    content = ["slurmctld", *(["slurmdbd"] if spec.accounting.enabled else [])]
    slurmrestd = {
        "name": "slurmrestd",
        "image": spec.image("rest"),
        "imagePullPolicy": spec.images.pull_policy,
        # tini reaps and forwards SIGTERM; slurmrestd shuts down on it.
        "command": ["tini", "--", "slurmrestd"],
        "args": [f"0.0.0.0:{paths.SLURMRESTD_PORT}"],
        "env": env(
            SLURM_CONF=f"{paths.SLURM_CONF_DIR}/slurm.conf",
            # Each request's token authenticates it to slurmctld and slurmdbd.
            SLURM_JWT="daemon",
            SLURMRESTD_AUTH_TYPES="rest_auth/jwt",
            SLURMRESTD_OPENAPI_PLUGINS=",".join(f"openapi/{c}" for c in content),
            SLURMRESTD_DATA_PARSER_PLUGINS=",".join(
                f"data_parser/{v}" for v in openapi_versions(spec)
            ),
            SLURMRESTD_DEBUG="info",
            SLURMRESTD_SECURITY=SLURMRESTD_SECURITY,
        ),
        "ports": [{"name": PORT_NAME, "containerPort": paths.SLURMRESTD_PORT}],
        "volumeMounts": [
            {"name": "slurm-config", "mountPath": paths.SLURM_CONF_DIR, "readOnly": True},
            # Requests name users (`?users=alice`), which slurmrestd resolves itself: the
            # image reads passwd and group from the jail's /etc (libnss-extrausers), and
            # directory users through sssd. Nothing else of the jail is mounted.
            {
                "name": "jail",
                "mountPath": f"{paths.JAIL_DIR}/etc",
                "subPath": "etc",
                "readOnly": True,
            },
            *sss_pipes_mounts(spec),
        ],
        "resources": resources(spec.rest_api.resources),
        # No capability. slurmrestd refuses to run as root, SlurmUser or nobody, or with
        # their groups (slurmrestd.c, _check_user).
        "securityContext": non_root(paths.SLURMRESTD_UID),
        "readinessProbe": tcp_probe(paths.SLURMRESTD_PORT, period=5),
        "livenessProbe": tcp_probe(paths.SLURMRESTD_PORT, period=30, failures=3),
    }
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": spec.rest_api.replicas,
            "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
            "template": {
                "metadata": {"labels": metadata(spec, name, COMPONENT)["labels"]},
                "spec": {
                    **pod_identity(spec, COMPONENT),
                    **image_pull(spec),
                    **placement(spec.rest_api.placement),
                    **pod_security(),
                    "initContainers": sssd_sidecars(spec),
                    "containers": [slurmrestd],
                    "volumes": [
                        {"name": "slurm-config", "configMap": {"name": config_map}},
                        jail_volume(spec, read_only=True),
                        *sssd_volumes(spec),
                    ],
                },
            },
        },
    }


def rest_api_service(spec: ClusterSpec) -> Manifest:
    """The API's ClusterIP Service (component output `restApiUrl`)."""
    return {
        "metadata": metadata(spec, naming.rest_api_name(spec.name), COMPONENT),
        "spec": {
            "selector": selector_labels(spec, COMPONENT),
            "ports": [{"name": PORT_NAME, "port": paths.SLURMRESTD_PORT, "targetPort": PORT_NAME}],
        },
    }
