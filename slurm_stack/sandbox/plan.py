"""What podman runs for a rendered stack: pods, containers, files and host names.

Everything Kubernetes does that podman does not is translated here or in the sibling module a
row names; the last column says what stays different ("—": nothing).

================ ================== ================================================================
Kubernetes       Sandbox            Still differs
================ ================== ================================================================
Deployment pods  `<name>-<ordinal>` named as a StatefulSet's (Kubernetes: a random suffix)
Service IP       `<svc>.<ns>.svc`   a host entry: the IP of the first pod it selects (no balancing)
pod IPs          fixed:             kept per pod name for the sandbox's life (Kubernetes: new per
                 allocate_ips       pod), and so their MACs (podman.py)
emptyDir         Memory: a tmpfs    —
PVC              ext4 image,        sized at its request, at most the host's free space; a size
                 loop-mounted:      grown in the stack is not applied (a real one expands where its
                 claims.py          class allows); RWX: one filesystem for one host's pods (real:
                                    NFS, CephFS..., own locking, caching)
ConfigMap/Secret volumes in the     an update lands at once on `up` (kubelet: within its sync
                 kubelet's layout:  period, about a minute); a missing one not `optional` fails the
                 projected.py       plan (kubelet: the pod waits in ContainerCreating)
secretKeyRef env rendered Secret    —
random provider  a salt per        a value derives from its resource's salt and keepers: keepers
                 resource, kept     set back to an earlier generation bring its key back (Pulumi:
                 while declared:    a new one)
                 RandomSalts
kubectl Secrets  none               a `passwordSecret` (external database) fails the plan, naming it
stack outputs    outputs.json       —
ServiceAccount   token, stand-in    KUBERNETES_SERVICE_HOST/PORT only in pods that mount a token; a
                 API: kube_api.py   stand-in node per pod; the token never expires or rotates; other
                                    projected sources refused
RBAC             kube_rbac.py       no aggregated ClusterRoles, non-resource URLs or `system:*`
                                    roles: discovery and `/version` refused
API server       kube_api_server.py only node and pod lists, pod delete, StatefulSet `scale` get and
                                    merge or strategic merge patch; no JSON patch, server-side
                                    apply, resourceVersion or watch (clients poll)
StatefulSet      controller         polls twice a second (Kubernetes: watches); one pass at a time
                 stand-in while one (a change made while pods start waits until they are ready);
                 is elastic:        stops surplus pods one by one whatever the podManagementPolicy;
                 statefulsets.py    ignores a delete's gracePeriodSeconds and preconditions, lists
                                    the pod throughout (never Terminating); a pod gone but not
                                    deleted through the API returns at the next apply; Prometheus
                                    scrapes the last `up`'s pods
fixed replicas   the manifest's     a patched size starts no pod; the next `up` resets it (Pulumi:
                 (not elastic)      kept until the manifest's replicas change)
rolling update   one pod at a time, `sandbox up` waits for every roll (`pulumi up`: until a worker
                 highest first,     StatefulSet is updated); one pod at a time whatever
                 once ready:        `maxUnavailable` (its gate is off in 1.36); a rebuilt image
                 apply.py           under the same tag rolls pods, not on Kubernetes: their stops
                                    take the `drain` settings (no update Job marked the nodes)
pod termination  preStop, SIGTERM,  removed pods stop one by one (Parallel: together); `down` in
                 SIGKILL after      reverse start order (namespace deletion: all at once); a
                 grace              `kill-pod` or `delete-pod` pod comes back when that command
                                    re-applies, not by a watch, or with `come_back=False` at
                                    `Sandbox.restore` (a lost node)
creation order   STARTS_AFTER       pools also wait for the config Job (Pulumi runs it as they roll)
Job              once per name:     a finished pod's infra container runs on (the kubelet stops it)
                 apply.py
CronJob schedule run-cronjob        no clock: its pod runs only when asked
init, sidecars   as in a pod        —
probe kinds      exec, tcpSocket    httpGet and grpc probes are refused by the plan
liveness probes  a prober process:  restart at once (no CrashLoopBackOff); a startup probe alone is
                 liveness.py        not watched after `up`; a probe's terminationGracePeriodSeconds
                                    not read; targets read once a second, probes timed from first
                                    sight (not the pod's start); a paused container thawed after
                                    SIGKILL (the host's cgroup v1 freezer holds it)
exec probes      nsenter:           outside the container's seccomp filter, and its cgroups but for
                 exec_probes.py,    the liveness prober's probes and preStop hooks; a root probe has
                 also               the host root's capabilities (exec_quick, the tests' kubectl
                 Sandbox.exec_quick exec, runs as the main user)
capabilities     podman --cap-add   only the host's bounding set's: no CAP_SYS_RESOURCE here (podman
                                    drops it silently; slurmd runs without it)
seccomp          RuntimeDefault:    socket(2) families (containerd 1.7+ refuse AF_VSOCK, AF_ALG);
                 containerd's       io_uring (refused from 2.0); ptrace, process_vm_readv as 1.7
                 rules, seccomp.py  (1.6 gates the latter behind CAP_SYS_PTRACE)
cgroup v2        the host's v1      Slurm picks cgroup/v1; 1.36 nodes' v2 path (slurmstepd's cgroups
                 (hybrid);          in the pod's, `_set_int_cg_ns`) is not booted; slurmd logs
                 privileged: host   "Cannot find slurmd cpu cgroup" (and memory) once at start,
                 cgroupns           harmlessly
AppArmor         not exercised      no AppArmor in this kernel: `Unconfined` and the runtime default
                                    (denies mount(2)) alike
fsGroup, subPath as the kubelet     —
PDB              rendered           not enforced: no eviction API asks it (`kubectl drain` would)
NetworkPolicy    rendered           not enforced: every pod reaches every other
hosts outside    containers:        reached by address alone (no host entry), on the pods' own
                 outside.py         network (a real one is routed to, often through NAT)
LoadBalancer     a pod's address:   one that selects a pod by name is that pod, open to its whole
                 stack.py           network (a real one: an address of its own,
                                    `loadBalancerSourceRanges`); others: the mock engine's
                                    unreachable address
ServiceMonitor   a real Prometheus: targets are the pods' fixed addresses (the operator follows
                 prometheus.py      endpoints); PrometheusRules evaluated every 10 s (the operator's
                                    default: 30 s)
image pulls      LOCAL_IMAGES       local builds stand in for images no registry serves here
GPUs             fake devices,      no GPU or driver: `/dev/nvidia*` (major 195, minors 0..n-1 or
                 `nvidia-smi`,      `SandboxState.gpu_devices_file`'s) fail to open (the fake tools
                 driver library     look for them, Slurm and the jail plugin stat and bind them);
                                    the host's /dev/kmsg read-only (an unprivileged pod on
                                    Kubernetes cannot open it)
================ ================== ================================================================
"""

import base64
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from slurm_stack.sandbox.kube_api import PORT as KUBE_API_PORT
from slurm_stack.sandbox.kube_api import (
    ROOT_CA_CONFIG_MAP,
    SERVICE_ACCOUNT_DIR,
    gets_token,
    kube_api_address,
    projects_token,
    service_account_dir,
    service_account_of,
)
from slurm_stack.spec.quantity import parse_quantity

Manifest = dict[str, Any]
Role = Literal["sidecar", "init", "main"]

# What each component's pods wait for before they start: the resources the program makes
# each depend on (components/cluster.py), whose readiness Pulumi awaits before it creates the
# dependent; a component missing from the stack is not waited for.
STARTS_AFTER: dict[str, tuple[str, ...]] = {
    "database": (),
    "accounting": ("database",),
    "controller": ("accounting",),
    "jail": (),  # only its claim and ServiceAccount: it copies while the services start
    "pool-update": ("controller",),  # marks the pools' nodes before their pods take a template
    "reconfigure": ("controller",),
    "rest": ("controller", "accounting", "jail"),  # a client of both; users from the jail
    "exporter": ("controller", "jail"),  # it mounts the health checks' results in the jail
    "node-state": ("controller",),
    "login": ("controller", "jail"),
    "users": ("controller", "jail", "accounting", "reconfigure"),
    # Pulumi starts the reconfigure Job once the controller is updated, so on Kubernetes it
    # runs while the pools still roll (a version change: beside older slurmds); here the pools
    # wait for it, so that it meets every older slurmd, the case that must work.
    "worker": ("controller", "jail", "pool-update", "reconfigure"),
}


def _depth(component: str) -> int:
    return 1 + max((_depth(c) for c in STARTS_AFTER[component]), default=-1)


# Start order by component label (a component starts after those of lower phase it needs);
# `sandbox down` stops pods in the reverse order.
PHASES = {component: _depth(component) for component in STARTS_AFTER}
LAST_PHASE = max(PHASES.values()) + 1  # a component the sandbox does not know starts last

# Upstream images no registry serves here, and the local build that stands in for each.
LOCAL_IMAGES = {re.compile(r"^(docker\.io/(library/)?)?mariadb[:@]"): "mariadb"}
GPU_RESOURCE = "nvidia.com/gpu"
# Where the fake GPU tools and their answers are mounted in GPU pods.
FAKE_GPU_BIN = "/usr/bin"  # where the NVIDIA container toolkit puts nvidia-smi
FAKE_GPU_DIR = "/etc/fake-gpu"
# Where the NVIDIA container runtime would put the node's driver library in a GPU pod.
FAKE_DRIVER_LIBRARY_NAME = "libcuda.so.1"
FAKE_DRIVER_LIBRARY = f"/usr/lib/x86_64-linux-gnu/{FAKE_DRIVER_LIBRARY_NAME}"


@dataclass(frozen=True)
class Probe:
    """A probe: a TCP port, or a command run in the container, with the kubelet's timing
    (`periodSeconds`, `failureThreshold`, `timeoutSeconds`, `initialDelaySeconds`)."""

    port: int | None = None
    command: tuple[str, ...] = ()
    period: float = 10
    failures: int = 3
    timeout: float = 1
    initial_delay: float = 0


@dataclass(frozen=True)
class Mount:
    """A host directory or file mounted into a container."""

    source: str
    target: str
    read_only: bool = False
    sub_path: str = ""
    """A directory below ``source`` to mount instead of ``source`` (the manifest's
    ``subPath``); created at the container's start when missing, as the kubelet does."""

    @property
    def host_path(self) -> str:
        """What is bound into the container."""
        return f"{self.source}/{self.sub_path}" if self.sub_path else self.source


@dataclass(frozen=True)
class Container:
    """One container of a pod, with what its manifest asks for."""

    name: str
    image: str
    role: Role
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    user: int | None = None
    group: int | None = None
    cap_add: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    no_new_privileges: bool = False
    privileged: bool = False
    apparmor_unconfined: bool = False
    # The container's seccompProfile type; none means Unconfined, the kubelet's default
    # unless the node runs with --seccomp-default.
    seccomp: str = "Unconfined"
    mounts: tuple[Mount, ...] = ()
    devices: tuple[tuple[str, str], ...] = ()  # (host device, path in the container)
    probe: Probe | None = None  # what `up` waits on: readiness, bounded by startup's timing
    pre_stop: tuple[str, ...] = ()
    # The kubelet's liveness and startup probes as the manifest has them: the liveness prober
    # (liveness_server.py) restarts the container when they fail.
    liveness: Probe | None = None
    startup: Probe | None = None


@dataclass(frozen=True)
class File:
    """A file the sandbox writes before starting pods (ConfigMap and Secret contents)."""

    path: str
    content: bytes
    mode: int


@dataclass(frozen=True)
class Pod:
    """A pod to run: long-running unless it belongs to a Job."""

    name: str
    ip: str
    component: str
    phase: int
    job: bool
    containers: tuple[Container, ...]
    fs_group: int | None = None
    volume_dirs: tuple[str, ...] = ()
    fs_group_dirs: tuple[str, ...] = ()  # the kubelet skips read-only volumes
    grace_seconds: int = 30
    schedule: str | None = None  # a CronJob's pod: run on demand, not by `up`
    # In-memory emptyDirs (medium Memory): directory and tmpfs size in bytes, 0 for no limit.
    memory_dirs: tuple[tuple[str, int], ...] = ()
    # ConfigMap and Secret volume directories, each with whether the kubelet keeps it up to
    # date in a running pod (true unless the object is immutable).
    projected_dirs: tuple[tuple[str, bool], ...] = ()
    # The StatefulSet the pod belongs to ("" for a Deployment's or a Job's) and its
    # podManagementPolicy: how the sandbox rolls a template change (see Applier).
    statefulset: str = ""
    ordered_ready: bool = False
    # The pod template's annotations: like any change to the template, a changed one rolls
    # the pod (the fingerprint covers every field).
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Plan:
    """Everything `sandbox up` creates, in start order."""

    subnet: str
    pods: tuple[Pod, ...]
    hosts: dict[str, str]
    files: tuple[File, ...] = field(default=())
    directories: tuple[str, ...] = field(default=())
    empty_dirs: tuple[str, ...] = field(default=())
    # Each claim directory whose claim the stack renders, with the storage it requests.
    claims: tuple[tuple[str, int], ...] = field(default=())


def _statefulset_of(workload: Manifest, statefulsets: Mapping[str, Manifest]) -> dict[str, Any]:
    """The Pod fields that say how a StatefulSet rolls its pods (OrderedReady by default)."""
    name = workload["metadata"]["name"]
    if statefulsets.get(name) is not workload:
        return {}
    policy = workload["spec"].get("podManagementPolicy", "OrderedReady")
    return {"statefulset": name, "ordered_ready": policy == "OrderedReady"}


def workload_pod_names(workload: Manifest, size: int | None = None) -> list[str]:
    """The sandbox's pods of a StatefulSet or Deployment: `<name>-<ordinal>` for each of its
    replicas, or of ``size`` (a StatefulSet's live size, where a scaler owns it). Kubernetes
    names a Deployment's pods with a random suffix instead."""
    replicas = int(workload["spec"].get("replicas", 1)) if size is None else size
    return [f"{workload['metadata']['name']}-{ordinal}" for ordinal in range(replicas)]


def plan(
    manifests: list[Manifest],
    state_dir: str,
    subnet: str = "10.89.7.0/24",
    *,
    ips: Mapping[str, str] | None = None,
    image_tag: str = "",
    gpu_devices: Mapping[str, Sequence[int]] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Plan:
    """The sandbox plan for ``manifests`` (rendered with secrets shown).

    ``ips`` keeps the addresses of pods that already exist (and of pods that may come back:
    no new pod takes one of them); new pods get the lowest free ones.
    ``sizes`` gives StatefulSets (by name) another size than their manifest's replicas: the
    live size of one whose size a scaler owns (statefulsets.py).
    ``image_tag`` tags the local builds that replace upstream images (`LOCAL_IMAGES`).
    ``gpu_devices`` gives GPU pods the minors of their fake GPUs (default: 0 to request - 1).
    """
    by_kind: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        by_kind.setdefault(manifest["kind"], []).append(manifest)
    config_maps = {m["metadata"]["name"]: m for m in by_kind.get("ConfigMap", [])}
    secrets = {m["metadata"]["name"]: _secret_data(m) for m in by_kind.get("Secret", [])}
    immutable = {
        (kind, m["metadata"]["name"])
        for kind in ("ConfigMap", "Secret")
        for m in by_kind.get(kind, [])
        if m.get("immutable")
    }

    sizes = sizes or {}
    templates = [
        (pod, m, False)
        for kind in ("StatefulSet", "Deployment")
        for m in by_kind.get(kind, [])
        for pod in workload_pod_names(
            m, sizes.get(m["metadata"]["name"]) if kind == "StatefulSet" else None
        )
    ] + [(m["metadata"]["name"], m, True) for m in by_kind.get("Job", [])]
    statefulsets = {m["metadata"]["name"]: m for m in by_kind.get("StatefulSet", [])}
    # A CronJob's pod runs only when asked (`sandbox run-cronjob`): the sandbox has no clock.
    templates += [
        (m["metadata"]["name"], {**m, "spec": m["spec"]["jobTemplate"]["spec"]}, True)
        for m in by_kind.get("CronJob", [])
    ]
    schedules = {m["metadata"]["name"]: m["spec"]["schedule"] for m in by_kind.get("CronJob", [])}
    templates.sort(key=lambda item: item[0])
    ips = allocate_ips([name for name, _, _ in templates], subnet, ips or {})

    files: list[File] = []
    directories: set[str] = set()
    empty_dirs: set[str] = set()
    requested = {
        m["metadata"]["name"]: _requested_storage(m)
        for m in by_kind.get("PersistentVolumeClaim", [])
    }
    claim_sizes: dict[str, int] = {}
    pods = []
    for name, workload, job in templates:
        template = workload["spec"]["template"]
        component = template["metadata"]["labels"]["app.kubernetes.io/component"]
        read_only_volumes: set[str] = set()
        memory_dirs: dict[str, int] = {}
        projected_dirs: dict[str, bool] = {}
        volumes = _volumes(
            name,
            workload,
            template["spec"],
            state_dir,
            config_maps,
            secrets,
            files,
            directories,
            empty_dirs,
            memory_dirs,
            read_only_volumes,
            projected_dirs,
            immutable,
            claim_sizes,
            requested,
        )
        pod_spec = template["spec"]
        containers = _containers(
            name, pod_spec, volumes, secrets, image_tag, state_dir, gpu_devices or {}
        )
        if gets_token(pod_spec):
            containers = _with_api_access(
                containers,
                state_dir,
                subnet,
                service_account_of(workload),
                automount=bool(pod_spec.get("automountServiceAccountToken")),
            )
        pods.append(
            Pod(
                name,
                ips[name],
                component,
                PHASES.get(component, LAST_PHASE),
                job,
                containers,
                fs_group=pod_spec.get("securityContext", {}).get("fsGroup"),
                volume_dirs=tuple(sorted(set(volumes.values()))),
                fs_group_dirs=tuple(sorted(set(volumes.values()) - read_only_volumes)),
                grace_seconds=pod_spec.get("terminationGracePeriodSeconds", 30),
                schedule=schedules.get(name),
                memory_dirs=tuple(sorted(memory_dirs.items())),
                projected_dirs=tuple(sorted(projected_dirs.items())),
                annotations=tuple(
                    sorted(template.get("metadata", {}).get("annotations", {}).items())
                ),
                **_statefulset_of(workload, statefulsets),
            )
        )
    pods.sort(key=lambda pod: (pod.phase, pod.name))
    hosts = _hosts(by_kind.get("Service", []), pods, templates, ips)
    return Plan(
        subnet,
        tuple(pods),
        hosts,
        tuple(files),
        tuple(sorted(directories)),
        tuple(sorted(empty_dirs)),
        tuple(sorted(claim_sizes.items())),
    )


def _with_api_access(
    containers: tuple[Container, ...],
    state_dir: str,
    subnet: str,
    account: tuple[str, str],
    *,
    automount: bool,
) -> tuple[Container, ...]:
    """What the kubelet gives a pod that mounts its ServiceAccount token: the API server's
    address in every container's environment and, when the token is automounted, the
    token, CA and namespace at the standard path in every container (a projected volume is
    mounted where the pod spec says); here, the sandbox's stand-in API (kube_api.py)."""
    volume = Mount(service_account_dir(state_dir, *account), SERVICE_ACCOUNT_DIR, True)
    address = (
        ("KUBERNETES_SERVICE_HOST", kube_api_address(subnet)),
        ("KUBERNETES_SERVICE_PORT", str(KUBE_API_PORT)),
    )
    return tuple(
        replace(c, env=(*c.env, *address), mounts=(*c.mounts, volume) if automount else c.mounts)
        for c in containers
    )


# The files of a projected ServiceAccount volume of the kubelet's shape, by source: what the
# sandbox's ServiceAccount directory holds (kube_api.SandboxKubeApi.prepare).
_TOKEN_FILES = {"serviceAccountToken": "token", "configMap": "ca.crt", "downwardAPI": "namespace"}


def _service_account_volume(
    pod: str, name: str, projected: Manifest, workload: Manifest, state_dir: str
) -> str:
    """The host directory of a projected volume of a ServiceAccount token, the cluster's CA
    (ConfigMap kube-root-ca.crt) and the namespace: the sandbox's directory of the pod's
    ServiceAccount. A projected volume of other sources is refused."""
    for source in projected.get("sources") or []:
        [kind] = source.keys()
        entry = source[kind]
        if kind == "serviceAccountToken":
            paths = [entry.get("path")]
        elif kind == "configMap" and entry.get("name") == ROOT_CA_CONFIG_MAP:
            items = entry.get("items") or [{"key": "ca.crt", "path": "ca.crt"}]
            paths = [item["path"] for item in items if item.get("key") == "ca.crt"]
            paths += ["" for item in items if item.get("key") != "ca.crt"]
        elif kind == "downwardAPI":
            items = entry.get("items") or []
            paths = [
                item["path"] if item.get("fieldRef", {}).get("fieldPath") == "metadata.namespace"
                else ""
                for item in items
            ]  # fmt: skip
        else:
            paths = [""]
        if any(path != _TOKEN_FILES.get(kind) for path in paths):
            raise ValueError(
                f"{pod}: projected volume {name}: the sandbox projects a ServiceAccount token "
                "volume of the kubelet's shape alone (serviceAccountToken at token, "
                f"{ROOT_CA_CONFIG_MAP}'s ca.crt at ca.crt, metadata.namespace at namespace)"
            )
    return service_account_dir(state_dir, *service_account_of(workload))


# How a sandbox's subnet is shared (a /24: hosts .1 to .254): .1-.9 the gateway and the
# sandbox's tools (the directory tests' LDAP server .5, Prometheus .6, the stand-in API .8),
# then the pods, and the last OUTSIDE_ADDRESSES (.240-.254) for machines outside the cluster
# (outside.py), which no pod is ever given.
FIRST_POD_HOST = 9  # the index of .10 among the subnet's hosts
OUTSIDE_ADDRESSES = 15


def pod_addresses(subnet: str) -> list[str]:
    """The addresses the plan gives pods, lowest first."""
    return [str(ip) for ip in ipaddress.ip_network(subnet).hosts()][
        FIRST_POD_HOST:-OUTSIDE_ADDRESSES
    ]


def outside_addresses(subnet: str) -> list[str]:
    """The addresses kept for machines outside the cluster (outside.py), lowest first."""
    return [str(ip) for ip in ipaddress.ip_network(subnet).hosts()][-OUTSIDE_ADDRESSES:]


def allocate_ips(names: list[str], subnet: str, existing: Mapping[str, str]) -> dict[str, str]:
    """Keep the address of every pod that had one; give new pods the lowest free ones (none
    that ``existing`` holds for a pod not planned now, which may come back)."""
    kept = {name: existing[name] for name in names if name in existing}
    taken = set(existing.values())
    free = (ip for ip in pod_addresses(subnet) if ip not in taken)
    try:
        return {name: kept[name] if name in kept else next(free) for name in names}
    except StopIteration:
        raise ValueError(f"subnet {subnet} has too few addresses for {len(names)} pods") from None


def local_image(image: str, tag: str) -> str:
    """The image the sandbox runs for ``image``: itself, or the local build standing in."""
    for pattern, name in LOCAL_IMAGES.items():
        if pattern.match(image):
            return f"localhost/slurm-stack/{name}:{tag}"
    return image


def _port_number(container: Manifest, port: int | str) -> int:
    """A probe's port: a number, or the name of one of the container's ports (as the kubelet
    resolves it)."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"container {container['name']!r} has no port named {port!r}")


def _probe(container: Manifest) -> Probe | None:
    """What the sandbox waits on before it starts the next container or phase."""
    probe = container.get("readinessProbe") or container.get("startupProbe")
    if not probe:
        return None
    timing = {
        "period": probe.get("periodSeconds", 10),
        "failures": probe.get("failureThreshold", 3),
    }
    startup = container.get("startupProbe")
    if startup:  # the startup probe bounds how long a container may take to become ready
        timing = {
            "period": startup.get("periodSeconds", 10),
            "failures": startup.get("failureThreshold", 3),
        }
    return Probe(**_probe_handler(container, probe), **timing)


def _probe_handler(container: Manifest, probe: Manifest) -> dict[str, Any]:
    """A probe's TCP port or command; the sandbox runs no other kind (httpGet, grpc)."""
    if "tcpSocket" in probe:
        return {"port": _port_number(container, probe["tcpSocket"]["port"])}
    if "exec" in probe:
        return {"command": tuple(probe["exec"]["command"])}
    kinds = sorted(set(probe) & {"httpGet", "grpc"}) or sorted(probe)
    raise ValueError(
        f"container {container['name']!r}: the sandbox runs exec and tcpSocket probes, "
        f"not {', '.join(kinds)}"
    )


def _timed_probe(container: Manifest, key: str) -> Probe | None:
    """The container's probe ``key`` (livenessProbe, startupProbe) with its timing; the
    defaults are Kubernetes' (period 10 s, timeout 1 s, 3 failures, no initial delay)."""
    probe = container.get(key)
    if not probe:
        return None
    return Probe(
        **_probe_handler(container, probe),
        period=probe.get("periodSeconds", 10),
        failures=probe.get("failureThreshold", 3),
        timeout=probe.get("timeoutSeconds", 1),
        initial_delay=probe.get("initialDelaySeconds", 0),
    )


NVIDIA_MAJOR = 195  # the character-device major of /dev/nvidiaN and /dev/nvidiactl
NVIDIA_CONTROL_MINOR = 255  # /dev/nvidiactl, which every GPU pod gets beside its GPUs


def fake_gpu_device(state_dir: str, name: str) -> str:
    """The host's stand-in for /dev/``name`` of a GPU pod (the session creates it)."""
    return f"{state_dir}/fake-gpu/dev/{name}"


def fake_gpu_minor(name: str) -> int:
    """The minor of fake device /dev/``name``: nvidiaN's is N; nvidiactl's is 255."""
    return NVIDIA_CONTROL_MINOR if name == "nvidiactl" else int(name.removeprefix("nvidia"))


def _gpu_devices(
    gpus: int, minors: Sequence[int] | None, state_dir: str
) -> tuple[tuple[str, str], ...]:
    """No GPU here: a fake device node of NVIDIA's major at each GPU's own minor, as the device
    plugin would give them, and the control device. The node's kernel log, where the XID check
    looks, is the host's own (read-only)."""
    if not gpus:
        return ()
    given = range(gpus) if minors is None else minors
    names = ["nvidiactl", *(f"nvidia{minor}" for minor in given)]
    return (
        *((fake_gpu_device(state_dir, name), f"/dev/{name}") for name in names),
        ("/dev/kmsg", "/dev/kmsg"),
    )


def _gpu_count(container: Manifest) -> int:
    limits = container.get("resources", {}).get("limits", {})
    return int(limits.get(GPU_RESOURCE, 0))


def _requested_storage(claim: Manifest) -> int:
    """The bytes a claim (or claim template) requests."""
    return int(parse_quantity(claim["spec"]["resources"]["requests"]["storage"]))


def _secret_data(secret: Manifest) -> dict[str, bytes]:
    data = {k: base64.b64decode(v) for k, v in secret.get("data", {}).items()}
    data.update({k: v.encode() for k, v in secret.get("stringData", {}).items()})
    return data


def _projected(
    entries: dict[str, bytes], items: list[Manifest] | None, default_mode: int
) -> list[tuple[str, bytes, int]]:
    if not items:
        return [(key, value, default_mode) for key, value in sorted(entries.items())]
    return [(item["path"], entries[item["key"]], item.get("mode", default_mode)) for item in items]


def _volumes(
    pod: str,
    workload: Manifest,
    pod_spec: Manifest,
    state_dir: str,
    config_maps: dict[str, Manifest],
    secrets: dict[str, dict[str, bytes]],
    files: list[File],
    directories: set[str],
    empty_dirs: set[str],
    memory_dirs: dict[str, int],
    read_only_volumes: set[str],
    projected_dirs: dict[str, bool],
    immutable: set[tuple[str, str]],
    claim_sizes: dict[str, int],
    requested: Mapping[str, int],
) -> dict[str, str]:
    """Host path of each pod volume, recording the files and directories to create."""
    paths: dict[str, str] = {}
    for volume in pod_spec.get("volumes", []):
        name = volume["name"]
        if "emptyDir" in volume:
            paths[name] = f"{state_dir}/pods/{pod}/{name}"
            empty_dirs.add(paths[name])
            if volume["emptyDir"].get("medium") == "Memory":
                size = volume["emptyDir"].get("sizeLimit")
                memory_dirs[paths[name]] = int(parse_quantity(size)) if size else 0
        elif "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            paths[name] = f"{state_dir}/claims/{claim}"
            if claim in requested:
                claim_sizes[paths[name]] = requested[claim]
            if volume["persistentVolumeClaim"].get("readOnly"):
                read_only_volumes.add(paths[name])
        elif "hostPath" in volume:
            paths[name] = f"{state_dir}/hostpath{volume['hostPath']['path']}"
        elif "projected" in volume and projects_token(volume):
            paths[name] = _service_account_volume(
                pod, name, volume["projected"], workload, state_dir
            )
            read_only_volumes.add(paths[name])  # shared by the account's pods: no fsGroup
        elif "configMap" in volume or "secret" in volume:
            source = volume.get("configMap") or volume["secret"]
            if "configMap" in volume:
                found = config_maps.get(source["name"])
                entries = {k: v.encode() for k, v in (found or {}).get("data", {}).items()}
                kept_current = ("ConfigMap", source["name"]) not in immutable
            else:
                found = secrets.get(source["secretName"])
                entries = found or {}
                kept_current = ("Secret", source["secretName"]) not in immutable
            if found is None and not source.get("optional"):
                kind, ref = (
                    ("ConfigMap", source.get("name"))
                    if "configMap" in volume
                    else ("Secret", source.get("secretName"))
                )
                raise ValueError(f"{pod}: volume {name} needs {kind} {ref}, which does not exist")
            paths[name] = f"{state_dir}/pods/{pod}/{name}"
            projected_dirs[paths[name]] = kept_current
            for path, content, mode in _projected(
                entries, source.get("items"), source.get("defaultMode", 0o644)
            ):
                files.append(File(f"{paths[name]}/{path}", content, mode))
        else:
            raise ValueError(f"{pod}: volume {name} has a type the sandbox does not translate")
        directories.add(paths[name])
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        path = f"{state_dir}/claims/{claim['metadata']['name']}-{pod}"
        paths[claim["metadata"]["name"]] = path
        directories.add(path)
        claim_sizes[path] = _requested_storage(claim)
    return paths


def checked_sub_path(pod: str, sub_path: str) -> str:
    """A relative path that stays below its volume, as the API server's validation wants."""
    parts = [part for part in sub_path.split("/") if part]
    if sub_path.startswith("/") or ".." in parts:
        raise ValueError(f"{pod}: subPath {sub_path!r} must be relative and stay in its volume")
    return "/".join(parts)


def _env(container: Manifest, secrets: dict[str, dict[str, bytes]]) -> tuple[tuple[str, str], ...]:
    values = []
    for entry in container.get("env", []):
        if "value" in entry:
            values.append((entry["name"], entry["value"]))
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            values.append((entry["name"], secrets[ref["name"]][ref["key"]].decode()))
    return tuple(values)


def _containers(
    pod: str,
    pod_spec: Manifest,
    volumes: dict[str, str],
    secrets: dict[str, dict[str, bytes]],
    image_tag: str,
    state_dir: str,
    gpu_devices: Mapping[str, Sequence[int]],
) -> tuple[Container, ...]:
    out = []
    entries: list[tuple[Role, Manifest]] = [
        ("sidecar" if c.get("restartPolicy") == "Always" else "init", c)
        for c in pod_spec.get("initContainers", [])
    ] + [("main", c) for c in pod_spec["containers"]]
    pod_seccomp = pod_spec.get("securityContext", {}).get("seccompProfile", {})
    for role, container in entries:
        context = container.get("securityContext", {})
        mounts = [
            Mount(
                volumes[m["name"]],
                m["mountPath"],
                bool(m.get("readOnly")),
                checked_sub_path(pod, m.get("subPath", "")),
            )
            for m in container.get("volumeMounts", [])
        ]
        env = _env(container, secrets)
        gpus = _gpu_count(container)
        if gpus:
            fake = f"{state_dir}/fake-gpu"
            mounts += [
                Mount(f"{fake}/bin/nvidia-smi", f"{FAKE_GPU_BIN}/nvidia-smi", True),
                Mount(f"{fake}/{pod}", FAKE_GPU_DIR, True),
                Mount(f"{fake}/lib/{FAKE_DRIVER_LIBRARY_NAME}", FAKE_DRIVER_LIBRARY, True),
            ]
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {})
        out.append(
            Container(
                name=container["name"],
                image=local_image(container["image"], image_tag),
                role=role,
                command=tuple(container.get("command", ())),
                args=tuple(container.get("args", ())),
                env=env,
                user=context.get("runAsUser"),
                group=context.get("runAsGroup"),
                cap_add=tuple(context.get("capabilities", {}).get("add", ())),
                cap_drop=tuple(context.get("capabilities", {}).get("drop", ())),
                no_new_privileges=context.get("allowPrivilegeEscalation") is False,
                privileged=bool(context.get("privileged")),
                apparmor_unconfined=context.get("appArmorProfile", {}).get("type") == "Unconfined",
                seccomp=context.get("seccompProfile", pod_seccomp).get("type", "Unconfined"),
                mounts=tuple(mounts),
                devices=_gpu_devices(gpus, gpu_devices.get(pod), state_dir),
                probe=_probe(container),
                pre_stop=tuple(pre_stop.get("command", ())),
                liveness=_timed_probe(container, "livenessProbe"),
                startup=_timed_probe(container, "startupProbe"),
            )
        )
    return tuple(out)


def _hosts(
    services: list[Manifest],
    pods: list[Pod],
    templates: list[tuple[str, Manifest, bool]],
    ips: dict[str, str],
) -> dict[str, str]:
    hosts = {pod.name: pod.ip for pod in pods if not pod.job}
    labels = {name: w["spec"]["template"]["metadata"]["labels"] for name, w, _ in templates}
    for service in services:
        meta, spec = service["metadata"], service["spec"]
        fqdn = f"{meta['name']}.{meta['namespace']}.svc"
        selected = sorted(
            name
            for name, pod_labels in labels.items()
            if name in hosts and all(pod_labels.get(k) == v for k, v in spec["selector"].items())
        )
        if selected:
            hosts[fqdn] = ips[selected[0]]
        if spec.get("clusterIP") == "None":
            for name in selected:
                hosts[f"{name}.{fqdn}"] = ips[name]
    return dict(sorted(hosts.items()))
