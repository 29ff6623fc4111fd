"""The sssd sidecar that resolves LDAP users for a pod, and how the pod shares its sockets."""

from slurm_stack import paths
from slurm_stack.k8s.common import Manifest, container
from slurm_stack.spec.models import ClusterSpec

PIPES_VOLUME = "sss-pipes"


def sssd_secret_name(spec: ClusterSpec) -> str:
    """The Secret holding sssd.conf (with the bind password) and the CA certificate."""
    return f"{spec.name}-sssd"


def sssd_sidecars(spec: ClusterSpec) -> list[Manifest]:
    """sssd as a native sidecar, when the stack has a directory."""
    if spec.directory is None:
        return []
    return [
        container(
            spec,
            "sssd",
            spec.image("sssd"),
            "sssd",
            restartPolicy="Always",
            volumeMounts=[
                {"name": PIPES_VOLUME, "mountPath": paths.SSS_PIPES_DIR},
                # Its internal bus socket stays out of the directory the pod shares.
                {"name": "sssd-private", "mountPath": f"{paths.SSS_PIPES_DIR}/private"},
                {"name": "sssd-config", "mountPath": paths.SSSD_SECRET_DIR, "readOnly": True},
            ],
            resources={"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
            # Debian builds sssd to run as root; it needs no capability: it copies its config
            # out of the Secret as the owner (an fsGroup would make the mounted file's group
            # one sssd refuses) and talks to the directory over the network.
            securityContext={
                "runAsUser": 0,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            startupProbe={
                "exec": {"command": ["test", "-S", f"{paths.SSS_PIPES_DIR}/nss"]},
                "periodSeconds": 1,
                "failureThreshold": 60,
            },
        )
    ]


def sssd_volumes(spec: ClusterSpec) -> list[Manifest]:
    """The shared socket directory, sssd's private one, and its config Secret."""
    if spec.directory is None:
        return []
    memory = {"medium": "Memory", "sizeLimit": "1Mi"}
    return [
        {"name": PIPES_VOLUME, "emptyDir": memory},
        {"name": "sssd-private", "emptyDir": memory},
        # sssd refuses a config that others may read.
        {
            "name": "sssd-config",
            "secret": {"secretName": sssd_secret_name(spec), "defaultMode": 0o400},
        },
    ]


def sss_pipes_mounts(spec: ClusterSpec) -> list[Manifest]:
    """For a container that resolves directory users (NSS) or reads their SSH keys."""
    if spec.directory is None:
        return []
    return [{"name": PIPES_VOLUME, "mountPath": paths.SSS_PIPES_DIR, "readOnly": True}]
