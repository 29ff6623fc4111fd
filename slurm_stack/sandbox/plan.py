"""What podman runs for a rendered stack: pods, containers, files and host names.

Everything Kubernetes does that podman does not is translated here, in one place:
- a StatefulSet's replicas become pods named `<name>-<ordinal>`, and so do a Deployment's
  (Kubernetes would give those a random suffix);
- a Service becomes a host entry: `<svc>.<ns>.svc` names the IP of the first pod it selects
  (Kubernetes gives it a virtual IP that balances over all of them), and pods of headless
  Services also get `<pod>.<svc>.<ns>.svc`;
- volumes become directories under the sandbox state directory: emptyDir per pod (a tmpfs of
  its size limit for medium Memory), claims per claim name (claim templates per pod); a claim
  the stack renders is an ext4 filesystem of its requested size (capped at the host's free
  space) in a sparse image, loop-mounted there (`claims.py`), as a block-backed volume is; what
  stays different: an RWX claim is that one filesystem shared by the pods of one host (a real
  one is NFS, CephFS and the like, with their own locking and caching), and a claim whose size
  grows in the stack keeps the size it was created with (a real one expands where its storage
  class allows);
- ConfigMap and Secret volumes are laid out as the kubelet lays them out: the volume directory
  is an emptyDir and so mode 0777 (`defaultPerm` in kubernetes pkg/volume/emptydir), each file
  is a symlink through `..data` to a timestamped directory holding it with its mode (the
  kubelet's AtomicWriter, pkg/volume/util/atomic_writer.go), and a ConfigMap or Secret that
  is not `immutable` is updated in place in running pods (no restart) when it changes. What
  stays different: the kubelet does that within its sync period (about a minute), the
  sandbox at once on `up`; and the kubelet applies an `fsGroup` to these files' group too,
  the sandbox as well (so sssd's copy-out is exercised). A volume whose ConfigMap or Secret
  is `optional` and absent is an empty directory that fills when the object appears, as the
  kubelet mounts it; one that is not optional fails the plan, naming the object, where the
  kubelet would leave the pod waiting in ContainerCreating;
- a pod that mounts its ServiceAccount token (`automountServiceAccountToken`, or a projected
  volume of the kubelet's shape: serviceAccountToken at `token`, kube-root-ca.crt's `ca.crt`,
  the namespace) gets KUBERNETES_SERVICE_HOST/PORT in every container and its account's
  token, CA and namespace where it mounts them, for the sandbox's stand-in API (kube_api.py),
  where each pod runs on a stand-in node of its own. Each such account has a token of its
  own, and every request is authorized before it is routed by the stack's Roles,
  ClusterRoles and bindings as RBAC does (kube_rbac.py: verbs, API groups, resources and
  subresources, resource names, wildcards), a refusal answered with the API server's 403.
  What stays different: the kubelet sets those variables in every pod; the token neither
  expires nor rotates (the kubelet renews a projected one within its expirationSeconds); a
  projected volume of other sources is refused; RBAC has no aggregated ClusterRoles, no
  rules for non-resource URLs and none of the API server's default roles (`system:*`), so
  discovery and `/version` are refused; and the stand-in serves only what the stack's
  clients use: the lists of nodes and of a namespace's pods, a pod's delete and a
  StatefulSet's `scale` (get, and a merge or strategic merge patch: no JSON patch or
  server-side apply, no resourceVersion, no watch; clients poll);
- a StatefulSet's size follows its scale subresource as its controller follows it: the
  stand-in API keeps each `spec.replicas` (statefulsets.py), and a StatefulSet controller
  stand-in (statefulset_controller.py: started by `up` when a StatefulSet is elastic, its
  annotation `slurm-stack.io/scaled-by: slurm-power-saving`, stopped by `down`, logging to
  `statefulset-controller/controller.log` in the sandbox state) starts the missing pods,
  lowest ordinal first (side by side under Parallel), and stops the surplus ones, highest
  first, each with its preStop hook and grace as an `up` stops them; a pod deleted through
  the API is stopped so and started again. It holds the lock the commands that start or stop
  pods hold (`state.hold_pods`), so it never acts beside an `up`. `up` keeps an elastic
  StatefulSet's live size once it exists, as Pulumi's `ignoreChanges: ["spec.replicas"]`
  does, and its pods keep their addresses while scaled away. What stays different: the
  controller looks at the sizes twice a second (Kubernetes' watches) and makes one pass at a
  time (a change made while pods start waits until they are ready); it stops surplus pods
  one after another whatever the podManagementPolicy; it acts on a StatefulSet when
  its size changes, not when one of its pods disappears otherwise (the next apply brings
  that back), and runs only while a StatefulSet is elastic; a StatefulSet that is not
  elastic runs at its manifest's size alone (a patched size starts no pod and the next `up`
  sets it back, where Pulumi would leave it until the manifest's replicas change); a
  delete's gracePeriodSeconds and preconditions are not read (the pod's own grace applies),
  and the deleted pod is listed throughout, never Terminating; Prometheus scrapes the pods
  of the last `up`;
- a generated Secret keeps the data of its first apply, as Pulumi keeps a random resource's
  value, and takes new data when its generation annotation changes (the JWT key's, with
  `restApi.keyGeneration`, the random resource's `keepers`); what stays different: the mock
  engine derives a value from the resource's name and keepers, so going back to an earlier
  generation brings back that generation's key, where Pulumi's random provider would make a
  new one;
- env values from `secretKeyRef` are resolved from the rendered Secret (Kubernetes injects them);
- native sidecars (init containers with restartPolicy Always) start first and keep running,
  other init containers run to completion before the main containers, as in a pod;
- pod IPs are fixed per pod name for the sandbox's life (Kubernetes gives a new one per pod),
  and so are their MAC addresses (`podman.mac_address`), as a re-created pod at a known address
  with a new MAC would be unreachable until neighbour caches expire; the network's bridge
  keeps its gateway's MAC (`podman.pin_bridge_address`), as Linux would otherwise give it its
  lowest port's, which changes as pods come and go and left pods sending to the host (the
  container tests' registries) at a MAC nobody had, for up to a minute;
- a Job runs once per name while the stack has it; one that leaves the stack and comes back
  runs again (Pulumi deletes the old Job object and creates it anew); a finished Job's pod
  stays, its sidecars sent SIGTERM as the kubelet sends it, until the Job leaves the stack
  or `sandbox down` (then it goes at once: nothing runs in it); what its main containers
  printed is also kept as `jobs/<job>--<container>.log` in the sandbox state (`kubectl logs
  job/<job>`), and stays after the pod has gone; what stays different: the pod's infra
  container keeps running (the kubelet stops a finished pod's sandbox);
- a pod that leaves runs its main container's preStop hook, then gets SIGTERM and SIGKILL once
  its `terminationGracePeriodSeconds` (hook included) is over, highest ordinal first; what
  stays different: the sandbox stops removed pods one after another (a StatefulSet with
  `podManagementPolicy: Parallel` stops them together), `sandbox down` stops pods in reverse
  start order (deleting a namespace stops them all at once), and a pod killed with
  `sandbox kill-pod` (a crash) or `sandbox delete-pod` (an eviction: preStop and grace) comes
  back when that command re-applies, not by a controller's watch; a test may leave a killed
  pod gone (`Sandbox.kill_pod(name, come_back=False)`) until `Sandbox.restore`, as a
  StatefulSet leaves the pod of a lost node until the node is known to be gone;
- a StatefulSet whose pod template changed is rolled as its controller rolls it: one pod at
  a time, highest ordinal first, each stopped as above (preStop, grace) and the next only
  once the new pod is ready; a new pod that does not become ready (an image that does not
  exist, a daemon that keeps exiting) stops that StatefulSet's roll, leaves the pods not
  reached on their template and fails `up`. A pod of an earlier template that is not ready
  is replaced with `podManagementPolicy: Parallel` and left alone with `OrderedReady`, as
  Kubernetes leaves it (its "forced rollback"); `up` then fails naming it. What stays
  different: `sandbox up` waits for every roll to end, where `pulumi up` returns once a
  worker StatefulSet is updated; the sandbox rolls one pod at a time whatever
  `maxUnavailable` says (the MaxUnavailableStatefulSet gate is off by default in Kubernetes
  1.36); and a rebuilt image under the same tag rolls pods in the sandbox (their
  fingerprint changes) but not on Kubernetes, so such a roll's stops take the `drain`
  settings (no update Job marked the nodes);
- pods start as Pulumi creates them, each component as soon as the components it depends on
  are ready (`STARTS_AFTER`: database, slurmdbd, controller; the jail's copy from the start;
  the pools' update Jobs and the config Job after the controller; login, the metrics exporter
  and slurmrestd once the jail is populated too, the users Job after the config Job; workers
  last); what stays different: the pools also wait for the config Job (Pulumi would run it
  while they roll);
- the stack's outputs of the last `up` that succeeded are kept (`outputs.json`) and given
  back to the program as the engine gives them (`readStackOutputs`: its deployed
  slurmVersion); `sandbox down` does not run the program, as `pulumi destroy` does not;
- ServiceMonitors and PrometheusRules become the configuration of a real Prometheus the
  sandbox runs beside the pods (`prometheus.py`), as the Prometheus Operator would configure
  one: each selected pod a target, labelled `job`, `namespace`, `service`, `pod`,
  `container`, `endpoint`; what stays different: the targets are the pods' fixed addresses
  (the operator follows the Services' endpoints as pods come and go), and rules are
  evaluated every 10 s (the operator's default is 30 s);
- a probe's port given by name is the container port of that name, as the kubelet reads it;
- readiness and startup probes gate `up` as they gate a rollout; liveness probes run as the
  kubelet runs them, in a prober process that outlives `up` (`liveness_server.py`: started
  by `up` unless it runs, stopped by `down`; the apply keeps its list of containers): once
  the container's startup probe has passed and its initialDelaySeconds are over, every
  periodSeconds, each try bounded by timeoutSeconds; failureThreshold failures in a row
  (of the liveness probe, or of the startup probe while it has not passed) kill the
  container as the kubelet does (its preStop hook, SIGTERM, SIGKILL once the pod's grace
  period is over, at least 2 s) and podman restarts it in place (its RestartCount grows);
  each failure and kill is a line of `liveness/events.log` in the sandbox state, worded as
  the kubelet's events. What stays different: the restart is at once (the kubelet backs
  off, CrashLoopBackOff); a container with a startup probe and no liveness probe is not
  watched after `up`; a probe's own terminationGracePeriodSeconds is not read; httpGet and
  grpc probes are refused by the plan; the prober reads its list once a second and times
  each container's probes from when it first saw it, not from the pod's start; and a
  paused container is thawed after its SIGKILL (cgroup v2's freezer lets SIGKILL through,
  this host's v1 does not, so the container would stay until unpaused);
- an exec probe runs in the container's namespaces, root, working directory and environment,
  as its runAsUser and runAsGroup (`exec_probes.py`, through nsenter, milliseconds where a
  podman exec costs a quarter of a CPU second); the liveness prober's probes and preStop
  hooks first join the container's cgroups, as the runtime's exec does, so a paused
  container's probe hangs until its timeout. What stays different: the probe process is
  outside the container's seccomp filter (and `up`'s readiness probes outside its
  cgroups too), with the capabilities of root in the host's user namespace (the kubelet
  runs it through the runtime, confined as the container);
- `Sandbox.exec_quick` (the tests' Slurm admin commands in slurmctld's container) enters the
  same way where the container's main process is an unprivileged user with no other group,
  as that user: the same user, groups and (no) capabilities a `kubectl exec` would give;
  what stays different: the process is outside the container's cgroup and seccomp filter;
- a container gets the capabilities its securityContext adds only where the host's own
  bounding set holds them: this development machine's lacks CAP_SYS_RESOURCE, and podman
  drops it without a word, so slurmd runs without it here (the real-Slurm tests compare a
  process's capabilities with the render's, less what the host cannot grant);
- PodDisruptionBudgets are rendered but not enforced: the sandbox has no eviction API, so
  nothing asks them (`kubectl drain` would);
- NetworkPolicies are rendered but not enforced: every sandbox pod reaches every other on
  podman's network (on Kubernetes the network plugin enforces them);
- a machine outside the cluster (an external accounting database, a directory server, a host
  that runs Slurm beside the pods) is a container on the sandbox's network (`outside.py`),
  `<sandbox>-outside-<name>`, at a fixed address among the subnet's last fifteen (.240-.254),
  which no pod is given; `sandbox down` removes it after the pods, and `--delete-data` its
  files (`outside/<name>` in the sandbox state), as a volume's. Whoever needs one (a test)
  starts it before the `up` whose pods use it: `up` neither starts nor waits for it. What
  stays different: pods reach it by address alone (no host entry names it), on their own
  network (a real one is routed to, often through NAT);
- a LoadBalancer Service that selects one pod by name (`statefulset.kubernetes.io/pod-name`:
  the controllers' Services for hosts outside Kubernetes, `externalNodes`) has that pod's
  address as its load balancer's in the stack's outputs (`stack.load_balancer_stand_in`: the
  address is handed out as the program runs and kept for the pod); other LoadBalancer
  Services keep the mock engine's unreachable one. What stays different: a real load
  balancer has an address of its own in front of the pod and admits only its
  `loadBalancerSourceRanges` (the sandbox's pod admits anyone on its network);
- an external database's password (`accounting.mode: external`) is the Secret the program
  renders from the `accountingDbPassword` config, which follows the config as Pulumi's
  update would (`stack.py`); a `passwordSecret` names a Secret someone made with kubectl,
  which a sandbox has no way to hold: its plan fails, naming the Secret;
- seccomp follows the manifest: no profile is Unconfined (the kubelet's default without
  --seccomp-default), `RuntimeDefault` is podman's default profile with containerd's rules
  laid over it (`sandbox/seccomp.py`): every call containerd allows only with a capability
  (unshare, mount, setns, clone with namespace flags under CAP_SYS_ADMIN, and the rest of
  its table) needs it here too, the calls containerd allows to no one (pivot_root, keyctl)
  are refused, and a refused call answers EPERM; what stays different: socket(2)'s families
  (containerd 1.7 and later refuse AF_VSOCK and AF_ALG), io_uring (refused from containerd
  2.0), and ptrace and process_vm_readv allowed as containerd 1.7 allows them (1.6 gates
  the latter behind CAP_SYS_PTRACE);
- cgroups are this host's, which mounts the controllers as cgroup v1 (hybrid). A privileged
  container (`cgroups.enforce`) stays in the host's cgroup namespace, as containerd keeps a
  privileged container on cgroup v2 (containerd/cri#1415, after the cgroup v2 KEP), and
  Slurm's `CgroupPlugin=autodetect` picks cgroup/v1, under the container's own cgroup
  (`tests/cluster/test_cgroups.py`). What stays different: Kubernetes 1.36 nodes run cgroup
  v2, where Slurm picks cgroup/v2 and puts slurmstepd's cgroups beside the containers in the
  pod's cgroup (`_set_int_cg_ns` in `cgroup_v2.c`); that path is not booted here. And podman
  mounts a v1 container's own cgroup at `/sys/fs/cgroup/<controller>` while
  `/proc/self/cgroup` names host paths, so slurmd logs "Cannot find slurmd cpu cgroup" (and
  memory) once at start: it only looks for its own cgroup to lift limits on itself;
- AppArmor is not exercised: this host's kernel has no AppArmor, so `Unconfined` and the
  runtime's default profile (which denies mount(2)) behave alike here;
- `fsGroup` becomes the group of the pod's volume directories (the kubelet chowns them);
- a `subPath` mount binds that directory of the volume, created when missing as the kubelet
  creates it (owned by root, with the mode of the volume's root);
- images the sandbox cannot pull are replaced by local builds (`LOCAL_IMAGES`);
- a GPU request gets fake device nodes, the fake `nvidia-smi` and a stand-in driver library
  file (no GPU here; the NVIDIA device plugin and runtime would inject the real ones), and the
  host's kernel log read-only for the XID check (an unprivileged pod on Kubernetes cannot open
  /dev/kmsg). The device nodes are character devices of NVIDIA's major (195), one minor per
  GPU, as the device plugin gives them: a pod keeps the host's minors of the GPUs it was
  given. By default a pod gets minors 0 to its request minus 1; `SandboxState.gpu_devices_file`
  gives a pod other minors or fewer devices than it asked for, as a host whose GPUs 0-3 are
  taken, or one with a GPU missing, would. Opening one fails (no driver): the fake tools only
  look for them, and Slurm and the jail plugin only stat and bind them.
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
