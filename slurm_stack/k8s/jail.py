"""The jail volume, the populate-jail Job, and how pods mount the jail and its submounts."""

import hashlib

from slurm_stack import paths
from slurm_stack.k8s.common import Manifest, container, image_pull, metadata, pod_security, pvc
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.render import submount_staging_path
from slurm_stack.spec.models import (
    ClusterSpec,
    EmptyDirSubmount,
    HostPathSubmount,
    MemorySubmount,
    PvcSubmount,
    Submount,
)

COMPONENT = "jail"

# How long populate-jail may run. Copying a large root filesystem (CUDA, compilers: tens of
# GB) onto network storage can take well over an hour; a shorter deadline would kill a
# healthy copy half-way. The deadline only stops a hung one. Pulumi waits a little longer
# (slurm_stack/components/timeouts.py), so `up` reports the Job's own DeadlineExceeded.
POPULATE_DEADLINE_SECONDS = 3 * 3600


def jail_claim_name(spec: ClusterSpec) -> str:
    """The claim every login and worker pod mounts at /mnt/jail."""
    return spec.jail.existing_claim or f"{spec.name}-jail"


def jail_pvc(spec: ClusterSpec) -> Manifest | None:
    """The RWX jail volume, unless the stack uses an existing claim."""
    if spec.jail.existing_claim:
        return None
    return pvc(
        spec,
        jail_claim_name(spec),
        COMPONENT,
        size=spec.jail.size,
        storage_class=spec.jail.storage_class,
        access_mode="ReadWriteMany",
    )


def populate_image(spec: ClusterSpec) -> str:
    """The image whose root filesystem becomes the jail."""
    return spec.jail.populate.image or spec.image("jail")


def populate_job_name(spec: ClusterSpec) -> str:
    """Named by image and mode, so a new jail image or mode is a new run."""
    mode = "add-newer-files" if spec.jail.populate.add_newer_files else "once"
    digest = hashlib.sha256(f"{populate_image(spec)}\0{mode}".encode()).hexdigest()[:10]
    return f"{spec.name}-populate-jail-{digest}"


def populate_job(spec: ClusterSpec) -> Manifest:
    """Copies the jail image's root filesystem into the volume once; never deletes anything."""
    args = ["--target", paths.JAIL_DIR, "--version", populate_image(spec)]
    if spec.jail.populate.add_newer_files:
        args.append("--add-newer-files")
    populate = {
        "name": "populate",
        "image": populate_image(spec),
        "imagePullPolicy": spec.images.pull_policy,
        "command": [paths.POPULATE_JAIL],
        "args": args,
        "volumeMounts": [{"name": "jail", "mountPath": paths.JAIL_DIR}],
        # Copying waits on storage more than on CPU: a small request lets it start beside the
        # cluster on a small node; without a CPU limit it uses whatever CPU is free.
        "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        # Copying a root filesystem keeps owners and modes, which needs these as root.
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    name = populate_job_name(spec)
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "backoffLimit": 3,
            "activeDeadlineSeconds": POPULATE_DEADLINE_SECONDS,
            "template": {
                "metadata": {"labels": metadata(spec, name, COMPONENT)["labels"]},
                "spec": {
                    **pod_identity(spec, COMPONENT),
                    **pod_security(),
                    **image_pull(spec),
                    "restartPolicy": "OnFailure",
                    "containers": [populate],
                    "volumes": [jail_volume(spec)],
                },
            },
        },
    }


def jail_volume(spec: ClusterSpec, *, read_only: bool = False) -> Manifest:
    """The jail claim as a pod volume. Read-only at the volume level for pods that only read
    it and have an fsGroup: the kubelet then leaves its ownership alone, where it would
    otherwise hand the whole jail to that group, and sshd refuses a group-writable chroot."""
    claim: Manifest = {"claimName": jail_claim_name(spec)}
    if read_only:
        claim["readOnly"] = True
    return {"name": "jail", "persistentVolumeClaim": claim}


def wait_for_jail(spec: ClusterSpec, image: str) -> Manifest:
    """An init container that waits until populate-jail has written its marker."""
    return container(
        spec,
        "wait-for-jail",
        image,
        "wait-for-jail",
        env=[{"name": "JAIL_MARKER", "value": f"{paths.JAIL_DIR}/{paths.JAIL_MARKER}"}],
        volumeMounts=[{"name": "jail", "mountPath": paths.JAIL_DIR, "readOnly": True}],
        resources={"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        securityContext={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    )


def submount_volume_name(submount: Submount) -> str:
    """Pod volume (or claim template) name of a submount."""
    return f"sm-{submount.name}"


def submount_volume(submount: Submount) -> Manifest | None:
    """The pod volume of a submount; None for per-node claims (claim templates)."""
    name = submount_volume_name(submount)
    if isinstance(submount, EmptyDirSubmount):
        empty_dir = {"sizeLimit": submount.size_limit} if submount.size_limit else {}
        return {"name": name, "emptyDir": empty_dir}
    if isinstance(submount, MemorySubmount):
        return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": submount.size_limit}}
    if isinstance(submount, HostPathSubmount):
        return {"name": name, "hostPath": {"path": submount.host_path, "type": "DirectoryOrCreate"}}
    if submount.existing_claim:
        return {
            "name": name,
            "persistentVolumeClaim": {
                "claimName": submount.existing_claim,
                "readOnly": submount.read_only,
            },
        }
    return None


def submount_claim_template(spec: ClusterSpec, submount: PvcSubmount) -> Manifest:
    """A per-node claim for a pool's PVC submount."""
    claim: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": submount.size}},
    }
    if submount.storage_class:
        claim["storageClassName"] = submount.storage_class
    return {
        "metadata": {
            "name": submount_volume_name(submount),
            "labels": metadata(spec, "", COMPONENT)["labels"],
        },
        "spec": claim,
    }


def submount_mount(submount: Submount) -> Manifest:
    """Where a pod stages a submount; the jail plugin or login entrypoint binds it into the jail."""
    mount: Manifest = {
        "name": submount_volume_name(submount),
        "mountPath": submount_staging_path(submount.mount_path),
    }
    if getattr(submount, "read_only", False):
        mount["readOnly"] = True
    return mount
