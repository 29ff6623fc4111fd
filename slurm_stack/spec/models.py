"""The cluster spec: one validated, defaults-filled model tree read from stack config.

Field names are snake_case in Python and camelCase in `Pulumi.<stack>.yaml` (aliases).
Rules about one field live here as validators, rules that relate a model's own fields as
relations (`slurm_stack.spec.relations`), and rules that relate several parts of the tree
in `slurm_stack.spec.rules`: all of them run in one pass, so every error is reported.
"""

import hashlib
import ipaddress
import math
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic.alias_generators import to_camel

from slurm_stack import paths
from slurm_stack.spec.errors import KeyProblem
from slurm_stack.spec.fields import (
    AbsolutePath,
    Cidr,
    ClusterName,
    ClusterNamespace,
    CronSchedule,
    DnsLabel,
    DnsSubdomain,
    GresType,
    HostDirectory,
    ImageRef,
    ImageRegistry,
    ImageTag,
    MessageSize,
    PartitionOption,
    QualifiedName,
    Quantity,
    SecretDataKey,
    SlurmKeyValue,
    SshdLine,
    SshPublicKey,
    label_value,
    message_size_bytes,
    setting_value,
)
from slurm_stack.spec.lua import lua_syntax_problem
from slurm_stack.spec.quantity import parse_quantity, to_mebibytes
from slurm_stack.spec.relations import relation
from slurm_stack.spec.text import FREE_TEXT, MULTILINE, SCRIPT
from slurm_stack.spec.versions import DEFAULT_VERSION, SlurmVersion

IMAGE_REVISION = "0.1.0"
"""Revision of the project's images; default tags are `<slurmVersion>-<IMAGE_REVISION>`."""

MARIADB_IMAGE = "docker.io/library/mariadb:11.8.3"


def _scalar_as_text(value: object) -> object:
    """`true`/`42` as text: `pulumi config set --path` and YAML make them bool/int, but
    Kubernetes label, annotation and node selector values are strings. Anything else (a
    mapping, a list, null) passes through for the strict string check to refuse."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    return value


KubeText = Annotated[str, BeforeValidator(_scalar_as_text)]
"""A string value in a Kubernetes string map; booleans and numbers are taken as their text."""
LabelMap = dict[QualifiedName, Annotated[KubeText, AfterValidator(label_value)]]
"""Labels and node selectors: keys and values as Kubernetes takes them."""
AnnotationMap = dict[QualifiedName, Annotated[KubeText, Field(json_schema_extra=FREE_TEXT)]]
"""Annotations: keys as Kubernetes takes them, any text as values, lines included (as
Kubernetes takes them too; slurm-stack writes them into no file)."""


class SpecModel(BaseModel):
    """Base for every spec model: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        # A string literal right after a field is its description (the package schema's).
        use_attribute_docstrings=True,
        extra="forbid",
        frozen=True,
        # "yes" is not True and "2" is not 2: relational rules read the same values.
        strict=True,
    )


class Toleration(SpecModel):
    """A Kubernetes toleration."""

    key: str | None = None
    """The taint key this toleration matches; unset with operator `Exists` matches every taint."""
    operator: Literal["Equal", "Exists"] = "Equal"
    """`Equal`: the taint's value must equal `value`; `Exists`: any value matches."""
    value: str | None = None
    """The taint value to match with operator `Equal`."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint effect to match; unset matches every effect."""
    toleration_seconds: int | None = None
    """For effect `NoExecute`: seconds the pod stays on a node after the taint appears; unset:
    it stays."""

    # Kubernetes' rules for a toleration (ValidateTolerations), each at the key to change.
    @relation("operator", "key")
    def _no_key_needs_exists(self) -> Iterator[KeyProblem]:
        if self.operator == "Equal" and not self.key:
            yield KeyProblem(
                "a toleration without a key matches every taint only with Exists", "operator"
            )

    @relation("value", "operator")
    def _exists_takes_no_value(self) -> Iterator[KeyProblem]:
        if self.value and self.operator == "Exists":
            yield KeyProblem("operator Exists matches any value: leave value out", "value")

    @relation("tolerationSeconds", "effect")
    def _seconds_only_for_no_execute(self) -> Iterator[KeyProblem]:
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            yield KeyProblem(
                "tolerationSeconds applies only to effect NoExecute", "tolerationSeconds"
            )


class Placement(SpecModel):
    """Where a component's pods may run."""

    node_selector: LabelMap = Field(default_factory=dict)
    """Node labels the pods' node must have (the PodSpec's nodeSelector); values are strings,
    and a boolean or number is taken as its text. Empty: any node."""
    tolerations: list[Toleration] = Field(default_factory=list)
    """Taints the pods tolerate (the PodSpec's tolerations)."""


class Resources(SpecModel):
    """Container resource requests and limits (Kubernetes quantities)."""

    requests: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity] = Field(
        default_factory=dict
    )
    """What the container asks for: `cpu`, `memory` and `ephemeral-storage`, each a Kubernetes
    quantity ('500m', '2Gi'). A resource left out has no request."""
    limits: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity] = Field(
        default_factory=dict
    )
    """The most the container may use, with the same keys as `requests`; a resource left out
    has no limit. A request above its limit is refused."""


class Volume(SpecModel):
    """A persistent volume to create: size and storage class (cluster default if unset)."""

    size: Quantity
    """The storage the claim requests, a Kubernetes quantity ('20Gi')."""
    storage_class: DnsSubdomain | None = None
    """The claim's storageClassName; unset: the Kubernetes cluster's default storage class."""


class Images(SpecModel):
    """Container images. Each component defaults to `<registry>/<component>:<tag>`; a full
    reference under the component's key replaces that, and pins it by digest with
    `name@sha256:<hex>` or `name:tag@sha256:<hex>` (docs/deploy.md)."""

    registry: ImageRegistry = "ghcr.io/slurm-stack"
    """Registry and repository path of the project's images, without tag or digest: images are
    `<registry>/<component>:<tag>`."""
    tag: ImageTag | None = None
    """The tag of every project image; unset: `<slurmVersion>-<image revision>` (e.g.
    '26.05-0.1.0'). Not 'latest', and no digest: pin a digest per component instead."""
    pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    """imagePullPolicy of every container slurm-stack creates."""
    pull_secrets: list[DnsLabel] = Field(default_factory=list)
    """Names of existing Secrets in the cluster's namespace, the imagePullSecrets of the pods
    that run the project's images."""
    controller: ImageRef | None = None
    """Full reference of the slurmctld image; unset: `<registry>/controller:<tag>`."""
    worker: ImageRef | None = None
    """Full reference of the slurmd image; unset: `<registry>/worker:<tag>`."""
    login: ImageRef | None = None
    """Full reference of the login (sshd) image; unset: `<registry>/login:<tag>`."""
    accounting: ImageRef | None = None
    """Full reference of the slurmdbd image; unset: `<registry>/accounting:<tag>`."""
    munge: ImageRef | None = None
    """Full reference of the munged sidecar image (with `auth: slurm`, the image of the init
    container that copies slurm.key); unset: `<registry>/munge:<tag>`."""
    jail: ImageRef | None = None
    """Full reference of the image whose root filesystem becomes the jail, unless
    `jail.populate.image` names another; unset: `<registry>/jail:<tag>`."""
    ops: ImageRef | None = None
    """Full reference of the image of the cluster's Jobs (reconfigure, users, NCCL benchmark);
    unset: `<registry>/ops:<tag>`."""
    rest: ImageRef | None = None
    """Full reference of the slurmrestd image, used with `restApi`; unset:
    `<registry>/rest:<tag>`."""
    sssd: ImageRef | None = None
    """Full reference of the sssd sidecar image, used with a `directory`; unset:
    `<registry>/sssd:<tag>`."""
    mariadb: ImageRef = MARIADB_IMAGE
    """Full reference of the MariaDB image of the embedded accounting database (`accounting.mode:
    embedded`)."""


SchedulerParameter = Annotated[
    str,
    Field(
        pattern=r"^[a-z][a-z0-9_]*(=[^,\s=]+)?$",
        description="One SchedulerParameters item: `name` or `name=value`, no comma.",
    ),
]
"""One item of slurm.conf's comma-separated SchedulerParameters."""


class Scheduler(SpecModel):
    """slurmctld scheduling: backfill with GPU-friendly defaults."""

    type: Literal["sched/backfill", "sched/builtin"] = "sched/backfill"
    """slurm.conf's SchedulerType."""
    parameters: list[SchedulerParameter] = Field(
        default_factory=lambda: ["bf_continue", "bf_max_job_test=1000", "bf_window=10080"]
    )
    """slurm.conf's SchedulerParameters, one option per item; a list given replaces the
    defaults. On Slurm 26.05 `requeue_delay=10` is added unless an item sets requeue_delay."""
    select_type_parameters: Literal[
        "CR_Core_Memory", "CR_CPU_Memory", "CR_Core", "CR_CPU", "CR_Socket_Memory"
    ] = "CR_Core_Memory"
    """slurm.conf's SelectTypeParameters for select/cons_tres: which resources are consumable
    (cores, CPUs or sockets, with or without memory)."""


class Metrics(SpecModel):
    """slurmctld's OpenMetrics endpoint (Slurm 25.11 and newer)."""

    enabled: bool = False
    """Serve `/metrics` on slurmctld's port (MetricsType=metrics/openmetrics); the
    NetworkPolicies then admit pods of any namespace to that port. Refused with slurmVersion
    24.11."""


class Controller(SpecModel):
    """slurmctld: one replica, or a primary and a backup, whose state lives on a protected
    PVC."""

    replicas: int = Field(default=1, ge=1, le=2)
    """1: one slurmctld, restarted by its StatefulSet. 2: a backup slurmctld beside it
    (`SlurmctldHost` twice, in order), sharing StateSaveLocation on a ReadWriteMany claim,
    which takes over when the primary has not answered for `takeoverAfterSeconds`
    (docs/controller-ha.md). Cannot be changed once the stack is deployed: the state claim's
    access mode is fixed at its creation."""
    takeover_after_seconds: int | None = Field(default=None, ge=5, le=65533)
    """With `replicas: 2`, slurm.conf's SlurmctldTimeout: how long the backup waits for the
    primary to answer before it takes control. Unset: Slurm's default, 120."""

    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "1", "memory": "2Gi"}, limits={"memory": "8Gi"}
        )
    )
    """Requests and limits of the slurmctld container."""
    state_volume: Volume = Field(default_factory=lambda: Volume(size="10Gi"))
    """The claim holding StateSaveLocation, so jobs survive a controller restart; protected
    and kept on delete. Default size 10Gi. ReadWriteOnce, or ReadWriteMany with `replicas: 2`
    (then `storageClass` must name a class that provides it)."""
    max_node_count: int = Field(default=1024, ge=1, le=65000)
    """slurm.conf's MaxNodeCount: how many dynamic nodes may register. The replicas of all
    worker pools together must not exceed it."""
    scheduler: Scheduler = Field(default_factory=Scheduler)
    """Scheduler type and parameters."""
    metrics: Metrics = Field(default_factory=Metrics)
    """slurmctld's metrics endpoint."""
    slurm_conf_extra: list[SlurmKeyValue] = Field(default_factory=list)
    """Extra `Key=Value` lines for slurm.conf; a key set here replaces slurm-stack's default for
    it. Keys slurm-stack owns (ClusterName, NodeSet ...) and keys the Slurm version lacks are
    refused."""
    placement: Placement = Field(default_factory=Placement)
    """Node selector and tolerations of the slurmctld pod."""

    @relation("replicas", "stateVolume.storageClass", "takeoverAfterSeconds")
    def _backup_needs_shared_state(self) -> Iterator[KeyProblem]:
        if self.replicas == 2 and self.state_volume.storage_class is None:
            yield KeyProblem(
                "a backup controller shares StateSaveLocation with the primary: set "
                "stateVolume.storageClass to a ReadWriteMany class (an NFS or CephFS one, a "
                "cloud file store); the cluster's default class is often ReadWriteOnce only",
                "stateVolume",
                "storageClass",
            )
        if self.replicas == 1 and self.takeover_after_seconds is not None:
            yield KeyProblem(
                "takeoverAfterSeconds is how long a backup controller waits; there is none "
                "with replicas: 1 (set replicas: 2, or remove it)",
                "takeoverAfterSeconds",
            )


class LoginService(SpecModel):
    """How SSH reaches the login pods."""

    type: Literal["LoadBalancer", "NodePort", "ClusterIP"] = "LoadBalancer"
    """The login Service's type. `ClusterIP` is reachable only from inside the Kubernetes
    cluster; use `NodePort` where no load balancer is available."""
    port: int = Field(default=22, ge=1, le=65535)
    """The Service port clients connect to; sshd itself listens on 22 in the pod."""
    node_port: int | None = Field(default=None, ge=30000, le=32767)
    """A fixed node port (30000-32767) for `NodePort` or `LoadBalancer`; unset: Kubernetes
    picks one. Not valid with `ClusterIP`."""
    annotations: AnnotationMap = Field(default_factory=dict)
    """Annotations of the login Service (e.g. a cloud provider's load balancer settings), added
    to the cluster's `annotations`; values are strings."""
    load_balancer_source_ranges: list[Cidr] = Field(default_factory=list)
    """CIDR ranges the load balancer admits (`LoadBalancer` only); empty: any address. Also
    the SSH NetworkPolicy's sources when `networkPolicy.sshSourceRanges` is empty."""

    @relation("nodePort", "type")
    def _node_port_needs_a_node_port_type(self) -> Iterator[KeyProblem]:
        if self.node_port is not None and self.type == "ClusterIP":
            yield KeyProblem(
                "nodePort is only valid with type NodePort or LoadBalancer", "nodePort"
            )

    @relation("loadBalancerSourceRanges", "type")
    def _source_ranges_need_a_load_balancer(self) -> Iterator[KeyProblem]:
        if self.load_balancer_source_ranges and self.type != "LoadBalancer":
            yield KeyProblem(
                "loadBalancerSourceRanges is only valid with type LoadBalancer",
                "loadBalancerSourceRanges",
            )


# Ids a declared user or group may have: below 1000 are the jail image's system accounts,
# 60000 and up are reserved (Debian's global ids; slurm is 64030, munge 64031, nobody 65534).
FIRST_USER_ID = 1000
LAST_USER_ID = 59999
# Ids derived from a name when none is declared: a hash of the name alone, so they do not
# change when the list is reordered, in a range above the ids admins usually hand out.
DERIVED_ID_BASE = 10000
DERIVED_ID_SPAN = LAST_USER_ID + 1 - DERIVED_ID_BASE


def derived_id(name: str) -> int:
    """The uid (and private gid) of a user, or the gid of a group, declared without one."""
    digest = hashlib.sha256(name.encode()).digest()
    return DERIVED_ID_BASE + int.from_bytes(digest[:8], "big") % DERIVED_ID_SPAN


def _check_id(value: int | None) -> int | None:
    if value is not None and not FIRST_USER_ID <= value <= LAST_USER_ID:
        raise ValueError(
            f"{value} is not a user id slurm-stack may assign: use {FIRST_USER_ID}-{LAST_USER_ID} "
            "(ids below belong to the jail image's system accounts; 60000 and up are reserved, "
            "slurm is 64030), or leave it out to derive one from the name"
        )
    return value


AccountName = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_.-]{0,63}$")]
UnixName = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")]


class LoginUser(SpecModel):
    """A user account in the jail, with its SSH keys and Slurm association.

    `pulumi up` creates the account (fixed uid/gid, home directory created once, shell,
    groups) and its association; removing the user from the list locks the account and
    stops it submitting, and keeps its home directory.
    """

    name: UnixName
    """Login name: lower-case letters, digits, '_' and '-', starting with a letter or '_', at
    most 32 characters; unique, and not `root`."""
    authorized_keys: list[SshPublicKey] = Field(min_length=1)
    """OpenSSH public keys that may log in as this user (at least one)."""
    uid: int | None = None
    """The user's uid, 1000-59999; unset: a number in 10000-59999 derived from the name, so it
    does not change when the list is reordered."""
    gid: int | None = None
    """The gid of the user's own group (named after the user), 1000-59999; unset: the uid."""
    groups: list[UnixName] = Field(default_factory=list)
    """Supplementary groups, exactly these: a missing group is created with a gid derived from
    its name; a declared user's name means that user's own group."""
    shell: AbsolutePath = "/bin/bash"
    """Login shell, an absolute path that must exist in the jail."""
    account: AccountName | None = None
    """Slurm account of the user's association, created when missing (with accounting only);
    unset: `login.defaultAccount`, else the cluster's name."""
    default_qos: AccountName | None = None
    """Slurm QOS made the default of the user's association, created when missing (with
    accounting only); unset: none is set."""

    @field_validator("uid", "gid")
    @classmethod
    def _ids_in_range(cls, value: int | None) -> int | None:
        return _check_id(value)

    @field_validator("groups")
    @classmethod
    def _distinct_groups(cls, groups: list[str]) -> list[str]:
        if duplicates := sorted({name for name in groups if groups.count(name) > 1}):
            raise ValueError(f"group names must be unique: {', '.join(duplicates)} repeated")
        return groups

    @property
    def effective_uid(self) -> int:
        """The declared uid, or one derived from the name."""
        return self.uid if self.uid is not None else derived_id(self.name)

    @property
    def effective_gid(self) -> int:
        """The gid of the user's own group (named after the user): declared, or the uid."""
        return self.gid if self.gid is not None else self.effective_uid


class Login(SpecModel):
    """sshd login pods whose sessions are chrooted into the jail."""

    replicas: int = Field(default=1, ge=0, le=32)
    """Number of login pods, 0-32."""
    service: LoginService = Field(default_factory=LoginService)
    """The Service through which SSH reaches the login pods."""
    root_authorized_keys: list[SshPublicKey] = Field(default_factory=list)
    """OpenSSH public keys that may log in as root (a session chrooted into the jail, like any
    other); empty: root cannot log in over SSH."""
    users: list[LoginUser] = Field(default_factory=list)
    """Declared users: accounts in the jail with their keys and Slurm associations. Removing
    one locks the account and keeps its home directory."""
    default_account: AccountName | None = None
    """Slurm account of declared users who name none; unset: the cluster's name."""
    sshd_extra: list[SshdLine] = Field(default_factory=list)
    """Extra `Keyword value` lines for sshd_config, keywords of the login image's OpenSSH; a
    keyword set here replaces slurm-stack's default for it. Keywords that decide who logs in,
    how keys are found or where sessions run (ChrootDirectory, HostKey, Port, the key
    handling, AllowUsers, Match, Include ...) are refused, and so is a value the image's sshd
    would refuse to start with (`MaxAuthTries abc`, `X11Forwarding maybe`)."""
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "500m", "memory": "1Gi"}, limits={"memory": "4Gi"}
        )
    )
    """Requests and limits of the sshd container; an `ephemeral-storage` limit bounds what
    login sessions write to `/tmp` on the node's disk."""
    placement: Placement = Field(default_factory=Placement)
    """Node selector and tolerations of the login pods."""

    @field_validator("users")
    @classmethod
    def _distinct_users(cls, users: list[LoginUser]) -> list[LoginUser]:
        names = [user.name for user in users]
        if "root" in names:
            raise ValueError("root's keys go in rootAuthorizedKeys, not users")
        if duplicates := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"user names must be unique: {', '.join(duplicates)} repeated")
        return users


SubmountName = Annotated[DnsLabel, Field(max_length=50)]

# What a submount may not cover in the jail: its own system directories, and what the jail
# plugin binds into every job (slurm_stack/render/slurm.py, plugstack.conf).
_JAIL_RESERVED = {
    "/proc": "the job's process interface",
    "/sys": "the kernel interface",
    "/dev": "the job's devices (and its private /dev/shm)",
    "/etc": "the jail's users, groups and configuration",
    "/run": "munge's and Slurm's sockets, and this node's GPU driver files",
    "/tmp": "each job's private /tmp",
    paths.SLURMD_SPOOL_DIR: "slurmd's spool",
    paths.PROJECT_LIB_DIR: "slurm-stack's own programs",
    "/var/lib/sss": "sssd's sockets for directory users",
}
_JAIL_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/var", "/boot", "/root", "/opt")


def submount_path(value: str) -> str:
    """A mount path in the jail that hides nothing the jail needs."""
    for reserved, what in _JAIL_RESERVED.items():
        if (
            value == reserved
            or value.startswith(reserved + "/")
            or reserved.startswith(value + "/")
        ):
            raise ValueError(
                f"{value!r} would cover {reserved}, {what}: mount it elsewhere, such as "
                "'/scratch' or '/data'"
            )
    if value in _JAIL_SYSTEM:
        raise ValueError(
            f"{value!r} is a system directory of the jail: mount below it or elsewhere, such "
            "as '/opt/site' or '/data'"
        )
    return value


SubmountPath = Annotated[AbsolutePath, AfterValidator(submount_path)]
NODE_LOCAL_HOME = (
    "a node-local volume at or under /home would hide the users' home directories (on the "
    "jail, shared by every node) on this node only; a shared claim (pvc with existingClaim) may "
    "be mounted there"
)


def _under_home(path: str) -> bool:
    return path == "/home" or path.startswith("/home/")


class _NodeLocal:
    """A submount whose content lives on one Kubernetes node (a mixin: the fields are the
    submount model's)."""

    if TYPE_CHECKING:  # for the type checker only: the field is the submount model's
        mount_path: str

    @relation("mountPath")
    def _not_over_home(self) -> Iterator[KeyProblem]:
        if _under_home(self.mount_path):
            yield KeyProblem(NODE_LOCAL_HOME, "mountPath")


class EmptyDirSubmount(_NodeLocal, SpecModel):
    """Node-local scratch on the pod's node disk."""

    type: Literal["emptyDir"]
    """`emptyDir`: scratch space on the node's disk, emptied when the pod goes."""
    name: SubmountName
    """Name of the submount, a DNS label of at most 50 characters (the pod volume is
    `sm-<name>`); unique among a pool's and the jail's submounts."""
    mount_path: SubmountPath
    """Where the submount appears in the jail, an absolute path other than '/'; unique among a
    pool's and the jail's submounts."""
    size_limit: Quantity | None = None
    """The emptyDir's sizeLimit, a Kubernetes quantity; unset: no limit of its own."""


class MemorySubmount(_NodeLocal, SpecModel):
    """An in-memory (tmpfs) submount; its size counts against the pod's memory."""

    type: Literal["memory"]
    """`memory`: a tmpfs (an emptyDir with medium Memory)."""
    name: SubmountName
    """Name of the submount, a DNS label of at most 50 characters (the pod volume is
    `sm-<name>`); unique among a pool's and the jail's submounts."""
    mount_path: SubmountPath
    """Where the submount appears in the jail, an absolute path other than '/'; unique among a
    pool's and the jail's submounts."""
    size_limit: Quantity
    """Size of the tmpfs, a Kubernetes quantity. It counts against the pod's memory, and a
    pool's in-memory submounts are taken out of its nodes' RealMemory."""


class HostPathSubmount(_NodeLocal, SpecModel):
    """A directory of the Kubernetes node (local NVMe, caches), never one of the node's own
    system directories (`/etc`, `/run`, the kubelet's and container runtime's state …)."""

    type: Literal["hostPath"]
    """`hostPath`: a directory of the Kubernetes node."""
    name: SubmountName
    """Name of the submount, a DNS label of at most 50 characters (the pod volume is
    `sm-<name>`); unique among a pool's and the jail's submounts."""
    mount_path: SubmountPath
    """Where the submount appears in the jail, an absolute path other than '/'; unique among a
    pool's and the jail's submounts."""
    host_path: HostDirectory
    """The node's directory, created when missing; not '/', and not one of the node's system
    directories (`/etc`, `/proc`, `/var/lib/kubelet` ...), under one, or above one."""
    read_only: bool = False
    """Mount it read-only."""


class PvcSubmount(SpecModel):
    """A persistent volume: an existing claim (shared) or one new claim per node (template)."""

    type: Literal["pvc"]
    """`pvc`: a PersistentVolumeClaim."""
    name: SubmountName
    """Name of the submount, a DNS label of at most 50 characters (the pod volume is
    `sm-<name>`); unique among a pool's and the jail's submounts."""
    mount_path: SubmountPath
    """Where the submount appears in the jail, an absolute path other than '/'; unique among a
    pool's and the jail's submounts."""
    existing_claim: DnsLabel | None = None
    """An existing claim in the cluster's namespace, shared by every pod that mounts it. Give
    exactly one of `existingClaim` and `size`."""
    size: Quantity | None = None
    """Size of a new ReadWriteOnce claim for each node of the pool, a Kubernetes quantity.
    Only in a pool's submounts: the jail's need `existingClaim`."""
    storage_class: DnsSubdomain | None = None
    """storageClassName of the per-node claims (`size`); unset: the Kubernetes cluster's
    default class. Unused with `existingClaim`."""
    read_only: bool = False
    """Mount it read-only."""

    @relation("existingClaim", "size")
    def _claim_or_template(self) -> Iterator[KeyProblem]:
        if (self.existing_claim is None) == (self.size is None):
            yield KeyProblem(
                "give exactly one of existingClaim (use a claim that exists) or size "
                "(a new claim per node)",
                "size" if self.size is not None else "existingClaim",
            )

    @relation("mountPath", "existingClaim")
    def _per_node_claim_not_over_home(self) -> Iterator[KeyProblem]:
        if self.existing_claim is None and _under_home(self.mount_path):
            yield KeyProblem(NODE_LOCAL_HOME, "mountPath")


Submount = Annotated[
    EmptyDirSubmount | MemorySubmount | HostPathSubmount | PvcSubmount,
    Field(discriminator="type"),
]


DEFAULT_DRAIN_WAIT_SECONDS = 300
PERCENT = re.compile(r"(100|[1-9]?[0-9])%")
# Kubernetes needs a number for a pod's grace period; `policy: wait` takes a year.
WAIT_POLICY_GRACE_SECONDS = 365 * 86400
# Share of a pool's memory limit offered to jobs; the rest is left to slurmd, sshd and the OS.
JOB_MEMORY_SHARE = 0.95


class _JobDeadline(SpecModel):
    """A policy for the jobs still running on a node whose pod stops, and how long they get
    before it acts (PoolDrain, PoolUpdate)."""

    policy: Literal["requeue", "cancel", "wait"]
    wait_seconds: int | None = Field(default=None, ge=0, le=7 * 86400)

    @relation("policy", "waitSeconds")
    def _no_deadline_with_wait(self) -> Iterator[KeyProblem]:
        if self.policy == "wait" and self.wait_seconds is not None:
            yield KeyProblem(
                "waitSeconds is a deadline and policy 'wait' has none: drop waitSeconds, or "
                "use policy 'requeue' or 'cancel'",
                "waitSeconds",
            )

    @property
    def effective_wait_seconds(self) -> int | None:
        """Seconds running jobs get before the policy acts; None: as long as they run."""
        if self.policy == "wait":
            return None
        return DEFAULT_DRAIN_WAIT_SECONDS if self.wait_seconds is None else self.wait_seconds


class PoolDrain(_JobDeadline):
    """What happens to a node's running jobs when its pod stops (scale-down, eviction)."""

    policy: Literal["requeue", "cancel", "wait"] = "requeue"
    """What happens to jobs still running `waitSeconds` after the pod began to stop.
    `requeue`: batch jobs are requeued to run again elsewhere, the rest cancelled with a
    reason; `cancel`: all are cancelled; `wait`: no deadline, the pod stops when the last
    job has ended."""
    wait_seconds: int | None = Field(default=None, ge=0, le=7 * 86400)
    """Seconds running jobs get to end once the pod begins to stop (0 to 604800); unset: 300.
    Not valid with policy `wait`. The pod's termination grace period is the longer of this
    and `update.waitSeconds`, plus 60."""
    max_unavailable: int | str = 1
    """Pods of the pool a Kubernetes node drain may evict at once (the pool's
    PodDisruptionBudget): a number of pods or a percentage such as '25%'. With 0 a drain waits
    for the pool's pods forever."""

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _pods_or_percent(cls, value: object) -> object:
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        if not valid and not (isinstance(value, str) and PERCENT.fullmatch(value)):
            raise ValueError(
                f"give a number of pods (0 or more) or a percentage such as '25%' (got {value!r})"
            )
        return value


class PoolUpdate(_JobDeadline):
    """What happens to a node's running jobs when a change to the pool's pod template
    (image, resources, env, submounts, these settings) replaces its pod. Kubernetes replaces
    the pool's pods one at a time, highest ordinal first, each once the one before is Ready
    again; each node drains first and its pod stops only when its jobs are done (or the
    policy acted on them)."""

    policy: Literal["requeue", "cancel", "wait"] = "wait"
    """What happens to jobs still running `waitSeconds` after the node began to drain for an
    update. `wait` (default): no deadline, the pod is replaced when its last job has ended;
    `requeue`: batch jobs are requeued to run again elsewhere, the rest cancelled with a
    reason; `cancel`: all are cancelled."""
    wait_seconds: int | None = Field(default=None, ge=0, le=7 * 86400)
    """Seconds running jobs get to end once their node began to drain for an update (0 to
    604800); unset: 300. Not valid with policy `wait`."""


class PoolElastic(SpecModel):
    """Slurm's power saving sizes the pool between two bounds: a node idle for `idleSeconds`
    is given back (its pod removed), and a job that needs more nodes starts their pods. The
    pool's Slurm nodes exist (powered down, `idle~` in sinfo) while no pod runs them
    (docs/elastic.md)."""

    min_replicas: int = Field(default=0, ge=0, le=10000)
    """Nodes that always run, the pool's lowest ordinals (0-10000); never given back."""
    max_replicas: int = Field(ge=1, le=10000)
    """The most nodes the pool grows to (1-10000); Slurm knows this many nodes of the pool, and
    they count against `controller.maxNodeCount`."""
    idle_seconds: int = Field(default=600, ge=5, le=7 * 86400)
    """Seconds a node stays idle before its pod is given back (Slurm's SuspendTime for the
    pool's nodes), 5 to 604800."""
    start_timeout_seconds: int = Field(default=600, ge=20, le=86400)
    """Seconds a node may take from the request to start its pod until its slurmd registers
    (Slurm's ResumeTimeout for the pool's nodes), 20 to 86400: image pull and start. A node that
    takes longer is marked down with a reason naming its pod, and its jobs queue again."""

    @relation("minReplicas", "maxReplicas")
    def _min_not_above_max(self) -> Iterator[KeyProblem]:
        if self.min_replicas > self.max_replicas:
            yield KeyProblem(
                f"{self.min_replicas} is more than maxReplicas ({self.max_replicas}): give at "
                f"most {self.max_replicas}, or raise maxReplicas",
                "minReplicas",
            )


class WorkerPool(SpecModel):
    """A pool of slurmd pods; each pod is one dynamic Slurm node with the pool's feature."""

    renamed_keys: ClassVar[dict[str, str]] = {
        "drainTimeoutSeconds": "drain.waitSeconds (and drain.policy says what happens to the "
        "jobs still running then)"
    }

    name: DnsLabel
    """The pool's name, a DNS label, unique among pools: its NodeSet and Slurm feature, and its
    nodes are `<cluster>-<name>-<ordinal>`. Names of the cluster's other workloads are
    reserved, and `<cluster>-<name>` must fit 52 characters."""
    replicas: int = Field(default=1, ge=0, le=10000)
    """Number of slurmd pods, each one Slurm node (0-10000). All pools' replicas together must
    not exceed `controller.maxNodeCount`."""
    resources: Resources = Field(
        default_factory=lambda: Resources(requests={"cpu": "1", "memory": "1Gi"})
    )
    """Requests and limits of the slurmd container. The memory limit (else the request) sets
    the node's RealMemory (95 %, less in-memory submounts) and a whole-number cpu limit its
    CPUs, unless `nodeConfExtra` sets them."""
    gpus: int = Field(default=0, ge=0, le=16)
    """NVIDIA GPUs per node (0-16), requested as `nvidia.com/gpu` and offered as the `gpu`
    GRES; a GPU pool's pods tolerate the `nvidia.com/gpu` taint and run the GPU checks."""
    gpu_type: GresType | None = None
    """GRES type of the GPUs ('h100', 'a100_80g'); needs `gpus` above 0. While the NCCL
    benchmark runs, a GPU pool needs one with a threshold in `healthChecks.nccl.thresholdsGbps`."""
    features: list[DnsLabel] = Field(default_factory=list)
    """Slurm features of the pool's nodes besides the pool's name, which they always have; not
    another pool's name."""
    weight: int = Field(default=1, ge=0, le=65533)
    """Slurm node Weight of the pool's nodes: Slurm allocates nodes of lower weight first."""
    def_mem_per_cpu: int | None = Field(default=None, ge=1)
    """Memory (MiB) per allocated CPU that a job on this pool's nodes gets when it asks no
    `--mem`: the pool's share in the DefMemPerCPU of its partitions, which take the smallest
    share among their pools. Unset: the node's RealMemory divided by its CPUs. At most the
    node's RealMemory."""
    node_conf_extra: list[SlurmKeyValue] = Field(default_factory=list)
    """Extra `Key=Value` settings of the pool's dynamic nodes (`slurmd -Z --conf`), one per
    item, such as RealMemory or CPUs, checked against the node options of the stack's Slurm
    version; keys that come from the pool's fields or the pod (Feature, Gres, GresConf,
    Weight, NodeName, NodeHostname, NodeAddr, Port) are refused."""
    submounts: list[Submount] = Field(default_factory=list)
    """Volumes bound into the jail of the jobs on this pool's nodes only (node-local scratch,
    memory, node directories, claims)."""
    shm_size: Quantity = "16Gi"
    """Size limit of the worker pod's in-memory `/dev/shm`, which holds each job's private
    `/dev/shm`; a Kubernetes quantity."""
    drain: PoolDrain = Field(default_factory=PoolDrain)
    """What happens to running jobs when a pod of the pool stops (scale-down, eviction, pod
    deletion), and how many pods a Kubernetes node drain may evict at once."""
    update: PoolUpdate = Field(default_factory=PoolUpdate)
    """What happens to running jobs when a change to the pool's pod template replaces its
    pods; by default the pods wait for them."""
    placement: Placement = Field(default_factory=Placement)
    """Node selector and tolerations of the pool's pods."""
    switch: DnsLabel | None = None
    """The leaf network switch the pool's nodes hang off, under `topology.rootSwitch`: each
    node joins it as it registers (`slurmd --conf Topology=`), and jobs that span nodes are
    placed on as few switches as they fit (`--switches` bounds it). Required when `topology`
    is set; pools may share a switch."""
    switch_label: QualifiedName | None = None
    """Instead of `switch`: a Kubernetes node label whose value names the leaf switch of each
    node, so one pool's nodes spread over the switches their Kubernetes nodes are cabled to.
    The node-state controller (`nodeState.enabled`) reads it and moves the Slurm node there;
    a node registers drained and takes jobs once it is on its switch. A node without the
    label, or with one that is no switch name, stays drained with a `k8s:` reason."""
    label_features: dict[DnsLabel, QualifiedName] = Field(default_factory=dict)
    """Kubernetes node labels as Slurm features: `{zone: topology.kubernetes.io/zone}` gives
    a node on a Kubernetes node labelled `zone=a` the feature `k8s-zone-a`, for
    `--constraint=k8s-zone-a`. The node-state controller (`nodeState.enabled`) keeps them in
    step with the labels; a node without the label has no such feature."""
    sshd: bool = False
    """sshd on each node of the pool, for users who debug a running job: a user with a job on
    the node may ssh in from a login node and lands in that job (its cgroup, chrooted into the
    jail); anyone else is refused (pam_slurm_adopt). Needs `cgroups.enforce: true`
    (docs/users.md)."""

    elastic: PoolElastic | None = None
    """Grow and shrink the pool with the queue between `minReplicas` and `maxReplicas`
    (docs/elastic.md); unset: the pool has `replicas` pods. With it, `replicas` (when given) is
    the pool's size when it is first created and must lie within the bounds; afterwards the
    live size is Slurm's, and `pulumi up` leaves it alone."""

    @relation("replicas", "elastic.minReplicas", "elastic.maxReplicas")
    def _replicas_within_elastic_bounds(self) -> Iterator[KeyProblem]:
        elastic = self.elastic
        if elastic is None or "replicas" not in self.model_fields_set:
            return
        if not elastic.min_replicas <= self.replicas <= elastic.max_replicas:
            yield KeyProblem(
                f"{self.replicas} is outside the pool's elastic bounds "
                f"({elastic.min_replicas}-{elastic.max_replicas}): give a size within them, or "
                "drop replicas (the pool then starts at minReplicas)",
                "replicas",
            )

    @relation("elastic.maxReplicas", "resources.limits.cpu", "resources.limits.memory",
              "resources.requests.memory", "nodeConfExtra")  # fmt: skip
    def _elastic_nodes_are_known_before_their_pods(self) -> Iterator[KeyProblem]:
        """An elastic pool's nodes are declared to Slurm before any pod runs them, so their
        CPUs and memory come from the stack, not from a running slurmd."""
        if self.elastic is None:
            return
        if self.node_value("CPUs") is None:
            yield KeyProblem(
                "an elastic pool's nodes are declared to Slurm before their pods run, so Slurm "
                "must know their CPUs: set resources.limits.cpu to a whole number of CPUs, or "
                "CPUs=<n> in nodeConfExtra",
                "resources",
                "limits",
                "cpu",
            )
        if self.node_value("RealMemory") is None:
            yield KeyProblem(
                "an elastic pool's nodes are declared to Slurm before their pods run, so Slurm "
                "must know their memory: set resources.requests.memory (or limits.memory), or "
                "RealMemory=<MiB> in nodeConfExtra",
                "resources",
                "requests",
                "memory",
            )

    @relation("elastic.maxReplicas", "switchLabel")
    def _elastic_pools_name_their_switch(self) -> Iterator[KeyProblem]:
        if self.elastic is not None and self.switch_label is not None:
            yield KeyProblem(
                "an elastic pool's nodes are declared to Slurm before their pods run, when no "
                "Kubernetes node (and so no switch label) is known yet: name the pool's leaf "
                "switch in `switch` instead",
                "switchLabel",
            )

    @property
    def initial_replicas(self) -> int:
        """The StatefulSet's size when it is created: `replicas` as given, else an elastic
        pool's minReplicas."""
        if self.elastic is not None and "replicas" not in self.model_fields_set:
            return self.elastic.min_replicas
        return self.replicas

    @property
    def most_replicas(self) -> int:
        """The most nodes the pool may have: maxReplicas when elastic, else replicas."""
        return self.elastic.max_replicas if self.elastic is not None else self.replicas

    @relation(
        "resources.limits.memory",
        "resources.requests.memory",
        "submounts[*].type",
        "submounts[*].sizeLimit",
    )
    def _ram_disks_leave_memory(self) -> Iterator[KeyProblem]:
        """In-memory submounts count against the pod's memory: together they must leave
        some for jobs (Slurm's RealMemory is what is left)."""
        memory = self.resources.limits.get("memory") or self.resources.requests.get("memory")
        if not memory:
            return
        room = parse_quantity(memory)
        used = Decimal(0)
        for i, submount in enumerate(self.submounts):
            if isinstance(submount, MemorySubmount):
                used += parse_quantity(submount.size_limit)
                if used >= room:
                    yield KeyProblem(
                        f"the pool's in-memory submounts take {used / 2**20:.0f}Mi of its "
                        f"{memory} memory, leaving nothing for jobs: make them smaller or "
                        "give the pool more memory",
                        "submounts",
                        i,
                        "sizeLimit",
                    )
                    return

    @relation(
        "defMemPerCpu",
        "resources.limits.memory",
        "resources.requests.memory",
        "submounts[*].type",
        "submounts[*].sizeLimit",
        "nodeConfExtra",
    )
    def _def_mem_fits_the_node(self) -> Iterator[KeyProblem]:
        if self.def_mem_per_cpu is None:
            return
        memory = self.node_value("RealMemory")
        if memory is not None and self.def_mem_per_cpu > memory:
            yield KeyProblem(
                f"{self.def_mem_per_cpu} MiB per CPU is more than the node's RealMemory "
                f"({memory} MiB): no job without --mem could start; give at most {memory}",
                "defMemPerCpu",
            )

    @property
    def real_memory(self) -> int | None:
        """RealMemory (MiB) from the pod's memory limit (or request), less in-memory
        submounts; None without either."""
        memory = self.resources.limits.get("memory") or self.resources.requests.get("memory")
        if not memory:
            return None
        ram_disks = sum(
            to_mebibytes(s.size_limit) for s in self.submounts if isinstance(s, MemorySubmount)
        )
        return max(int(to_mebibytes(memory) * JOB_MEMORY_SHARE) - ram_disks, 1)

    @property
    def cpus(self) -> int | None:
        """CPUs from a whole-number CPU limit; None: slurmd counts the node's."""
        cpu = self.resources.limits.get("cpu")
        if not cpu:
            return None
        cpus = parse_quantity(cpu)
        return int(cpus) if cpus == int(cpus) and cpus > 0 else None

    def node_value(self, key: str) -> int | None:
        """RealMemory or CPUs as the pool's nodes register them (nodeConfExtra wins)."""
        value = setting_value(self.node_conf_extra, key)
        if value is not None:
            return int(value) if value.isdigit() else None
        return self.real_memory if key == "RealMemory" else self.cpus

    @relation("gpuType", "gpus")
    def _gpu_type_needs_gpus(self) -> Iterator[KeyProblem]:
        if self.gpu_type is not None and self.gpus == 0:
            yield KeyProblem(
                f"gpuType {self.gpu_type!r} is set but gpus is 0: set gpus to 1-16", "gpus"
            )


class Partition(SpecModel):
    """A Slurm partition over some pools (all pools when `pools` is omitted)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")]
    """Slurm's PartitionName: letters, digits, '_', '.' and '-', at most 64 characters; unique,
    and not `default` in any case."""
    pools: list[str] | None = Field(default=None, min_length=1)
    """Names of the worker pools whose nodes make up the partition; omitted: every pool."""
    default: bool = False
    """Make this the default partition, for jobs that name none. At most one partition may
    set it; when none does, the first partition is the default."""
    max_time: Annotated[str, Field(pattern=r"^(UNLIMITED|INFINITE|\d+(-\d+)?(:\d+){0,2})$")] = (
        "UNLIMITED"
    )
    """Slurm's MaxTime, the longest a job may run: `UNLIMITED`, `INFINITE`, or a Slurm time such
    as '60' (minutes), '12:00:00' or '7-00:00:00'."""
    options: list[PartitionOption] = Field(default_factory=list)
    """Extra `Key=Value` options appended to the partition's line, one per item, checked
    against the partition options of the stack's Slurm version; PartitionName, Nodes,
    Default, MaxTime and State come from the fields above, and DisableRootJobs from
    `jail.allowRootJobs`: they are refused."""

    @field_validator("name")
    @classmethod
    def _not_default(cls, name: str) -> str:
        if name.lower() == "default":
            raise ValueError(
                "'DEFAULT' (any case) sets defaults for all partitions in Slurm; pick another name"
            )
        return name


class PopulateJail(SpecModel):
    """How the jail image's root filesystem gets into the jail volume."""

    image: ImageRef | None = None
    """Full, pinned reference of the image to copy; unset: the project's jail image
    (`images.jail`, else `<registry>/jail:<tag>`)."""
    add_newer_files: bool = False
    """Off: the copy happens once and a populated jail is left as it is. On: the copy runs
    again for each new image (and when this is turned on), adding only the files the jail
    lacks. Existing files are never overwritten or deleted."""


class Jail(SpecModel):
    """The shared root filesystem every login session and job sees as `/`."""

    existing_claim: DnsLabel | None = None
    """An existing ReadWriteMany claim in the cluster's namespace to use as the jail; then no
    claim is created and `storageClass` and `size` are unused."""
    storage_class: DnsSubdomain | None = None
    """Storage class of the ReadWriteMany jail claim slurm-stack creates (an NFS or CephFS
    class, a cloud file store); required unless `existingClaim` is set."""
    size: Quantity = "100Gi"
    """Size of the jail claim slurm-stack creates, a Kubernetes quantity."""
    populate: PopulateJail = Field(default_factory=PopulateJail)
    """Which image's root filesystem is copied into the jail, and how."""
    submounts: list[Submount] = Field(default_factory=list)
    """Volumes bound into the jail on every login and worker pod; a `pvc` one needs
    `existingClaim`."""
    allow_opt_out: bool = False
    """Let a job run on the worker pod's own filesystem with `srun`/`sbatch`/`salloc
    --no-jail`: for debugging a node, at the price of the isolation the jail gives. Off:
    `--no-jail` is an unknown option."""
    allow_root_jobs: bool = False
    """Let root submit jobs. Root in a job is root in the jail (it can change any user's files
    there) but holds no capability beyond file and user administration. Off: Slurm refuses
    jobs from root (DisableRootJobs=YES)."""

    @relation("existingClaim", "storageClass")
    def _claim_source(self) -> Iterator[KeyProblem]:
        if self.existing_claim is None and self.storage_class is None:
            yield KeyProblem(
                "the jail needs a ReadWriteMany volume: set storageClass (an RWX class such as "
                "an NFS or CephFS one) or existingClaim (an RWX claim that exists)",
                "storageClass",
            )


class SecretKeyRef(SpecModel):
    """A key of an existing Kubernetes Secret in the cluster's namespace."""

    name: DnsLabel
    """The Secret's name."""
    key: SecretDataKey
    """The key in the Secret whose value is used."""


def database_host(value: str) -> str:
    """A host name or IP address, without a port: slurmdbd.conf takes the port apart."""
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if ":" in value:
        raise ValueError(f"{value!r}: give the host only, and the port in external.port")
    labels = value.split(".")
    if len(value) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{value!r} is not a host name or IP address (example: 'db.example.com')")
    return value


_HOST_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?")
# Written into slurmdbd.conf, whose parser ends a value at whitespace and starts a comment at
# '#' (a second `Key=Value` on the same line would be read as its own setting).
DatabaseName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_$-]{1,64}$")]
DatabaseUser = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.$@-]{1,80}$")]


class ExternalDatabase(SpecModel):
    """A MySQL/MariaDB server that slurm-stack does not manage."""

    host: Annotated[str, AfterValidator(database_host)] | None = None
    """Host name or address of the database server; required with `mode: external`."""
    port: int = Field(default=3306, ge=1, le=65535)
    """The server's port."""
    user: DatabaseUser = "slurm"
    """The database user slurmdbd connects as (StorageUser)."""
    database: DatabaseName = "slurm_acct_db"
    """The database slurmdbd uses (StorageLoc)."""
    password_secret: SecretKeyRef | None = None
    """An existing Secret key holding the user's password; unset: the password comes from
    `pulumi config set --secret accountingDbPassword`, and one of the two is required."""


class EmbeddedDatabase(SpecModel):
    """A MariaDB StatefulSet created by slurm-stack (also the mariadb-operator CR's storage)."""

    volume: Volume = Field(default_factory=lambda: Volume(size="20Gi"))
    """The database's data volume (default 20Gi): a ReadWriteOnce claim, protected and kept on
    delete, or with `mariadb-operator` the MariaDB resource's storage."""
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "500m", "memory": "1Gi"}, limits={"memory": "4Gi"}
        )
    )
    """Requests and limits of the MariaDB container (or the MariaDB resource's). The embedded
    server's InnoDB buffer pool is a quarter of its memory limit (else request)."""


class Purge(SpecModel):
    """slurmdbd purge ages (Slurm time spans such as '12month'); unset keeps records forever."""

    jobs_after: Annotated[str, Field(pattern=r"^\d+(hour|day|month)s?$")] | None = None
    """slurmdbd's PurgeJobAfter: job records older than this are purged ('12month', '90days',
    '48hours'); unset: kept forever."""
    steps_after: Annotated[str, Field(pattern=r"^\d+(hour|day|month)s?$")] | None = None
    """slurmdbd's PurgeStepAfter, for job step records; same form; unset: kept forever."""
    events_after: Annotated[str, Field(pattern=r"^\d+(hour|day|month)s?$")] | None = None
    """slurmdbd's PurgeEventAfter, for node event records; same form; unset: kept forever."""
    archive: bool = False
    """Archive jobs, steps and events to `archiveVolume` (ArchiveJobs, ArchiveSteps,
    ArchiveEvents) before they are purged."""
    archive_volume: Volume = Field(default_factory=lambda: Volume(size="20Gi"))
    """The ReadWriteOnce claim slurmdbd archives into (default 20Gi), created only with
    `archive`; protected and kept on delete."""


class Accounting(SpecModel):
    """slurmdbd and its database."""

    enabled: bool = True
    """Run slurmdbd and record jobs in its database; then only users with a Slurm association
    may submit. Off: no slurmdbd, no database, no associations."""
    mode: Literal["embedded", "mariadb-operator", "external"] = "embedded"
    """Where the database runs. `embedded`: a MariaDB StatefulSet slurm-stack creates;
    `mariadb-operator`: a MariaDB resource for an installed mariadb-operator; `external`: a
    server slurm-stack does not manage (see `external`)."""
    embedded: EmbeddedDatabase = Field(default_factory=EmbeddedDatabase)
    """Volume and resources of the database, for modes `embedded` and `mariadb-operator`."""
    external: ExternalDatabase = Field(default_factory=ExternalDatabase)
    """The database server, for mode `external`."""
    purge: Purge = Field(default_factory=Purge)
    """When slurmdbd purges old records, and whether it archives them first."""
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "250m", "memory": "512Mi"}, limits={"memory": "2Gi"}
        )
    )
    """Requests and limits of the slurmdbd container."""
    placement: Placement = Field(default_factory=Placement)
    """Node selector and tolerations of the slurmdbd pod and the embedded MariaDB pod."""

    @relation("enabled", "mode", "external.host")
    def _external_needs_host(self) -> Iterator[KeyProblem]:
        if self.enabled and self.mode == "external" and not self.external.host:
            yield KeyProblem(
                "mode 'external' needs external.host (the database server's name)",
                "external",
                "host",
            )

    @relation("mode", "external.host")
    def _host_only_for_external(self) -> Iterator[KeyProblem]:
        if self.mode != "external" and self.external.host is not None:
            yield KeyProblem(
                f"external.host is used only with mode 'external' (mode is {self.mode!r}): "
                "remove it, or set mode: external",
                "external",
                "host",
            )


HealthCheckNodeState = Literal[
    "ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE", "START_ONLY"
]
"""A value of Slurm's HealthCheckNodeState."""


def _all_node_states() -> list[HealthCheckNodeState]:
    return ["ANY"]


class QuickChecks(SpecModel):
    """Slurm's HealthCheckProgram on every worker."""

    enabled: bool = True
    """Run the quick checks as slurmd's HealthCheckProgram; a failing check drains the node
    with a `healthcheck:` reason."""
    interval_seconds: int = Field(default=300, ge=10, le=86400)
    """Seconds between runs on each node (HealthCheckInterval), 10-86400."""
    node_states: list[HealthCheckNodeState] = Field(default_factory=_all_node_states, min_length=1)
    """Slurm's HealthCheckNodeState: in which node states the checks run (`ANY`: all), at least
    one."""
    min_free_disk_percent: int = Field(default=5, ge=0, lt=100)
    """The disk check fails when the worker pod's `/tmp` or slurmd spool has less free space
    than this, in percent."""


class NcclBenchmark(SpecModel):
    """The periodic all_reduce_perf run that drains slow GPU nodes."""

    enabled: bool | None = None
    """Run the benchmark CronJob; unset: only when a pool has GPUs. `true` needs a pool with
    GPUs."""
    schedule: CronSchedule = "0 3 * * *"
    """When the CronJob runs, a five-field cron schedule (the default: 03:00 every day)."""
    thresholds_gbps: dict[GresType, Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default_factory=lambda: {"a100": 180.0, "h100": 350.0, "h200": 350.0, "b200": 600.0}
    )
    """Lowest acceptable average bus bandwidth of all_reduce_perf, in GB/s, by GPU type (a pool's
    `gpuType`); a node below it is drained. A map given replaces the defaults (a100 180, h100
    350, h200 350, b200 600), and every GPU pool's type needs an entry."""

    @field_validator("thresholds_gbps")
    @classmethod
    def _one_threshold_per_gpu_type(cls, thresholds: dict[str, float]) -> dict[str, float]:
        # The benchmark's verdict reads GPU types case-insensitively (healthchecks nccl.py).
        seen: dict[str, str] = {}
        for key in thresholds:
            if key.lower() in seen:
                raise KeyProblem(
                    f"{seen[key.lower()]!r} and {key!r} name the same GPU type (case is ignored)",
                    key,
                )
            seen[key.lower()] = key
        return thresholds

    min_bytes: MessageSize = "512M"
    """Smallest message size all_reduce_perf tests (`-b`): a whole number with an optional K,
    M, G or T suffix, in powers of 1024."""
    max_bytes: MessageSize = "8G"
    """Largest message size all_reduce_perf tests (`-e`), in the same form; at least
    `minBytes`."""

    @relation("minBytes", "maxBytes")
    def _sizes_in_order(self) -> Iterator[KeyProblem]:
        if message_size_bytes(self.min_bytes) > message_size_bytes(self.max_bytes):
            yield KeyProblem(
                f"minBytes {self.min_bytes!r} is larger than maxBytes {self.max_bytes!r}: "
                "all_reduce_perf sweeps from minBytes up to maxBytes",
                "minBytes",
            )


class DcgmDiagnostics(SpecModel):
    """NVIDIA DCGM diagnostics on GPU nodes: optional, for worker images that have DCGM
    (`dcgmi` and a host engine it reaches); the project's images do not (docs/gpu.md)."""

    quick: bool = False
    """Add `dcgmi diag -r 1` to the quick checks of GPU pools: a failed test, a timeout or a
    missing `dcgmi` drains the node with a `healthcheck: dcgm` reason."""
    timeout_seconds: int = Field(default=60, ge=5, le=3600)
    """How long `dcgmi diag -r 1` may run, in seconds (5-3600); less than the quick checks'
    `intervalSeconds`."""
    periodic: bool = False
    """Run `dcgmi diag -r 3` in the NCCL benchmark's job, before all_reduce_perf, on each node
    it benchmarks: a failed test, a timeout or a `dcgmi` missing from the jail drains the node
    with a `healthcheck: nccl dcgm` reason. Needs the NCCL benchmark."""
    periodic_timeout_seconds: int = Field(default=3600, ge=60, le=14400)
    """How long `dcgmi diag -r 3` may run, in seconds (60-14400); the benchmark job's time limit
    grows by as much."""


class HealthChecks(SpecModel):
    """Quick checks and the NCCL benchmark."""

    quick: QuickChecks = Field(default_factory=QuickChecks)
    """The checks slurmd runs on every worker: the jail, munge, free disk, and the GPUs of GPU
    pools."""
    nccl: NcclBenchmark = Field(default_factory=NcclBenchmark)
    """The periodic NCCL bandwidth benchmark of idle GPU nodes."""
    dcgm: DcgmDiagnostics = Field(default_factory=DcgmDiagnostics)
    """DCGM diagnostics among the quick checks of GPU pools and in the NCCL benchmark's job (off
    by default)."""

    @relation("dcgm.quick", "quick.enabled")
    def _dcgm_runs_with_the_quick_checks(self) -> Iterator[KeyProblem]:
        if self.dcgm.quick and not self.quick.enabled:
            yield KeyProblem(
                "dcgm.quick runs among the quick checks, which are off: set "
                "quick.enabled: true, or dcgm.quick: false",
                "dcgm.quick",
            )

    @relation("dcgm.periodic", "nccl.enabled")
    def _periodic_dcgm_runs_in_the_benchmark_job(self) -> Iterator[KeyProblem]:
        if self.dcgm.periodic and self.nccl.enabled is False:
            yield KeyProblem(
                "dcgm.periodic runs in the NCCL benchmark's job, which is off: remove "
                "nccl.enabled: false, or set dcgm.periodic: false",
                "dcgm.periodic",
            )

    @relation("dcgm.timeoutSeconds", "quick.intervalSeconds")
    def _dcgm_ends_before_the_next_run(self) -> Iterator[KeyProblem]:
        if self.dcgm.quick and self.dcgm.timeout_seconds >= self.quick.interval_seconds:
            yield KeyProblem(
                f"dcgm.timeoutSeconds {self.dcgm.timeout_seconds} must be less than "
                f"quick.intervalSeconds {self.quick.interval_seconds}: the diagnostic runs "
                "at every quick check",
                "dcgm.timeoutSeconds",
            )


class ClusterMetrics(SpecModel):
    """The metrics exporter, what scrapes it and what shows it (docs/metrics.md)."""

    enabled: bool = True
    """Run the exporter: a Deployment that reads the cluster's state from Slurm's client
    commands (nodes, jobs, GPUs, drains, scheduler, slurmdbd, NCCL results) and serves it on
    port 9341 of the `<name>-metrics` Service."""
    prometheus_operator: bool = False
    """Also create a ServiceMonitor for the exporter (and slurmctld's own endpoint with
    `controller.metrics`) and a PrometheusRule with the cluster's alerts. They are custom
    resources of the Prometheus Operator (`monitoring.coreos.com/v1`), whose definitions must
    be installed first: off by default, as `pulumi up` fails on a kind the API server lacks."""
    dashboard: bool = True
    """With the exporter: a ConfigMap holding a Grafana dashboard of its metrics, labelled
    `grafana_dashboard` (value 1) for Grafana's dashboard sidecar."""
    scrape_interval_seconds: int = Field(default=60, ge=10, le=600)
    """How often the ServiceMonitor has the exporter scraped, 10-600 seconds; each scrape runs
    sinfo, squeue, sdiag (and sacctmgr and sacct with accounting) once."""
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "50m", "memory": "64Mi"}, limits={"memory": "256Mi"}
        )
    )
    """Requests and limits of the exporter container."""

    @relation("prometheusOperator", "enabled")
    def _monitors_need_the_exporter(self) -> Iterator[KeyProblem]:
        if self.prometheus_operator and not self.enabled:
            yield KeyProblem(
                "prometheusOperator creates a ServiceMonitor for the exporter, which is off: "
                "set enabled: true, or prometheusOperator: false",
                "prometheusOperator",
            )


class RestApi(SpecModel):
    """Slurm's REST API (slurmrestd) with JSON Web Tokens: a Deployment and its Service
    (docs/rest-api.md)."""

    enabled: bool = False
    """Run slurmrestd and accept tokens (`auth/jwt` beside the cluster's `auth`): users get one
    with `scontrol token` on a login node and send it with each request."""
    replicas: int = Field(default=1, ge=1, le=10)
    """slurmrestd pods behind the `<name>-rest` Service; each keeps no state."""
    key_generation: int = Field(default=1, ge=1)
    """The generation of the key that signs tokens. Raise it by one to replace the key: every
    token issued before stops working, and slurmctld and slurmdbd restart onto the new key."""
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "50m", "memory": "64Mi"}, limits={"memory": "512Mi"}
        )
    )
    """Requests and limits of each slurmrestd container."""
    placement: Placement = Field(default_factory=Placement)
    """Where slurmrestd pods may run: node selector, tolerations, affinity."""


class NodeState(SpecModel):
    """Kubernetes node state reaches Slurm: a small controller drains the Slurm nodes of a
    cordoned or NotReady Kubernetes node and resumes them when it recovers (docs/node-state.md)."""

    enabled: bool = False
    """Run the `<name>-node-state` Deployment. It is the only pod with a Kubernetes API token:
    its ServiceAccount may list nodes (a ClusterRole) and the cluster's pods (a Role)."""
    interval_seconds: int = Field(default=10, ge=2, le=300)
    """How often it compares the Kubernetes nodes with the Slurm nodes."""


RegistryHost = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?(:[0-9]{1,5})?$")
]


class Containers(SpecModel):
    """Container jobs: `srun --container-image=IMAGE` runs a step's tasks in an OCI image
    instead of the jail, as the job's user, with the jail's /home (docs/containers.md)."""

    enabled: bool = False
    """Offer `--container-image` to srun, sbatch and salloc. Worker nodes pull images with
    skopeo and unpack them with umoci; jobs never need a privilege to run one."""
    cache: Literal["node", "jail"] = "node"
    """Where unpacked images are kept: `node`, in each worker pod (an emptyDir: each node pulls
    an image once per pod); `jail`, on the jail's volume under /var/cache/slurm-stack/containers
    (readable by root only), so an image is pulled once for every node that shares it."""
    insecure_registries: list[RegistryHost] = Field(default_factory=list, max_length=32)
    """Registries (`host` or `host:port`) pulled from over plain HTTP without TLS, such as a
    registry inside the cluster's network."""


LdapUri = Annotated[str, Field(pattern=r"^ldaps?://[A-Za-z0-9.:\[\]-]+(:[0-9]{1,5})?/?$")]
DistinguishedName = Annotated[str, Field(pattern=r"^[^=,\n]+=[^\n]+$", max_length=512)]
LdapAttribute = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,63}$")]
PemCertificate = Annotated[
    str, Field(pattern=r"^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n?$")
]


class Directory(SpecModel):
    """Users and groups from an LDAP directory (RFC 2307: posixAccount, posixGroup).

    sssd beside slurmctld, every slurmd and every sshd resolves them, and so does every login
    session and job in the jail; their SSH keys come from the directory. `pulumi up` creates
    no directory users; a Slurm association for each is an admin's (docs/users.md).
    """

    uri: LdapUri
    """The server, `ldap://host[:port]` or `ldaps://host[:port]`; use ldaps:// for TLS
    (StartTLS is not used on ldap://)."""
    base_dn: DistinguishedName
    """The search base for users and groups, e.g. 'dc=example,dc=org'."""
    bind_dn: DistinguishedName | None = None
    """The DN to bind as, its password set with `pulumi config set --secret ldapBindPassword`;
    unset: bind anonymously."""
    ca_certificate: PemCertificate | None = Field(default=None, json_schema_extra=MULTILINE)
    """A PEM CA certificate sssd uses to verify an ldaps:// server."""
    login_groups: list[UnixName] = Field(default_factory=list)
    """Groups whose members may log in over SSH with the keys the directory holds; empty:
    every directory user. Declared users are not affected."""
    ssh_public_key_attribute: LdapAttribute = "sshPublicKey"
    """The LDAP attribute that holds a user's SSH public keys (openssh-lpk's by default)."""


class Topology(SpecModel):
    """Network topology for job placement: Slurm's topology/tree, with each pool's nodes on
    a leaf switch (`workerPools[].switch`) under one root switch."""

    root_switch: DnsLabel = "root"
    """The switch every pool's leaf switch hangs off; not a pool's switch."""


class Cgroups(SpecModel):
    """Cgroup enforcement; when on, slurmd containers must run privileged (documented)."""

    enforce: bool = False
    """Confine jobs with Slurm's cgroup plugins (cores, memory, devices); slurmd pods then run
    privileged. Off: Slurm does not touch cgroups (proctrack/linuxproc)."""


ScriptName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]


def _has_shebang(content: str) -> str:
    if not content.startswith("#!/"):
        first = content.splitlines()[0] if content else ""
        raise ValueError(
            f"a script starts with '#!' and its interpreter's absolute path, like "
            f"'#!/bin/sh' (slurmd runs it directly); this one starts with {first[:40]!r}"
        )
    return content


class SiteScript(SpecModel):
    """One script of the site's, shipped with the cluster's Slurm configuration."""

    name: ScriptName
    """Names the file (with its hook: `prolog-<name>`); unique within its hook; lower-case
    letters, digits, '-' and '_'."""
    content: Annotated[str, AfterValidator(_has_shebang)] = Field(json_schema_extra=SCRIPT)
    """The script, starting with '#!' and its interpreter (`#!/bin/sh`, `#!/bin/bash`,
    `#!/usr/bin/python3`: what the image it runs in has)."""


def _given_twice(what: str, names: list[str]) -> None:
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"{what} names must be unique; given more than once: {twice}")


def _unique_names(scripts: list[SiteScript]) -> list[SiteScript]:
    _given_twice("script", [script.name for script in scripts])
    return scripts


def _lua_checker(chunk_name: str) -> Callable[[str], str]:
    def check(source: str) -> str:
        if problem := lua_syntax_problem(source, chunk_name):
            raise ValueError(f"not valid Lua 5.1 (the version Slurm's Lua plugins run): {problem}")
        return source

    return check


SiteScriptList = Annotated[list[SiteScript], AfterValidator(_unique_names)]

# A ConfigMap holds at most 1 MiB (the API server's limit on an object); leave room for its
# metadata.
MAX_SITE_FILES_BYTES = 1000 * 1024


class SiteFile(SpecModel):
    """A read-only file for the site's scripts: in the worker and controller pods at
    `/etc/slurm-stack/site-files/<name>`."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")]
    """The file's name; letters, digits, '.', '-' and '_'."""
    content: str = Field(json_schema_extra=SCRIPT)
    """Its text."""


def _site_files_fit(files: list[SiteFile]) -> list[SiteFile]:
    _given_twice("file", [f.name for f in files])
    size = sum(len(f.name) + len(f.content.encode()) for f in files)
    if size > MAX_SITE_FILES_BYTES:
        raise ValueError(
            f"the files hold {size} bytes; their ConfigMap holds at most {MAX_SITE_FILES_BYTES} "
            "(put larger data on the jail or a submount)"
        )
    return files


JobSubmitLua = Annotated[str, AfterValidator(_lua_checker("job_submit.lua"))]
CliFilterLua = Annotated[str, AfterValidator(_lua_checker("cli_filter.lua"))]


class SiteScripts(SpecModel):
    """The site's own Prolog and Epilog scripts and Lua plugins (docs/site-scripts.md). A
    change rolls out as a slurm.conf change does: no worker restarts."""

    prolog: SiteScriptList = Field(default_factory=list)
    """Prolog scripts: each node of a job runs them in this order, as root in its worker pod
    (not in the jail), before the job's first step there. One that fails stops the rest,
    drains the node ('Prolog error') and requeues the job held."""
    epilog: SiteScriptList = Field(default_factory=list)
    """Epilog scripts: each node of a job runs them in this order, as root in its worker pod,
    when the job ends, after slurm-stack's own Epilog (which removes the job's /tmp and
    leftover processes). One that fails stops the rest and drains the node ('Epilog error')."""
    prolog_slurmctld: SiteScriptList = Field(default_factory=list)
    """PrologSlurmctld scripts: slurmctld runs them in this order in the controller pod, as the
    SlurmUser, when it allocates a job."""
    epilog_slurmctld: SiteScriptList = Field(default_factory=list)
    """EpilogSlurmctld scripts: slurmctld runs them in this order in the controller pod, as the
    SlurmUser, when a job ends."""
    files: Annotated[list[SiteFile], AfterValidator(_site_files_fit)] = Field(default_factory=list)
    """Read-only files the Prolog, Epilog and slurmctld scripts read, at
    `/etc/slurm-stack/site-files/<name>` in the worker and controller pods (not in the jail).
    A change reaches running pods in place, as the kubelet refreshes a ConfigMap volume (within
    about a minute); adding the first file or removing the last one changes the pods'
    templates, so the workers are replaced as their update policy says."""
    task_prolog: SiteScript | None = None
    """TaskProlog: run as the job's user before each task, in the jail; a line it prints as
    `export NAME=value` sets that variable in the task's environment. Slurm 25.11 or newer
    (configless slurmctld sends it to the nodes from 25.11)."""
    task_epilog: SiteScript | None = None
    """TaskEpilog: run as the job's user after each task ends, in the jail. Slurm 25.11 or
    newer."""
    job_submit_lua: JobSubmitLua | None = Field(default=None, json_schema_extra=SCRIPT)
    """job_submit.lua for JobSubmitPlugins=lua: slurmctld calls it on every submission and
    update; its error message reaches the user at sbatch. Checked as Lua 5.1."""
    cli_filter_lua: CliFilterLua | None = Field(default=None, json_schema_extra=SCRIPT)
    """cli_filter.lua for CliFilterPlugins=lua: the client commands (sbatch, srun, salloc) on
    the login nodes run it before they send a request. Checked as Lua 5.1."""


# The cloud metadata service (AWS, GCP, Azure, OpenStack …): credentials of the Kubernetes
# node. Login sessions and jobs never reach it.
METADATA_CIDR = "169.254.169.254/32"


def _network_block(value: str) -> str:
    """A CIDR block as a NetworkPolicy's ipBlock takes it: `address/prefix`, no host bits."""
    if "/" not in value:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a CIDR range like '203.0.113.0/24'") from None
        raise ValueError(f"{value!r} has no prefix length: use '{value}/{address.max_prefixlen}'")
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        try:
            network = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"{value!r} is not a CIDR range like '203.0.113.0/24'") from None
        raise ValueError(
            f"{value!r} has host bits set: use {str(network)!r} for the network, or "
            f"'{value.split('/')[0]}/{network.max_prefixlen}' for one address"
        ) from None
    return value


def _not_every_address(value: str) -> str:
    if ipaddress.ip_network(value).prefixlen == 0:
        raise ValueError(
            f"{value!r} is every address: list only the API server's addresses (login sessions "
            "and jobs keep the rest of the network)"
        )
    return value


NetworkBlock = Annotated[str, AfterValidator(_network_block)]


class NetworkPolicy(SpecModel):
    """NetworkPolicies (docs/deploy.md): the cluster's pods accept only the connections Slurm
    makes; login and worker pods reach anything but the cloud metadata address and the API
    server. Off for a network plugin that does not enforce them."""

    enabled: bool = True
    """Create the NetworkPolicies. Set false where the network plugin enforces none: that
    removes them and changes no pod."""
    api_server_cidrs: list[Annotated[NetworkBlock, AfterValidator(_not_every_address)]] = Field(
        default_factory=list
    )
    """The API server's addresses as pods reach them, which login and worker pods may not
    connect to: the `kubernetes` Service's ClusterIP, the addresses in `kubectl get
    endpointslices -l kubernetes.io/service-name=kubernetes` and any public endpoint, each in
    CIDR form ('10.96.0.1/32'). NetworkPolicies match addresses only."""
    ssh_source_ranges: list[NetworkBlock] = Field(default_factory=list)
    """CIDR ranges SSH may come from, as the login pods see it (the login Service keeps client
    addresses); empty: `login.service.loadBalancerSourceRanges`, and anywhere when both are."""


class OutsideDrain(_JobDeadline):
    """What happens to an outside host's running jobs when its slurmd stops."""

    policy: Literal["requeue", "cancel", "wait"] = "requeue"
    """What happens to jobs still running `waitSeconds` after the host's slurmd began to stop:
    `requeue` (batch jobs run again elsewhere, the rest are cancelled with a reason),
    `cancel`, or `wait` (no deadline: slurmd stops when the last job has ended)."""
    wait_seconds: int | None = Field(default=None, ge=0, le=7 * 86400)
    """Seconds running jobs get to end once slurmd began to stop (0 to 604800); unset: 300.
    Not valid with policy `wait`."""


class OutsidePool(SpecModel):
    """Machines outside Kubernetes that run slurmd and join the cluster (docs/hybrid.md): each
    host is one dynamic Slurm node named by its host name, with the pool's feature."""

    name: DnsLabel
    """The pool's name: its NodeSet and Slurm feature, which `partitions[].pools` names as it
    names a worker pool's; unique among `workerPools` and these pools."""
    hosts: list[DnsLabel] = Field(min_length=1, max_length=10000)
    """The hosts' names, each its Slurm node name (`hostname -s` on the host, or the name the
    join script is given); unique in the stack, and not a name the cluster's pods take."""
    features: list[DnsLabel] = Field(default_factory=list)
    """Slurm features of the hosts besides the pool's name, for `--constraint`."""
    cpus: int | None = Field(default=None, ge=1, le=100000)
    """CPUs each host offers to jobs; unset: what slurmd finds on the host."""
    memory: Quantity | None = None
    """Memory each host offers to jobs (its RealMemory), a Kubernetes quantity such as
    '500Gi'; unset: what slurmd finds on the host."""
    weight: int = Field(default=1, ge=0, le=65533)
    """Slurm node Weight of the hosts: Slurm allocates nodes of lower weight first."""
    drain: OutsideDrain = Field(default_factory=OutsideDrain)
    """What happens to running jobs when a host's slurmd stops (the join script's stop hook)."""

    @property
    def real_memory(self) -> int | None:
        """RealMemory (MiB) as declared; None: the host's own."""
        return None if self.memory is None else max(int(to_mebibytes(self.memory)), 1)


class OutsideControllerService(SpecModel):
    """How outside hosts reach slurmctld: one Service per controller replica."""

    type: Literal["LoadBalancer"] = "LoadBalancer"
    """`LoadBalancer`, admitting only `externalNodes.addressRanges` and keeping the hosts'
    own addresses (externalTrafficPolicy Local), which slurmctld connects back to. A
    NodePort cannot serve SlurmctldPort (6817), which every node's configuration names."""
    annotations: AnnotationMap = Field(default_factory=dict)
    """Annotations of the Services, such as a cloud's internal load balancer setting."""


class ExternalNodes(SpecModel):
    """Slurm nodes outside Kubernetes (docs/hybrid.md): hosts that run Debian's slurmd of the
    cluster's version and join configless through a Service in front of slurmctld."""

    address_ranges: list[NetworkBlock] = Field(min_length=1, max_length=64)
    """CIDR ranges the outside hosts' addresses are in: the load balancer and the
    NetworkPolicies admit these and no other outside address."""
    controller_service: OutsideControllerService = Field(default_factory=OutsideControllerService)
    """The Services in front of slurmctld that outside hosts connect to."""
    pools: list[OutsidePool] = Field(min_length=1)
    """Pools of outside hosts."""

    @relation("pools[*].hosts")
    def _hosts_are_named_once(self) -> Iterator[KeyProblem]:
        seen: dict[str, int] = {}
        for i, pool in enumerate(self.pools):
            for j, host in enumerate(pool.hosts):
                if host in seen:
                    yield KeyProblem(
                        f"{host!r} is already a host of pools[{seen[host]}]: a host is one "
                        "Slurm node, in one pool",
                        "pools",
                        i,
                        "hosts",
                        j,
                    )
                seen.setdefault(host, i)

    @property
    def hosts(self) -> list[str]:
        """Every outside host's node name."""
        return [host for pool in self.pools for host in pool.hosts]


class ClusterSpec(SpecModel):
    """A whole Slurm-on-Kubernetes cluster: the `slurm-stack:cluster` stack config value."""

    name: ClusterName
    """The cluster's name: Slurm's ClusterName and the prefix of every object's name; a DNS
    label of at most 30 characters."""
    namespace: ClusterNamespace = "slurm"
    """The Kubernetes namespace every object goes into; it must exist, and may not be one of
    Kubernetes' own (a name starting with 'kube-')."""
    slurm_version: SlurmVersion = DEFAULT_VERSION
    """The Slurm major release, '26.05' or '24.11' (quoted in YAML); it picks the default image
    tag and which slurm.conf keys are valid."""
    auth: Literal["munge", "slurm"] = "munge"
    """How Slurm components authenticate: `munge` (munged beside each Slurm process) or
    `slurm` (Slurm's own auth/slurm with a generated slurm.key)."""
    images: Images = Field(default_factory=Images)
    """Container images: registry, tag, pull settings and per-component references."""
    labels: LabelMap = Field(default_factory=dict)
    """Labels added to every object and pod; slurm-stack's own labels win on a clash. Values
    are strings."""
    annotations: AnnotationMap = Field(default_factory=dict)
    """Annotations added to every object (not to pods); values are strings."""
    controller: Controller = Field(default_factory=Controller)
    """slurmctld: resources, state volume, scheduling and extra slurm.conf lines."""
    login: Login = Field(default_factory=Login)
    """Login pods, their SSH Service and the declared users."""
    worker_pools: list[WorkerPool] = Field(min_length=1)
    """Pools of slurmd pods, at least one; each pod is one dynamic Slurm node."""
    partitions: list[Partition] = Field(default_factory=list)
    """Slurm partitions; empty: one default partition, `main`, over every pool."""
    jail: Jail
    """The shared root filesystem of every login session and job (required: it needs
    `storageClass` or `existingClaim`)."""
    accounting: Accounting = Field(default_factory=Accounting)
    """slurmdbd and its database."""
    health_checks: HealthChecks = Field(default_factory=HealthChecks)
    """Node health checks and the NCCL benchmark."""
    cgroups: Cgroups = Field(default_factory=Cgroups)
    """Slurm's cgroup enforcement."""
    topology: Topology | None = None
    """Network topology for placing jobs that span nodes (topology/tree; Slurm 25.05 or
    newer, where dynamic nodes join their switch as they register); unset: none (Slurm's
    flat topology)."""
    directory: Directory | None = None
    """An LDAP directory whose users and groups can log in and run jobs beside the declared
    users; unset: none."""
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy)
    """The NetworkPolicies that limit connections to and from the cluster's pods."""
    metrics: ClusterMetrics = Field(default_factory=ClusterMetrics)
    """The metrics exporter, ServiceMonitors, alerts and dashboard."""
    site_scripts: SiteScripts = Field(default_factory=SiteScripts)
    """The site's Prolog/Epilog scripts and job_submit/cli_filter Lua plugins."""
    rest_api: RestApi = Field(default_factory=RestApi)
    """Slurm's REST API with token authentication (off by default)."""
    containers: Containers = Field(default_factory=Containers)
    """Jobs in OCI images with `--container-image` (off by default)."""
    node_state: NodeState = Field(default_factory=NodeState)
    """Cordoned or NotReady Kubernetes nodes drain their Slurm nodes (off by default)."""
    external_nodes: ExternalNodes | None = None
    """Slurm nodes on machines outside Kubernetes, and how they reach the cluster
    (docs/hybrid.md); unset: every node is a worker pod."""

    @field_validator("slurm_version", mode="before")
    @classmethod
    def _quoted_version(cls, value: object) -> object:
        if isinstance(value, float | int):
            raise ValueError(
                f'{value} was read as a number; quote it in YAML: slurmVersion: "{value}"'
            )
        return value

    @property
    def gpu_pools(self) -> list[WorkerPool]:
        """Pools whose nodes have GPUs."""
        return [pool for pool in self.worker_pools if pool.gpus > 0]

    @property
    def node_sshd_pools(self) -> list[WorkerPool]:
        """Pools whose nodes run sshd for users with a job there."""
        return [pool for pool in self.worker_pools if pool.sshd]

    @property
    def nccl_enabled(self) -> bool:
        """The NCCL benchmark runs when asked, and by default only when a pool has GPUs."""
        enabled = self.health_checks.nccl.enabled
        return bool(self.gpu_pools) if enabled is None else enabled

    @property
    def elastic_pools(self) -> list[WorkerPool]:
        """Pools that Slurm's power saving grows and shrinks."""
        return [pool for pool in self.worker_pools if pool.elastic is not None]

    @property
    def outside_pools(self) -> list[OutsidePool]:
        """Pools of hosts outside Kubernetes (`externalNodes.pools`)."""
        return [] if self.external_nodes is None else list(self.external_nodes.pools)

    @property
    def pool_names(self) -> list[str]:
        """Every pool's name, worker pools first: each a NodeSet of its feature."""
        return [p.name for p in self.worker_pools] + [p.name for p in self.outside_pools]

    @property
    def effective_partitions(self) -> list[Partition]:
        """Partitions as configured, or one default partition over all pools."""
        if not self.partitions:
            return [Partition(name="main", default=True)]
        if any(partition.default for partition in self.partitions):
            return list(self.partitions)
        first, *rest = self.partitions
        return [first.model_copy(update={"default": True}), *rest]

    def image(self, component: str) -> str:
        """The image reference for a project image (`controller`, `worker`, …)."""
        override = getattr(self.images, component, None)
        if override:
            return override
        tag = self.images.tag or f"{self.slurm_version}-{IMAGE_REVISION}"
        return f"{self.images.registry}/{component}:{tag}"
