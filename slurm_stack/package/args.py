"""Typed arguments of the component package's `slurm-stack:index:SlurmCluster`.

Generated from slurm_stack/spec/models.py by `python -m slurm_stack.package.generate`: do not
edit. Values are validated by the spec's models, with the same messages and key paths.
"""

from enum import StrEnum
from typing import Any, NotRequired, Required, TypedDict

import pulumi


class SlurmClusterSlurmVersion(StrEnum):
    """Values of `slurmVersion`."""

    V_24_11 = "24.11"
    V_26_05 = "26.05"


class SlurmClusterAuth(StrEnum):
    """Values of `auth`."""

    MUNGE = "munge"
    SLURM = "slurm"


class ImagesPullPolicy(StrEnum):
    """Values of `pullPolicy`."""

    IF_NOT_PRESENT = "IfNotPresent"
    ALWAYS = "Always"
    NEVER = "Never"


class Images(TypedDict, total=False):
    """Container images. Each component defaults to `<registry>/<component>:<tag>`; a full
    reference under the component's key replaces that, and pins it by digest with
    `name@sha256:<hex>` or `name:tag@sha256:<hex>` (docs/deploy.md)."""

    registry: NotRequired[str]
    (
        "Registry and repository path of the project's images, without tag or digest: images are "
        "`<registry>/<component>:<tag>`. Default: `ghcr.io/slurm-stack`."
    )
    tag: NotRequired[str]
    (
        "The tag of every project image; unset: `<slurmVersion>-<image revision>` (e.g. "
        "'26.05-0.1.0'). Not 'latest', and no digest: pin a digest per component instead."
    )
    pull_policy: NotRequired[ImagesPullPolicy]
    """imagePullPolicy of every container slurm-stack creates. Default: `IfNotPresent`."""
    pull_secrets: NotRequired[list[str]]
    (
        "Names of existing Secrets in the cluster's namespace, the imagePullSecrets of the pods "
        "that run the project's images."
    )
    controller: NotRequired[str]
    """Full reference of the slurmctld image; unset: `<registry>/controller:<tag>`."""
    worker: NotRequired[str]
    """Full reference of the slurmd image; unset: `<registry>/worker:<tag>`."""
    login: NotRequired[str]
    """Full reference of the login (sshd) image; unset: `<registry>/login:<tag>`."""
    accounting: NotRequired[str]
    """Full reference of the slurmdbd image; unset: `<registry>/accounting:<tag>`."""
    munge: NotRequired[str]
    (
        "Full reference of the munged sidecar image (with `auth: slurm`, the image of the init "
        "container that copies slurm.key); unset: `<registry>/munge:<tag>`."
    )
    jail: NotRequired[str]
    (
        "Full reference of the image whose root filesystem becomes the jail, unless "
        "`jail.populate.image` names another; unset: `<registry>/jail:<tag>`."
    )
    ops: NotRequired[str]
    (
        "Full reference of the image of the cluster's Jobs (reconfigure, users, NCCL benchmark); "
        "unset: `<registry>/ops:<tag>`."
    )
    rest: NotRequired[str]
    ("Full reference of the slurmrestd image, used with `restApi`; unset: `<registry>/rest:<tag>`.")
    sssd: NotRequired[str]
    (
        "Full reference of the sssd sidecar image, used with a `directory`; unset: "
        "`<registry>/sssd:<tag>`."
    )
    mariadb: NotRequired[str]
    (
        "Full reference of the MariaDB image of the embedded accounting database "
        "(`accounting.mode: embedded`). Default: `docker.io/library/mariadb:11.8.3`."
    )


class Resources(TypedDict, total=False):
    """Container resource requests and limits (Kubernetes quantities)."""

    requests: NotRequired[dict[str, str]]
    (
        "What the container asks for: `cpu`, `memory` and `ephemeral-storage`, each a Kubernetes "
        "quantity ('500m', '2Gi'). A resource left out has no request."
    )
    limits: NotRequired[dict[str, str]]
    (
        "The most the container may use, with the same keys as `requests`; a resource left out has "
        "no limit. A request above its limit is refused."
    )


class Volume(TypedDict, total=False):
    """A persistent volume to create: size and storage class (cluster default if unset)."""

    size: Required[str]
    """The storage the claim requests, a Kubernetes quantity ('20Gi')."""
    storage_class: NotRequired[str]
    """The claim's storageClassName; unset: the Kubernetes cluster's default storage class."""


class SchedulerType(StrEnum):
    """Values of `type`."""

    SCHED_BACKFILL = "sched/backfill"
    SCHED_BUILTIN = "sched/builtin"


class SchedulerSelectTypeParameters(StrEnum):
    """Values of `selectTypeParameters`."""

    CR_CORE_MEMORY = "CR_Core_Memory"
    CR_CPU_MEMORY = "CR_CPU_Memory"
    CR_CORE = "CR_Core"
    CR_CPU = "CR_CPU"
    CR_SOCKET_MEMORY = "CR_Socket_Memory"


class Scheduler(TypedDict, total=False):
    """slurmctld scheduling: backfill with GPU-friendly defaults."""

    type: NotRequired[SchedulerType]
    """slurm.conf's SchedulerType. Default: `sched/backfill`."""
    parameters: NotRequired[list[str]]
    (
        "slurm.conf's SchedulerParameters, one option per item; a list given replaces the "
        "defaults. On Slurm 26.05 `requeue_delay=10` is added unless an item sets requeue_delay. "
        "Default: `bf_continue`, `bf_max_job_test=1000`, `bf_window=10080`."
    )
    select_type_parameters: NotRequired[SchedulerSelectTypeParameters]
    (
        "slurm.conf's SelectTypeParameters for select/cons_tres: which resources are consumable "
        "(cores, CPUs or sockets, with or without memory). Default: `CR_Core_Memory`."
    )


class Metrics(TypedDict, total=False):
    """slurmctld's OpenMetrics endpoint (Slurm 25.11 and newer)."""

    enabled: NotRequired[bool]
    (
        "Serve `/metrics` on slurmctld's port (MetricsType=metrics/openmetrics); the "
        "NetworkPolicies then admit pods of any namespace to that port. Refused with slurmVersion "
        "24.11. Default: false."
    )


class TolerationOperator(StrEnum):
    """Values of `operator`."""

    EQUAL = "Equal"
    EXISTS = "Exists"


class TolerationEffect(StrEnum):
    """Values of `effect`."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(TypedDict, total=False):
    """A Kubernetes toleration."""

    key: NotRequired[str]
    """The taint key this toleration matches; unset with operator `Exists` matches every taint."""
    operator: NotRequired[TolerationOperator]
    (
        "`Equal`: the taint's value must equal `value`; `Exists`: any value matches. Default: "
        "`Equal`."
    )
    value: NotRequired[str]
    """The taint value to match with operator `Equal`."""
    effect: NotRequired[TolerationEffect]
    """The taint effect to match; unset matches every effect."""
    toleration_seconds: NotRequired[int]
    (
        "For effect `NoExecute`: seconds the pod stays on a node after the taint appears; unset: "
        "it stays."
    )


class Placement(TypedDict, total=False):
    """Where a component's pods may run."""

    node_selector: NotRequired[dict[str, str]]
    (
        "Node labels the pods' node must have (the PodSpec's nodeSelector); values are strings, "
        "and a boolean or number is taken as its text. Empty: any node."
    )
    tolerations: NotRequired[list[Toleration]]
    """Taints the pods tolerate (the PodSpec's tolerations)."""


class Controller(TypedDict, total=False):
    """slurmctld: one replica, or a primary and a backup, whose state lives on a protected PVC."""

    replicas: NotRequired[int]
    (
        "1: one slurmctld, restarted by its StatefulSet. 2: a backup slurmctld beside it "
        "(`SlurmctldHost` twice, in order), sharing StateSaveLocation on a ReadWriteMany claim, "
        "which takes over when the primary has not answered for `takeoverAfterSeconds` "
        "(docs/controller-ha.md). Cannot be changed once the stack is deployed: the state claim's "
        "access mode is fixed at its creation. Default: 1."
    )
    takeover_after_seconds: NotRequired[int]
    (
        "With `replicas: 2`, slurm.conf's SlurmctldTimeout: how long the backup waits for the "
        "primary to answer before it takes control. Unset: Slurm's default, 120."
    )
    resources: NotRequired[Resources]
    """Requests and limits of the slurmctld container."""
    state_volume: NotRequired[Volume]
    (
        "The claim holding StateSaveLocation, so jobs survive a controller restart; protected and "
        "kept on delete. Default size 10Gi. ReadWriteOnce, or ReadWriteMany with `replicas: 2` "
        "(then `storageClass` must name a class that provides it)."
    )
    max_node_count: NotRequired[int]
    (
        "slurm.conf's MaxNodeCount: how many dynamic nodes may register. The replicas of all "
        "worker pools together must not exceed it. Default: 1024."
    )
    scheduler: NotRequired[Scheduler]
    """Scheduler type and parameters."""
    metrics: NotRequired[Metrics]
    """slurmctld's metrics endpoint."""
    slurm_conf_extra: NotRequired[list[str]]
    (
        "Extra `Key=Value` lines for slurm.conf; a key set here replaces slurm-stack's default for "
        "it. Keys slurm-stack owns (ClusterName, NodeSet ...) and keys the Slurm version lacks are "
        "refused."
    )
    placement: NotRequired[Placement]
    """Node selector and tolerations of the slurmctld pod."""


class LoginServiceType(StrEnum):
    """Values of `type`."""

    LOAD_BALANCER = "LoadBalancer"
    NODE_PORT = "NodePort"
    CLUSTER_IP = "ClusterIP"


class LoginService(TypedDict, total=False):
    """How SSH reaches the login pods."""

    type: NotRequired[LoginServiceType]
    (
        "The login Service's type. `ClusterIP` is reachable only from inside the Kubernetes "
        "cluster; use `NodePort` where no load balancer is available. Default: `LoadBalancer`."
    )
    port: NotRequired[int]
    """The Service port clients connect to; sshd itself listens on 22 in the pod. Default: 22."""
    node_port: NotRequired[int]
    (
        "A fixed node port (30000-32767) for `NodePort` or `LoadBalancer`; unset: Kubernetes picks "
        "one. Not valid with `ClusterIP`."
    )
    annotations: NotRequired[dict[str, str]]
    (
        "Annotations of the login Service (e.g. a cloud provider's load balancer settings), added "
        "to the cluster's `annotations`; values are strings."
    )
    load_balancer_source_ranges: NotRequired[list[str]]
    (
        "CIDR ranges the load balancer admits (`LoadBalancer` only); empty: any address. Also the "
        "SSH NetworkPolicy's sources when `networkPolicy.sshSourceRanges` is empty."
    )


class LoginUser(TypedDict, total=False):
    """A user account in the jail, with its SSH keys and Slurm association. `pulumi up` creates
    the account (fixed uid/gid, home directory created once, shell, groups) and its
    association; removing the user from the list locks the account and stops it submitting,
    and keeps its home directory."""

    name: Required[str]
    (
        "Login name: lower-case letters, digits, '_' and '-', starting with a letter or '_', at "
        "most 32 characters; unique, and not `root`."
    )
    authorized_keys: Required[list[str]]
    """OpenSSH public keys that may log in as this user (at least one)."""
    uid: NotRequired[int]
    (
        "The user's uid, 1000-59999; unset: a number in 10000-59999 derived from the name, so it "
        "does not change when the list is reordered."
    )
    gid: NotRequired[int]
    """The gid of the user's own group (named after the user), 1000-59999; unset: the uid."""
    groups: NotRequired[list[str]]
    (
        "Supplementary groups, exactly these: a missing group is created with a gid derived from "
        "its name; a declared user's name means that user's own group."
    )
    shell: NotRequired[str]
    """Login shell, an absolute path that must exist in the jail. Default: `/bin/bash`."""
    account: NotRequired[str]
    (
        "Slurm account of the user's association, created when missing (with accounting only); "
        "unset: `login.defaultAccount`, else the cluster's name."
    )
    default_qos: NotRequired[str]
    (
        "Slurm QOS made the default of the user's association, created when missing (with "
        "accounting only); unset: none is set."
    )


class Login(TypedDict, total=False):
    """sshd login pods whose sessions are chrooted into the jail."""

    replicas: NotRequired[int]
    """Number of login pods, 0-32. Default: 1."""
    service: NotRequired[LoginService]
    """The Service through which SSH reaches the login pods."""
    root_authorized_keys: NotRequired[list[str]]
    (
        "OpenSSH public keys that may log in as root (a session chrooted into the jail, like any "
        "other); empty: root cannot log in over SSH."
    )
    users: NotRequired[list[LoginUser]]
    (
        "Declared users: accounts in the jail with their keys and Slurm associations. Removing one "
        "locks the account and keeps its home directory."
    )
    default_account: NotRequired[str]
    """Slurm account of declared users who name none; unset: the cluster's name."""
    sshd_extra: NotRequired[list[str]]
    (
        "Extra `Keyword value` lines for sshd_config, keywords of the login image's OpenSSH; a "
        "keyword set here replaces slurm-stack's default for it. Keywords that decide who logs in, "
        "how keys are found or where sessions run (ChrootDirectory, HostKey, Port, the key "
        "handling, AllowUsers, Match, Include ...) are refused, and so is a value the image's sshd "
        "would refuse to start with (`MaxAuthTries abc`, `X11Forwarding maybe`)."
    )
    resources: NotRequired[Resources]
    (
        "Requests and limits of the sshd container; an `ephemeral-storage` limit bounds what login "
        "sessions write to `/tmp` on the node's disk."
    )
    placement: NotRequired[Placement]
    """Node selector and tolerations of the login pods."""


class SubmountType(StrEnum):
    """The kind of submount."""

    EMPTY_DIR = "emptyDir"
    MEMORY = "memory"
    HOST_PATH = "hostPath"
    PVC = "pvc"


class Submount(TypedDict, total=False):
    """A directory mounted into the jail for every job and login. `emptyDir`: Node-local scratch
    on the pod's node disk. `memory`: An in-memory (tmpfs) submount; its size counts against
    the pod's memory. `hostPath`: A directory of the Kubernetes node (local NVMe, caches),
    never one of the node's own system directories (`/etc`, `/run`, the kubelet's and
    container runtime's state …). `pvc`: A persistent volume: an existing claim (shared) or
    one new claim per node (template)."""

    type: Required[SubmountType]
    """The kind of submount: `emptyDir`, `memory`, `hostPath`, `pvc`."""
    name: Required[str]
    (
        "Name of the submount, a DNS label of at most 50 characters (the pod volume is "
        "`sm-<name>`); unique among a pool's and the jail's submounts."
    )
    mount_path: Required[str]
    (
        "Where the submount appears in the jail, an absolute path other than '/'; unique among a "
        "pool's and the jail's submounts."
    )
    size_limit: NotRequired[str]
    (
        "The emptyDir's sizeLimit, a Kubernetes quantity; unset: no limit of its own. Only with "
        "type `emptyDir` or `memory`."
    )
    host_path: NotRequired[str]
    (
        "The node's directory, created when missing; not '/', and not one of the node's system "
        "directories (`/etc`, `/proc`, `/var/lib/kubelet` ...), under one, or above one. Only with "
        "type `hostPath`."
    )
    read_only: NotRequired[bool]
    """Mount it read-only. Default: false. Only with type `hostPath` or `pvc`."""
    existing_claim: NotRequired[str]
    (
        "An existing claim in the cluster's namespace, shared by every pod that mounts it. Give "
        "exactly one of `existingClaim` and `size`. Only with type `pvc`."
    )
    size: NotRequired[str]
    (
        "Size of a new ReadWriteOnce claim for each node of the pool, a Kubernetes quantity. Only "
        "in a pool's submounts: the jail's need `existingClaim`. Only with type `pvc`."
    )
    storage_class: NotRequired[str]
    (
        "storageClassName of the per-node claims (`size`); unset: the Kubernetes cluster's default "
        "class. Unused with `existingClaim`. Only with type `pvc`."
    )


class PoolDrainPolicy(StrEnum):
    """Values of `policy`."""

    REQUEUE = "requeue"
    CANCEL = "cancel"
    WAIT = "wait"


class PoolDrain(TypedDict, total=False):
    """What happens to a node's running jobs when its pod stops (scale-down, eviction)."""

    policy: NotRequired[PoolDrainPolicy]
    (
        "What happens to jobs still running `waitSeconds` after the pod began to stop. `requeue`: "
        "batch jobs are requeued to run again elsewhere, the rest cancelled with a reason; "
        "`cancel`: all are cancelled; `wait`: no deadline, the pod stops when the last job has "
        "ended. Default: `requeue`."
    )
    wait_seconds: NotRequired[int]
    (
        "Seconds running jobs get to end once the pod begins to stop (0 to 604800); unset: 300. "
        "Not valid with policy `wait`. The pod's termination grace period is the longer of this "
        "and `update.waitSeconds`, plus 60."
    )
    max_unavailable: NotRequired[Any]
    (
        "Pods of the pool a Kubernetes node drain may evict at once (the pool's "
        "PodDisruptionBudget): a number of pods or a percentage such as '25%'. With 0 a drain "
        "waits for the pool's pods forever. Default: 1."
    )


class PoolUpdatePolicy(StrEnum):
    """Values of `policy`."""

    REQUEUE = "requeue"
    CANCEL = "cancel"
    WAIT = "wait"


class PoolUpdate(TypedDict, total=False):
    """What happens to a node's running jobs when a change to the pool's pod template (image,
    resources, env, submounts, these settings) replaces its pod. Kubernetes replaces the
    pool's pods one at a time, highest ordinal first, each once the one before is Ready again;
    each node drains first and its pod stops only when its jobs are done (or the policy acted
    on them)."""

    policy: NotRequired[PoolUpdatePolicy]
    (
        "What happens to jobs still running `waitSeconds` after the node began to drain for an "
        "update. `wait` (default): no deadline, the pod is replaced when its last job has ended; "
        "`requeue`: batch jobs are requeued to run again elsewhere, the rest cancelled with a "
        "reason; `cancel`: all are cancelled. Default: `wait`."
    )
    wait_seconds: NotRequired[int]
    (
        "Seconds running jobs get to end once their node began to drain for an update (0 to "
        "604800); unset: 300. Not valid with policy `wait`."
    )


class PoolElastic(TypedDict, total=False):
    """Slurm's power saving sizes the pool between two bounds: a node idle for `idleSeconds` is
    given back (its pod removed), and a job that needs more nodes starts their pods. The
    pool's Slurm nodes exist (powered down, `idle~` in sinfo) while no pod runs them
    (docs/elastic.md)."""

    min_replicas: NotRequired[int]
    """Nodes that always run, the pool's lowest ordinals (0-10000); never given back. Default: 0."""
    max_replicas: Required[int]
    (
        "The most nodes the pool grows to (1-10000); Slurm knows this many nodes of the pool, and "
        "they count against `controller.maxNodeCount`."
    )
    idle_seconds: NotRequired[int]
    (
        "Seconds a node stays idle before its pod is given back (Slurm's SuspendTime for the "
        "pool's nodes), 5 to 604800. Default: 600."
    )
    start_timeout_seconds: NotRequired[int]
    (
        "Seconds a node may take from the request to start its pod until its slurmd registers "
        "(Slurm's ResumeTimeout for the pool's nodes), 20 to 86400: image pull and start. A node "
        "that takes longer is marked down with a reason naming its pod, and its jobs queue again. "
        "Default: 600."
    )


class WorkerPool(TypedDict, total=False):
    """A pool of slurmd pods; each pod is one dynamic Slurm node with the pool's feature."""

    name: Required[str]
    (
        "The pool's name, a DNS label, unique among pools: its NodeSet and Slurm feature, and its "
        "nodes are `<cluster>-<name>-<ordinal>`. Names of the cluster's other workloads are "
        "reserved, and `<cluster>-<name>` must fit 52 characters."
    )
    replicas: NotRequired[int]
    (
        "Number of slurmd pods, each one Slurm node (0-10000). All pools' replicas together must "
        "not exceed `controller.maxNodeCount`. Default: 1."
    )
    resources: NotRequired[Resources]
    (
        "Requests and limits of the slurmd container. The memory limit (else the request) sets the "
        "node's RealMemory (95 %, less in-memory submounts) and a whole-number cpu limit its CPUs, "
        "unless `nodeConfExtra` sets them."
    )
    gpus: NotRequired[int]
    (
        "NVIDIA GPUs per node (0-16), requested as `nvidia.com/gpu` and offered as the `gpu` GRES; "
        "a GPU pool's pods tolerate the `nvidia.com/gpu` taint and run the GPU checks. Default: 0."
    )
    gpu_type: NotRequired[str]
    (
        "GRES type of the GPUs ('h100', 'a100_80g'); needs `gpus` above 0. While the NCCL "
        "benchmark runs, a GPU pool needs one with a threshold in "
        "`healthChecks.nccl.thresholdsGbps`."
    )
    features: NotRequired[list[str]]
    (
        "Slurm features of the pool's nodes besides the pool's name, which they always have; not "
        "another pool's name."
    )
    weight: NotRequired[int]
    (
        "Slurm node Weight of the pool's nodes: Slurm allocates nodes of lower weight first. "
        "Default: 1."
    )
    def_mem_per_cpu: NotRequired[int]
    (
        "Memory (MiB) per allocated CPU that a job on this pool's nodes gets when it asks no "
        "`--mem`: the pool's share in the DefMemPerCPU of its partitions, which take the smallest "
        "share among their pools. Unset: the node's RealMemory divided by its CPUs. At most the "
        "node's RealMemory."
    )
    node_conf_extra: NotRequired[list[str]]
    (
        "Extra `Key=Value` settings of the pool's dynamic nodes (`slurmd -Z --conf`), one per "
        "item, such as RealMemory or CPUs, checked against the node options of the stack's Slurm "
        "version; keys that come from the pool's fields or the pod (Feature, Gres, GresConf, "
        "Weight, NodeName, NodeHostname, NodeAddr, Port) are refused."
    )
    submounts: NotRequired[list[Submount]]
    (
        "Volumes bound into the jail of the jobs on this pool's nodes only (node-local scratch, "
        "memory, node directories, claims)."
    )
    shm_size: NotRequired[str]
    (
        "Size limit of the worker pod's in-memory `/dev/shm`, which holds each job's private "
        "`/dev/shm`; a Kubernetes quantity. Default: `16Gi`."
    )
    drain: NotRequired[PoolDrain]
    (
        "What happens to running jobs when a pod of the pool stops (scale-down, eviction, pod "
        "deletion), and how many pods a Kubernetes node drain may evict at once."
    )
    update: NotRequired[PoolUpdate]
    (
        "What happens to running jobs when a change to the pool's pod template replaces its pods; "
        "by default the pods wait for them."
    )
    placement: NotRequired[Placement]
    """Node selector and tolerations of the pool's pods."""
    switch: NotRequired[str]
    (
        "The leaf network switch the pool's nodes hang off, under `topology.rootSwitch`: each node "
        "joins it as it registers (`slurmd --conf Topology=`), and jobs that span nodes are placed "
        "on as few switches as they fit (`--switches` bounds it). Required when `topology` is set; "
        "pools may share a switch."
    )
    switch_label: NotRequired[str]
    (
        "Instead of `switch`: a Kubernetes node label whose value names the leaf switch of each "
        "node, so one pool's nodes spread over the switches their Kubernetes nodes are cabled to. "
        "The node-state controller (`nodeState.enabled`) reads it and moves the Slurm node there; "
        "a node registers drained and takes jobs once it is on its switch. A node without the "
        "label, or with one that is no switch name, stays drained with a `k8s:` reason."
    )
    label_features: NotRequired[dict[str, str]]
    (
        "Kubernetes node labels as Slurm features: `{zone: topology.kubernetes.io/zone}` gives a "
        "node on a Kubernetes node labelled `zone=a` the feature `k8s-zone-a`, for "
        "`--constraint=k8s-zone-a`. The node-state controller (`nodeState.enabled`) keeps them in "
        "step with the labels; a node without the label has no such feature."
    )
    sshd: NotRequired[bool]
    (
        "sshd on each node of the pool, for users who debug a running job: a user with a job on "
        "the node may ssh in from a login node and lands in that job (its cgroup, chrooted into "
        "the jail); anyone else is refused (pam_slurm_adopt). Needs `cgroups.enforce: true` "
        "(docs/users.md). Default: false."
    )
    elastic: NotRequired[PoolElastic]
    (
        "Grow and shrink the pool with the queue between `minReplicas` and `maxReplicas` "
        "(docs/elastic.md); unset: the pool has `replicas` pods. With it, `replicas` (when given) "
        "is the pool's size when it is first created and must lie within the bounds; afterwards "
        "the live size is Slurm's, and `pulumi up` leaves it alone."
    )


class Partition(TypedDict, total=False):
    """A Slurm partition over some pools (all pools when `pools` is omitted)."""

    name: Required[str]
    (
        "Slurm's PartitionName: letters, digits, '_', '.' and '-', at most 64 characters; unique, "
        "and not `default` in any case."
    )
    pools: NotRequired[list[str]]
    """Names of the worker pools whose nodes make up the partition; omitted: every pool."""
    default: NotRequired[bool]
    (
        "Make this the default partition, for jobs that name none. At most one partition may set "
        "it; when none does, the first partition is the default. Default: false."
    )
    max_time: NotRequired[str]
    (
        "Slurm's MaxTime, the longest a job may run: `UNLIMITED`, `INFINITE`, or a Slurm time such "
        "as '60' (minutes), '12:00:00' or '7-00:00:00'. Default: `UNLIMITED`."
    )
    options: NotRequired[list[str]]
    (
        "Extra `Key=Value` options appended to the partition's line, one per item, checked against "
        "the partition options of the stack's Slurm version; PartitionName, Nodes, Default, "
        "MaxTime and State come from the fields above, and DisableRootJobs from "
        "`jail.allowRootJobs`: they are refused."
    )


class PopulateJail(TypedDict, total=False):
    """How the jail image's root filesystem gets into the jail volume."""

    image: NotRequired[str]
    (
        "Full, pinned reference of the image to copy; unset: the project's jail image "
        "(`images.jail`, else `<registry>/jail:<tag>`)."
    )
    add_newer_files: NotRequired[bool]
    (
        "Off: the copy happens once and a populated jail is left as it is. On: the copy runs again "
        "for each new image (and when this is turned on), adding only the files the jail lacks. "
        "Existing files are never overwritten or deleted. Default: false."
    )


class Jail(TypedDict, total=False):
    """The shared root filesystem every login session and job sees as `/`."""

    existing_claim: NotRequired[str]
    (
        "An existing ReadWriteMany claim in the cluster's namespace to use as the jail; then no "
        "claim is created and `storageClass` and `size` are unused."
    )
    storage_class: NotRequired[str]
    (
        "Storage class of the ReadWriteMany jail claim slurm-stack creates (an NFS or CephFS "
        "class, a cloud file store); required unless `existingClaim` is set."
    )
    size: NotRequired[str]
    """Size of the jail claim slurm-stack creates, a Kubernetes quantity. Default: `100Gi`."""
    populate: NotRequired[PopulateJail]
    """Which image's root filesystem is copied into the jail, and how."""
    submounts: NotRequired[list[Submount]]
    (
        "Volumes bound into the jail on every login and worker pod; a `pvc` one needs "
        "`existingClaim`."
    )
    allow_opt_out: NotRequired[bool]
    (
        "Let a job run on the worker pod's own filesystem with `srun`/`sbatch`/`salloc --no-jail`: "
        "for debugging a node, at the price of the isolation the jail gives. Off: `--no-jail` is "
        "an unknown option. Default: false."
    )
    allow_root_jobs: NotRequired[bool]
    (
        "Let root submit jobs. Root in a job is root in the jail (it can change any user's files "
        "there) but holds no capability beyond file and user administration. Off: Slurm refuses "
        "jobs from root (DisableRootJobs=YES). Default: false."
    )


class AccountingMode(StrEnum):
    """Values of `mode`."""

    EMBEDDED = "embedded"
    MARIADB_OPERATOR = "mariadb-operator"
    EXTERNAL = "external"


class EmbeddedDatabase(TypedDict, total=False):
    """A MariaDB StatefulSet created by slurm-stack (also the mariadb-operator CR's storage)."""

    volume: NotRequired[Volume]
    (
        "The database's data volume (default 20Gi): a ReadWriteOnce claim, protected and kept on "
        "delete, or with `mariadb-operator` the MariaDB resource's storage."
    )
    resources: NotRequired[Resources]
    (
        "Requests and limits of the MariaDB container (or the MariaDB resource's). The embedded "
        "server's InnoDB buffer pool is a quarter of its memory limit (else request)."
    )


class SecretKeyRef(TypedDict, total=False):
    """A key of an existing Kubernetes Secret in the cluster's namespace."""

    name: Required[str]
    """The Secret's name."""
    key: Required[str]
    """The key in the Secret whose value is used."""


class ExternalDatabase(TypedDict, total=False):
    """A MySQL/MariaDB server that slurm-stack does not manage."""

    host: NotRequired[str]
    """Host name or address of the database server; required with `mode: external`."""
    port: NotRequired[int]
    """The server's port. Default: 3306."""
    user: NotRequired[str]
    """The database user slurmdbd connects as (StorageUser). Default: `slurm`."""
    database: NotRequired[str]
    """The database slurmdbd uses (StorageLoc). Default: `slurm_acct_db`."""
    password_secret: NotRequired[SecretKeyRef]
    (
        "An existing Secret key holding the user's password; unset: the password comes from "
        "`pulumi config set --secret accountingDbPassword`, and one of the two is required."
    )


class Purge(TypedDict, total=False):
    """slurmdbd purge ages (Slurm time spans such as '12month'); unset keeps records forever."""

    jobs_after: NotRequired[str]
    (
        "slurmdbd's PurgeJobAfter: job records older than this are purged ('12month', '90days', "
        "'48hours'); unset: kept forever."
    )
    steps_after: NotRequired[str]
    """slurmdbd's PurgeStepAfter, for job step records; same form; unset: kept forever."""
    events_after: NotRequired[str]
    """slurmdbd's PurgeEventAfter, for node event records; same form; unset: kept forever."""
    archive: NotRequired[bool]
    (
        "Archive jobs, steps and events to `archiveVolume` (ArchiveJobs, ArchiveSteps, "
        "ArchiveEvents) before they are purged. Default: false."
    )
    archive_volume: NotRequired[Volume]
    (
        "The ReadWriteOnce claim slurmdbd archives into (default 20Gi), created only with "
        "`archive`; protected and kept on delete."
    )


class Accounting(TypedDict, total=False):
    """slurmdbd and its database."""

    enabled: NotRequired[bool]
    (
        "Run slurmdbd and record jobs in its database; then only users with a Slurm association "
        "may submit. Off: no slurmdbd, no database, no associations. Default: true."
    )
    mode: NotRequired[AccountingMode]
    (
        "Where the database runs. `embedded`: a MariaDB StatefulSet slurm-stack creates; "
        "`mariadb-operator`: a MariaDB resource for an installed mariadb-operator; `external`: a "
        "server slurm-stack does not manage (see `external`). Default: `embedded`."
    )
    embedded: NotRequired[EmbeddedDatabase]
    """Volume and resources of the database, for modes `embedded` and `mariadb-operator`."""
    external: NotRequired[ExternalDatabase]
    """The database server, for mode `external`."""
    purge: NotRequired[Purge]
    """When slurmdbd purges old records, and whether it archives them first."""
    resources: NotRequired[Resources]
    """Requests and limits of the slurmdbd container."""
    placement: NotRequired[Placement]
    """Node selector and tolerations of the slurmdbd pod and the embedded MariaDB pod."""


class QuickChecks(TypedDict, total=False):
    """Slurm's HealthCheckProgram on every worker."""

    enabled: NotRequired[bool]
    (
        "Run the quick checks as slurmd's HealthCheckProgram; a failing check drains the node with "
        "a `healthcheck:` reason. Default: true."
    )
    interval_seconds: NotRequired[int]
    """Seconds between runs on each node (HealthCheckInterval), 10-86400. Default: 300."""
    node_states: NotRequired[list[str]]
    (
        "Slurm's HealthCheckNodeState: in which node states the checks run (`ANY`: all), at least "
        "one. Default: `ANY`."
    )
    min_free_disk_percent: NotRequired[int]
    (
        "The disk check fails when the worker pod's `/tmp` or slurmd spool has less free space "
        "than this, in percent. Default: 5."
    )


class NcclBenchmark(TypedDict, total=False):
    """The periodic all_reduce_perf run that drains slow GPU nodes."""

    enabled: NotRequired[bool]
    ("Run the benchmark CronJob; unset: only when a pool has GPUs. `true` needs a pool with GPUs.")
    schedule: NotRequired[str]
    (
        "When the CronJob runs, a five-field cron schedule (the default: 03:00 every day). "
        "Default: `0 3 * * *`."
    )
    thresholds_gbps: NotRequired[dict[str, float]]
    (
        "Lowest acceptable average bus bandwidth of all_reduce_perf, in GB/s, by GPU type (a "
        "pool's `gpuType`); a node below it is drained. A map given replaces the defaults (a100 "
        "180, h100 350, h200 350, b200 600), and every GPU pool's type needs an entry."
    )
    min_bytes: NotRequired[str]
    (
        "Smallest message size all_reduce_perf tests (`-b`): a whole number with an optional K, M, "
        "G or T suffix, in powers of 1024. Default: `512M`."
    )
    max_bytes: NotRequired[str]
    (
        "Largest message size all_reduce_perf tests (`-e`), in the same form; at least `minBytes`. "
        "Default: `8G`."
    )


class DcgmDiagnostics(TypedDict, total=False):
    """NVIDIA DCGM diagnostics on GPU nodes: optional, for worker images that have DCGM (`dcgmi`
    and a host engine it reaches); the project's images do not (docs/gpu.md)."""

    quick: NotRequired[bool]
    (
        "Add `dcgmi diag -r 1` to the quick checks of GPU pools: a failed test, a timeout or a "
        "missing `dcgmi` drains the node with a `healthcheck: dcgm` reason. Default: false."
    )
    timeout_seconds: NotRequired[int]
    (
        "How long `dcgmi diag -r 1` may run, in seconds (5-3600); less than the quick checks' "
        "`intervalSeconds`. Default: 60."
    )
    periodic: NotRequired[bool]
    (
        "Run `dcgmi diag -r 3` in the NCCL benchmark's job, before all_reduce_perf, on each node "
        "it benchmarks: a failed test, a timeout or a `dcgmi` missing from the jail drains the "
        "node with a `healthcheck: nccl dcgm` reason. Needs the NCCL benchmark. Default: false."
    )
    periodic_timeout_seconds: NotRequired[int]
    (
        "How long `dcgmi diag -r 3` may run, in seconds (60-14400); the benchmark job's time limit "
        "grows by as much. Default: 3600."
    )


class HealthChecks(TypedDict, total=False):
    """Quick checks and the NCCL benchmark."""

    quick: NotRequired[QuickChecks]
    (
        "The checks slurmd runs on every worker: the jail, munge, free disk, and the GPUs of GPU "
        "pools."
    )
    nccl: NotRequired[NcclBenchmark]
    """The periodic NCCL bandwidth benchmark of idle GPU nodes."""
    dcgm: NotRequired[DcgmDiagnostics]
    (
        "DCGM diagnostics among the quick checks of GPU pools and in the NCCL benchmark's job (off "
        "by default)."
    )


class Cgroups(TypedDict, total=False):
    """Cgroup enforcement; when on, slurmd containers must run privileged (documented)."""

    enforce: NotRequired[bool]
    (
        "Confine jobs with Slurm's cgroup plugins (cores, memory, devices); slurmd pods then run "
        "privileged. Off: Slurm does not touch cgroups (proctrack/linuxproc). Default: false."
    )


class Topology(TypedDict, total=False):
    """Network topology for job placement: Slurm's topology/tree, with each pool's nodes on a
    leaf switch (`workerPools[].switch`) under one root switch."""

    root_switch: NotRequired[str]
    """The switch every pool's leaf switch hangs off; not a pool's switch. Default: `root`."""


class Directory(TypedDict, total=False):
    """Users and groups from an LDAP directory (RFC 2307: posixAccount, posixGroup). sssd beside
    slurmctld, every slurmd and every sshd resolves them, and so does every login session and
    job in the jail; their SSH keys come from the directory. `pulumi up` creates no directory
    users; a Slurm association for each is an admin's (docs/users.md)."""

    uri: Required[str]
    (
        "The server, `ldap://host[:port]` or `ldaps://host[:port]`; use ldaps:// for TLS (StartTLS "
        "is not used on ldap://)."
    )
    base_dn: Required[str]
    """The search base for users and groups, e.g. 'dc=example,dc=org'."""
    bind_dn: NotRequired[str]
    (
        "The DN to bind as, its password set with `pulumi config set --secret ldapBindPassword`; "
        "unset: bind anonymously."
    )
    ca_certificate: NotRequired[str]
    """A PEM CA certificate sssd uses to verify an ldaps:// server."""
    login_groups: NotRequired[list[str]]
    (
        "Groups whose members may log in over SSH with the keys the directory holds; empty: every "
        "directory user. Declared users are not affected."
    )
    ssh_public_key_attribute: NotRequired[str]
    (
        "The LDAP attribute that holds a user's SSH public keys (openssh-lpk's by default). "
        "Default: `sshPublicKey`."
    )


class NetworkPolicy(TypedDict, total=False):
    """NetworkPolicies (docs/deploy.md): the cluster's pods accept only the connections Slurm
    makes; login and worker pods reach anything but the cloud metadata address and the API
    server. Off for a network plugin that does not enforce them."""

    enabled: NotRequired[bool]
    (
        "Create the NetworkPolicies. Set false where the network plugin enforces none: that "
        "removes them and changes no pod. Default: true."
    )
    api_server_cidrs: NotRequired[list[str]]
    (
        "The API server's addresses as pods reach them, which login and worker pods may not "
        "connect to: the `kubernetes` Service's ClusterIP, the addresses in `kubectl get "
        "endpointslices -l kubernetes.io/service-name=kubernetes` and any public endpoint, each in "
        "CIDR form ('10.96.0.1/32'). NetworkPolicies match addresses only."
    )
    ssh_source_ranges: NotRequired[list[str]]
    (
        "CIDR ranges SSH may come from, as the login pods see it (the login Service keeps client "
        "addresses); empty: `login.service.loadBalancerSourceRanges`, and anywhere when both are."
    )


class ClusterMetrics(TypedDict, total=False):
    """The metrics exporter, what scrapes it and what shows it (docs/metrics.md)."""

    enabled: NotRequired[bool]
    (
        "Run the exporter: a Deployment that reads the cluster's state from Slurm's client "
        "commands (nodes, jobs, GPUs, drains, scheduler, slurmdbd, NCCL results) and serves it on "
        "port 9341 of the `<name>-metrics` Service. Default: true."
    )
    prometheus_operator: NotRequired[bool]
    (
        "Also create a ServiceMonitor for the exporter (and slurmctld's own endpoint with "
        "`controller.metrics`) and a PrometheusRule with the cluster's alerts. They are custom "
        "resources of the Prometheus Operator (`monitoring.coreos.com/v1`), whose definitions must "
        "be installed first: off by default, as `pulumi up` fails on a kind the API server lacks. "
        "Default: false."
    )
    dashboard: NotRequired[bool]
    (
        "With the exporter: a ConfigMap holding a Grafana dashboard of its metrics, labelled "
        "`grafana_dashboard` (value 1) for Grafana's dashboard sidecar. Default: true."
    )
    scrape_interval_seconds: NotRequired[int]
    (
        "How often the ServiceMonitor has the exporter scraped, 10-600 seconds; each scrape runs "
        "sinfo, squeue, sdiag (and sacctmgr and sacct with accounting) once. Default: 60."
    )
    resources: NotRequired[Resources]
    """Requests and limits of the exporter container."""


class SiteScript(TypedDict, total=False):
    """One script of the site's, shipped with the cluster's Slurm configuration."""

    name: Required[str]
    (
        "Names the file (with its hook: `prolog-<name>`); unique within its hook; lower-case "
        "letters, digits, '-' and '_'."
    )
    content: Required[str]
    (
        "The script, starting with '#!' and its interpreter (`#!/bin/sh`, `#!/bin/bash`, "
        "`#!/usr/bin/python3`: what the image it runs in has)."
    )


class SiteFile(TypedDict, total=False):
    """A read-only file for the site's scripts: in the worker and controller pods at
    `/etc/slurm-stack/site-files/<name>`."""

    name: Required[str]
    """The file's name; letters, digits, '.', '-' and '_'."""
    content: Required[str]
    """Its text."""


class SiteScripts(TypedDict, total=False):
    """The site's own Prolog and Epilog scripts and Lua plugins (docs/site-scripts.md). A change
    rolls out as a slurm.conf change does: no worker restarts."""

    prolog: NotRequired[list[SiteScript]]
    (
        "Prolog scripts: each node of a job runs them in this order, as root in its worker pod "
        "(not in the jail), before the job's first step there. One that fails stops the rest, "
        "drains the node ('Prolog error') and requeues the job held."
    )
    epilog: NotRequired[list[SiteScript]]
    (
        "Epilog scripts: each node of a job runs them in this order, as root in its worker pod, "
        "when the job ends, after slurm-stack's own Epilog (which removes the job's /tmp and "
        "leftover processes). One that fails stops the rest and drains the node ('Epilog error')."
    )
    prolog_slurmctld: NotRequired[list[SiteScript]]
    (
        "PrologSlurmctld scripts: slurmctld runs them in this order in the controller pod, as the "
        "SlurmUser, when it allocates a job."
    )
    epilog_slurmctld: NotRequired[list[SiteScript]]
    (
        "EpilogSlurmctld scripts: slurmctld runs them in this order in the controller pod, as the "
        "SlurmUser, when a job ends."
    )
    files: NotRequired[list[SiteFile]]
    (
        "Read-only files the Prolog, Epilog and slurmctld scripts read, at "
        "`/etc/slurm-stack/site-files/<name>` in the worker and controller pods (not in the jail). "
        "A change reaches running pods in place, as the kubelet refreshes a ConfigMap volume "
        "(within about a minute); adding the first file or removing the last one changes the pods' "
        "templates, so the workers are replaced as their update policy says."
    )
    task_prolog: NotRequired[SiteScript]
    (
        "TaskProlog: run as the job's user before each task, in the jail; a line it prints as "
        "`export NAME=value` sets that variable in the task's environment. Slurm 25.11 or newer "
        "(configless slurmctld sends it to the nodes from 25.11)."
    )
    task_epilog: NotRequired[SiteScript]
    """TaskEpilog: run as the job's user after each task ends, in the jail. Slurm 25.11 or newer."""
    job_submit_lua: NotRequired[str]
    (
        "job_submit.lua for JobSubmitPlugins=lua: slurmctld calls it on every submission and "
        "update; its error message reaches the user at sbatch. Checked as Lua 5.1."
    )
    cli_filter_lua: NotRequired[str]
    (
        "cli_filter.lua for CliFilterPlugins=lua: the client commands (sbatch, srun, salloc) on "
        "the login nodes run it before they send a request. Checked as Lua 5.1."
    )


class RestApi(TypedDict, total=False):
    """Slurm's REST API (slurmrestd) with JSON Web Tokens: a Deployment and its Service
    (docs/rest-api.md)."""

    enabled: NotRequired[bool]
    (
        "Run slurmrestd and accept tokens (`auth/jwt` beside the cluster's `auth`): users get one "
        "with `scontrol token` on a login node and send it with each request. Default: false."
    )
    replicas: NotRequired[int]
    """slurmrestd pods behind the `<name>-rest` Service; each keeps no state. Default: 1."""
    key_generation: NotRequired[int]
    (
        "The generation of the key that signs tokens. Raise it by one to replace the key: every "
        "token issued before stops working, and slurmctld and slurmdbd restart onto the new key. "
        "Default: 1."
    )
    resources: NotRequired[Resources]
    """Requests and limits of each slurmrestd container."""
    placement: NotRequired[Placement]
    """Where slurmrestd pods may run: node selector, tolerations, affinity."""


class ContainersCache(StrEnum):
    """Values of `cache`."""

    NODE = "node"
    JAIL = "jail"


class Containers(TypedDict, total=False):
    """Container jobs: `srun --container-image=IMAGE` runs a step's tasks in an OCI image instead
    of the jail, as the job's user, with the jail's /home (docs/containers.md)."""

    enabled: NotRequired[bool]
    (
        "Offer `--container-image` to srun, sbatch and salloc. Worker nodes pull images with "
        "skopeo and unpack them with umoci; jobs never need a privilege to run one. Default: "
        "false."
    )
    cache: NotRequired[ContainersCache]
    (
        "Where unpacked images are kept: `node`, in each worker pod (an emptyDir: each node pulls "
        "an image once per pod); `jail`, on the jail's volume under "
        "/var/cache/slurm-stack/containers (readable by root only), so an image is pulled once for "
        "every node that shares it. Default: `node`."
    )
    insecure_registries: NotRequired[list[str]]
    (
        "Registries (`host` or `host:port`) pulled from over plain HTTP without TLS, such as a "
        "registry inside the cluster's network."
    )


class NodeState(TypedDict, total=False):
    """Kubernetes node state reaches Slurm: a small controller drains the Slurm nodes of a
    cordoned or NotReady Kubernetes node and resumes them when it recovers
    (docs/node-state.md)."""

    enabled: NotRequired[bool]
    (
        "Run the `<name>-node-state` Deployment. It is the only pod with a Kubernetes API token: "
        "its ServiceAccount may list nodes (a ClusterRole) and the cluster's pods (a Role). "
        "Default: false."
    )
    interval_seconds: NotRequired[int]
    """How often it compares the Kubernetes nodes with the Slurm nodes. Default: 10."""


class OutsideControllerServiceType(StrEnum):
    """Values of `type`."""

    LOAD_BALANCER = "LoadBalancer"


class OutsideControllerService(TypedDict, total=False):
    """How outside hosts reach slurmctld: one Service per controller replica."""

    type: NotRequired[OutsideControllerServiceType]
    (
        "`LoadBalancer`, admitting only `externalNodes.addressRanges` and keeping the hosts' own "
        "addresses (externalTrafficPolicy Local), which slurmctld connects back to. A NodePort "
        "cannot serve SlurmctldPort (6817), which every node's configuration names. Default: "
        "`LoadBalancer`."
    )
    annotations: NotRequired[dict[str, str]]
    """Annotations of the Services, such as a cloud's internal load balancer setting."""


class OutsideDrainPolicy(StrEnum):
    """Values of `policy`."""

    REQUEUE = "requeue"
    CANCEL = "cancel"
    WAIT = "wait"


class OutsideDrain(TypedDict, total=False):
    """What happens to an outside host's running jobs when its slurmd stops."""

    policy: NotRequired[OutsideDrainPolicy]
    (
        "What happens to jobs still running `waitSeconds` after the host's slurmd began to stop: "
        "`requeue` (batch jobs run again elsewhere, the rest are cancelled with a reason), "
        "`cancel`, or `wait` (no deadline: slurmd stops when the last job has ended). Default: "
        "`requeue`."
    )
    wait_seconds: NotRequired[int]
    (
        "Seconds running jobs get to end once slurmd began to stop (0 to 604800); unset: 300. Not "
        "valid with policy `wait`."
    )


class OutsidePool(TypedDict, total=False):
    """Machines outside Kubernetes that run slurmd and join the cluster (docs/hybrid.md): each
    host is one dynamic Slurm node named by its host name, with the pool's feature."""

    name: Required[str]
    (
        "The pool's name: its NodeSet and Slurm feature, which `partitions[].pools` names as it "
        "names a worker pool's; unique among `workerPools` and these pools."
    )
    hosts: Required[list[str]]
    (
        "The hosts' names, each its Slurm node name (`hostname -s` on the host, or the name the "
        "join script is given); unique in the stack, and not a name the cluster's pods take."
    )
    features: NotRequired[list[str]]
    """Slurm features of the hosts besides the pool's name, for `--constraint`."""
    cpus: NotRequired[int]
    """CPUs each host offers to jobs; unset: what slurmd finds on the host."""
    memory: NotRequired[str]
    (
        "Memory each host offers to jobs (its RealMemory), a Kubernetes quantity such as '500Gi'; "
        "unset: what slurmd finds on the host."
    )
    weight: NotRequired[int]
    """Slurm node Weight of the hosts: Slurm allocates nodes of lower weight first. Default: 1."""
    drain: NotRequired[OutsideDrain]
    """What happens to running jobs when a host's slurmd stops (the join script's stop hook)."""


class ExternalNodes(TypedDict, total=False):
    """Slurm nodes outside Kubernetes (docs/hybrid.md): hosts that run Debian's slurmd of the
    cluster's version and join configless through a Service in front of slurmctld."""

    address_ranges: Required[list[str]]
    (
        "CIDR ranges the outside hosts' addresses are in: the load balancer and the "
        "NetworkPolicies admit these and no other outside address."
    )
    controller_service: NotRequired[OutsideControllerService]
    """The Services in front of slurmctld that outside hosts connect to."""
    pools: Required[list[OutsidePool]]
    """Pools of outside hosts."""


class SlurmClusterArgs(TypedDict, total=False):
    """Arguments of a SlurmCluster: the cluster spec, as under `slurm-stack:cluster` in stack
    config, and the passwords (secrets)."""

    name: Required[str]
    (
        "The cluster's name: Slurm's ClusterName and the prefix of every object's name; a DNS "
        "label of at most 30 characters."
    )
    namespace: NotRequired[str]
    (
        "The Kubernetes namespace every object goes into; it must exist, and may not be one of "
        "Kubernetes' own (a name starting with 'kube-'). Default: `slurm`."
    )
    slurm_version: NotRequired[SlurmClusterSlurmVersion]
    (
        "The Slurm major release, '26.05' or '24.11' (quoted in YAML); it picks the default image "
        "tag and which slurm.conf keys are valid. Default: `26.05`."
    )
    auth: NotRequired[SlurmClusterAuth]
    (
        "How Slurm components authenticate: `munge` (munged beside each Slurm process) or `slurm` "
        "(Slurm's own auth/slurm with a generated slurm.key). Default: `munge`."
    )
    images: NotRequired[Images]
    """Container images: registry, tag, pull settings and per-component references."""
    labels: NotRequired[dict[str, str]]
    (
        "Labels added to every object and pod; slurm-stack's own labels win on a clash. Values are "
        "strings."
    )
    annotations: NotRequired[dict[str, str]]
    """Annotations added to every object (not to pods); values are strings."""
    controller: NotRequired[Controller]
    """slurmctld: resources, state volume, scheduling and extra slurm.conf lines."""
    login: NotRequired[Login]
    """Login pods, their SSH Service and the declared users."""
    worker_pools: Required[list[WorkerPool]]
    """Pools of slurmd pods, at least one; each pod is one dynamic Slurm node."""
    partitions: NotRequired[list[Partition]]
    """Slurm partitions; empty: one default partition, `main`, over every pool."""
    jail: Required[Jail]
    (
        "The shared root filesystem of every login session and job (required: it needs "
        "`storageClass` or `existingClaim`)."
    )
    accounting: NotRequired[Accounting]
    """slurmdbd and its database."""
    health_checks: NotRequired[HealthChecks]
    """Node health checks and the NCCL benchmark."""
    cgroups: NotRequired[Cgroups]
    """Slurm's cgroup enforcement."""
    topology: NotRequired[Topology]
    (
        "Network topology for placing jobs that span nodes (topology/tree; Slurm 25.05 or newer, "
        "where dynamic nodes join their switch as they register); unset: none (Slurm's flat "
        "topology)."
    )
    directory: NotRequired[Directory]
    (
        "An LDAP directory whose users and groups can log in and run jobs beside the declared "
        "users; unset: none."
    )
    network_policy: NotRequired[NetworkPolicy]
    """The NetworkPolicies that limit connections to and from the cluster's pods."""
    metrics: NotRequired[ClusterMetrics]
    """The metrics exporter, ServiceMonitors, alerts and dashboard."""
    site_scripts: NotRequired[SiteScripts]
    """The site's Prolog/Epilog scripts and job_submit/cli_filter Lua plugins."""
    rest_api: NotRequired[RestApi]
    """Slurm's REST API with token authentication (off by default)."""
    containers: NotRequired[Containers]
    """Jobs in OCI images with `--container-image` (off by default)."""
    node_state: NotRequired[NodeState]
    """Cordoned or NotReady Kubernetes nodes drain their Slurm nodes (off by default)."""
    external_nodes: NotRequired[ExternalNodes]
    (
        "Slurm nodes on machines outside Kubernetes, and how they reach the cluster "
        "(docs/hybrid.md); unset: every node is a worker pod."
    )
    db_password: NotRequired[pulumi.Input[str]]
    (
        "Password of the external accounting database's user (a secret): needed with "
        "`accounting.mode: external` unless `accounting.external.passwordSecret` names a Secret. "
        "The other modes generate one."
    )
    ldap_bind_password: NotRequired[pulumi.Input[str]]
    """Password of `directory.bindDn` (a secret): needed when, and only when, a bind DN is set."""
    container_registry_auth: NotRequired[pulumi.Input[str]]
    (
        "Credentials for pulling container jobs' images (a secret): a Docker config JSON with an "
        "`auths` entry per registry (docs/containers.md); only with `containers.enabled`."
    )


# The SDK's analyzer takes a class docstring as written: one line each in the schema.
for _type in [v for v in list(globals().values()) if getattr(v, "__module__", "") == __name__]:
    if isinstance(_type, type):
        _type.__doc__ = " ".join((_type.__doc__ or "").split())
