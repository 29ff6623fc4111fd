"""Pieces every pod builder uses: labels, metadata, placement, resources, munge sidecar."""

from typing import Any

from slurm_stack import naming, paths
from slurm_stack.spec.models import ClusterSpec, Placement, Resources, Volume

Manifest = dict[str, Any]

SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
# Created once it exists, with no readiness wait; unlike skipAwait, its deletion is awaited.
# pulumi-kubernetes: a `jsonpath=` waitFor replaces the built-in await (provider/pkg/await/
# await.go uses it only without a custom condition; metadata/overrides.go ReadyCondition),
# while skipAwait on a StatefulSet also skips awaiting the delete (overrides.go
# allowsSkipAwaitWithDelete), so a replacement would re-create onto the terminating object.
AWAIT_EXISTENCE_ONLY = {"pulumi.com/waitFor": "jsonpath={.metadata.name}"}
# Every StatefulSet: Parallel pod management and RollingUpdate without maxUnavailable, so
# that a template whose pod never becomes Ready is replaced by the next `pulumi up` without a
# hand. With OrderedReady the controller stops at the first pod that is not Ready and never
# replaces it (Kubernetes' "forced rollback", kubernetes/kubernetes#67250); Parallel goes on
# to delete a pod of an outdated revision even when it is not Ready. `maxUnavailable` is left
# out: with the MaxUnavailableStatefulSet feature on (default in 1.35.0-1.35.3) the
# controller no longer replaces such a pod (kubernetes/kubernetes#137409), which is why
# 1.35.4 and 1.36 turned the feature off by default (kubernetes/kubernetes#137904, #137926);
# without it a rolling update replaces one pod at a time.
PARALLEL = "Parallel"
ROLLING_UPDATE: dict[str, str] = {"type": "RollingUpdate"}
CONFIG_FILES_LABEL = "slurm-stack.io/config-files"
POOL_LABEL = "slurm-stack.io/pool"


def selector_labels(spec: ClusterSpec, component: str, **extra: str) -> dict[str, str]:
    """The labels that select a component's pods (never change them: selectors are immutable)."""
    return {
        "app.kubernetes.io/name": "slurm",
        "app.kubernetes.io/instance": spec.name,
        "app.kubernetes.io/component": component,
        **extra,
    }


def labels(spec: ClusterSpec, component: str, **extra: str) -> dict[str, str]:
    """User labels plus ours; ours win so selectors always match."""
    return dict(
        sorted(
            {
                **spec.labels,
                **selector_labels(spec, component, **extra),
                "app.kubernetes.io/part-of": "slurm-stack",
                "app.kubernetes.io/managed-by": "pulumi",
                "app.kubernetes.io/version": spec.slurm_version,
            }.items()
        )
    )


def metadata(
    spec: ClusterSpec,
    name: str,
    component: str,
    *,
    annotations: dict[str, str] | None = None,
    extra_labels: dict[str, str] | None = None,
) -> Manifest:
    """ObjectMeta in the cluster's namespace."""
    merged = {**spec.annotations, **(annotations or {})}
    meta: Manifest = {
        "name": name,
        "namespace": spec.namespace,
        "labels": labels(spec, component, **(extra_labels or {})),
    }
    if merged:
        meta["annotations"] = dict(sorted(merged.items()))
    return meta


def resources(value: Resources) -> Manifest:
    """ResourceRequirements from the spec's requests and limits."""
    out: Manifest = {}
    if value.requests:
        out["requests"] = dict(sorted(value.requests.items()))
    if value.limits:
        out["limits"] = dict(sorted(value.limits.items()))
    return out


def placement(value: Placement) -> Manifest:
    """nodeSelector and tolerations for a PodSpec."""
    out: Manifest = {}
    if value.node_selector:
        out["nodeSelector"] = dict(sorted(value.node_selector.items()))
    if value.tolerations:
        out["tolerations"] = [
            t.model_dump(by_alias=True, exclude_none=True) for t in value.tolerations
        ]
    return out


def image_pull(spec: ClusterSpec) -> Manifest:
    """imagePullSecrets for a PodSpec."""
    if not spec.images.pull_secrets:
        return {}
    return {"imagePullSecrets": [{"name": name} for name in spec.images.pull_secrets]}


def container(spec: ClusterSpec, name: str, image: str, role: str, **fields: Any) -> Manifest:
    """A container that runs the project entrypoint in ``role``."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": spec.images.pull_policy,
        "command": [paths.ENTRYPOINT, role],
        **fields,
    }


def non_root(uid: int) -> Manifest:
    """A container security context for a daemon that runs as ``uid`` with no capabilities."""
    return {
        "runAsUser": uid,
        "runAsGroup": uid,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security(**fields: Any) -> Manifest:
    """A PodSpec's securityContext: the runtime's default seccomp profile for every container
    (each may still name its own), plus ``fields`` (fsGroup and the like)."""
    return {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, **fields}}


def root_with(capabilities: list[str]) -> Manifest:
    """A root container limited to ``capabilities``; mount work needs AppArmor unconfined."""
    context: Manifest = {
        "runAsUser": 0,
        # no_new_privs for every process of the container: no setuid program or file
        # capability raises anyone's privileges (the jail's mounts are plain syscalls).
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": sorted(capabilities)},
        # The jail's mount work (mount, umount2, unshare, mount_setattr, chroot) is in the
        # runtime's default profile for a container holding SYS_ADMIN and SYS_CHROOT
        # (containerd: contrib/seccomp/seccomp_default.go); pivot_root is not, and is unused.
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if "SYS_ADMIN" in capabilities:
        # The default AppArmor profile denies mount(2) even with CAP_SYS_ADMIN.
        context["appArmorProfile"] = {"type": "Unconfined"}
    return context


def munge_key_secret_name(spec: ClusterSpec) -> str:
    """The Secret holding the munge key (auth/munge) or slurm.key (auth/slurm)."""
    return f"{spec.name}-{'munge' if spec.auth == 'munge' else 'slurm'}-key"


def auth_volumes(spec: ClusterSpec, *, sack: bool = False) -> list[Manifest]:
    """The munge socket directory or, with auth/slurm, an in-memory directory for the key's
    SlurmUser copy (and with ``sack`` one for the daemon's sack socket); and the auth key
    Secret (root-owned, readable by root only)."""
    if spec.auth == "munge":
        shared = [{"name": "munge-socket", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]
    else:
        shared = [{"name": "slurm-key", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]
        if sack:
            shared.append({"name": "sack", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    return [
        *shared,
        {
            "name": "auth-key",
            "secret": {"secretName": munge_key_secret_name(spec), "defaultMode": 0o400},
        },
    ]


def auth_sidecars(spec: ClusterSpec, *, key_copy: bool = True) -> list[Manifest]:
    """munged as a native sidecar (auth/munge); with auth/slurm an init container that gives
    the pod's SlurmUser daemons their own copy of slurm.key (none when ``key_copy`` is false:
    the pod's Slurm processes run as root and read the Secret itself)."""
    if spec.auth == "slurm":
        if not key_copy:
            return []
        return [
            container(
                spec,
                "slurm-key",
                spec.image("munge"),  # the smallest project image; it only copies a file
                "install-slurm-key",
                volumeMounts=[
                    {"name": "auth-key", "mountPath": paths.SLURM_KEY_DIR, "readOnly": True},
                    {"name": "slurm-key", "mountPath": paths.SLURM_KEY_COPY_DIR},
                ],
                resources={
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"memory": "64Mi"},
                },
                # Root reads the root-only Secret file; CHOWN hands the copy to SlurmUser
                # (slurm insists on a key no other user can read).
                securityContext={
                    "runAsUser": 0,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            )
        ]
    return [
        container(
            spec,
            "munge",
            spec.image("munge"),
            "munged",
            restartPolicy="Always",
            volumeMounts=[
                {"name": "munge-socket", "mountPath": paths.MUNGE_SOCKET_DIR},
                {"name": "auth-key", "mountPath": paths.MUNGE_KEY_DIR, "readOnly": True},
            ],
            resources={"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
            # Starts as root only to take the key from the Secret (root-owned files; an
            # fsGroup would also chown the jail) and hand it and the socket directory to the
            # munge user; munged itself runs as munge.
            securityContext={
                "runAsUser": 0,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETGID", "SETUID"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            startupProbe={
                "exec": {"command": [paths.ENTRYPOINT, "probe-munge"]},
                "periodSeconds": 1,
                "failureThreshold": 30,
            },
        )
    ]


def auth_mounts(
    spec: ClusterSpec, *, root: bool = False, sack_dir: str | None = None
) -> list[Manifest]:
    """What a Slurm daemon or client container mounts to authenticate: the munge socket, or
    with auth/slurm the key (the Secret itself for a ``root`` container, else SlurmUser's
    copy). The entrypoint points Slurm at whichever key the container has. A non-root daemon
    with auth/slurm creates its sack socket under /run/<daemon>, ``sack_dir``, which it
    could not create itself (pass ``sack=True`` to auth_volumes too)."""
    if spec.auth == "munge":
        return [{"name": "munge-socket", "mountPath": paths.MUNGE_SOCKET_DIR}]
    if root:
        return [{"name": "auth-key", "mountPath": paths.SLURM_KEY_DIR, "readOnly": True}]
    sack = [{"name": "sack", "mountPath": sack_dir}] if sack_dir else []
    return [{"name": "slurm-key", "mountPath": paths.SLURM_KEY_COPY_DIR, "readOnly": True}, *sack]


def sackd_sidecar(spec: ClusterSpec, image: str, run_volume: str) -> Manifest:
    """sackd as a native sidecar: it fetches the config (configless) into ``run_volume`` at
    /run/slurm and, with auth/slurm, gives the pod's clients tokens on its socket there."""
    probe: Manifest = {}
    if spec.auth == "slurm":  # the clients start once the socket is there
        probe["startupProbe"] = {
            "exec": {"command": ["test", "-S", f"{paths.SLURM_RUN_DIR}/sack.socket"]},
            "periodSeconds": 1,
            "failureThreshold": 60,
        }
    return container(
        spec,
        "sackd",
        image,
        "sackd",
        restartPolicy="Always",
        env=env(SLURM_CONF_SERVER=conf_server(spec)),
        volumeMounts=[{"name": run_volume, "mountPath": paths.SLURM_RUN_DIR}, *auth_mounts(spec)],
        resources={"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        securityContext=non_root(paths.SLURM_UID),
        **probe,
    )


def client_auth_sidecars(spec: ClusterSpec) -> list[Manifest]:
    """What a Job pod runs so its Slurm client commands can authenticate: munged, or with
    auth/slurm sackd (clients never read slurm.key; they ask a sack socket for a token)."""
    if spec.auth == "munge":
        return auth_sidecars(spec)
    return [*auth_sidecars(spec), sackd_sidecar(spec, spec.image("ops"), "sack-run")]


def client_auth_mounts(spec: ClusterSpec) -> list[Manifest]:
    """The munge socket, or sackd's socket directory, for a Job's client container."""
    if spec.auth == "munge":
        return auth_mounts(spec)
    return [{"name": "sack-run", "mountPath": paths.SLURM_RUN_DIR, "readOnly": True}]


def client_auth_volumes(spec: ClusterSpec) -> list[Manifest]:
    """The volumes behind client_auth_sidecars and client_auth_mounts."""
    if spec.auth == "munge":
        return auth_volumes(spec)
    return [
        *auth_volumes(spec),
        {"name": "sack-run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
    ]


def env(**values: str) -> list[Manifest]:
    """Container env entries in a stable order."""
    return [{"name": name, "value": value} for name, value in sorted(values.items())]


def tcp_probe(port: int, *, period: int = 10, failures: int = 3) -> Manifest:
    """A TCP probe."""
    return {"tcpSocket": {"port": port}, "periodSeconds": period, "failureThreshold": failures}


def pvc(
    spec: ClusterSpec,
    name: str,
    component: str,
    *,
    size: str,
    storage_class: str | None,
    access_mode: str = "ReadWriteOnce",
) -> Manifest:
    """A PersistentVolumeClaim (slurm-stack protects these: they hold user data)."""
    claim_spec: Manifest = {
        "accessModes": [access_mode],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return {"metadata": metadata(spec, name, component), "spec": claim_spec}


def config_map(spec: ClusterSpec, name: str, component: str, files: dict[str, str]) -> Manifest:
    """An immutable ConfigMap of config files (its name carries their hash)."""
    return {
        "metadata": metadata(spec, name, component, extra_labels={CONFIG_FILES_LABEL: "true"}),
        "immutable": True,
        "data": dict(sorted(files.items())),
    }


def volume_claim(spec: ClusterSpec, name: str, component: str, volume: Volume) -> Manifest:
    """A ReadWriteOnce claim of the spec's size and storage class."""
    return pvc(spec, name, component, size=volume.size, storage_class=volume.storage_class)


def cluster_ip_service(
    spec: ClusterSpec, name: str, component: str, port_name: str, port: int
) -> Manifest:
    """A ClusterIP Service in front of one component's pods, on one named port."""
    return {
        "metadata": metadata(spec, name, component),
        "spec": {
            "selector": selector_labels(spec, component),
            "ports": [{"name": port_name, "port": port, "targetPort": port_name}],
        },
    }


def conf_server(spec: ClusterSpec) -> str:
    """`host:port[,host:port]` from which slurmd and sackd fetch the config (configless):
    with a backup controller, each controller's own address, tried in order."""
    hosts = naming.controller_pod_hosts(spec.name, spec.namespace, spec.controller.replicas)
    return ",".join(f"{address}:{paths.SLURMCTLD_PORT}" for _, address in hosts)


def run_volume() -> Manifest:
    """The pod's private /run/slurm (pid files, fetched configs), in memory."""
    return {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}
