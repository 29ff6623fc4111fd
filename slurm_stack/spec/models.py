"""The cluster spec: one validated, defaults-filled model tree read from stack config.

Field names are snake_case in Python and camelCase in `Pulumi.<stack>.yaml` (aliases).
Rules that involve one model live here as validators; rules that relate several parts of
the tree live in `slurm_stack.spec.rules`, so every error is reported in one pass.
"""

import hashlib
import ipaddress
import math
import re
from typing import Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from slurm_stack.spec.fields import (
    AbsolutePath,
    Cidr,
    ClusterName,
    CronSchedule,
    DnsLabel,
    GresType,
    HostDirectory,
    ImageRef,
    ImageRegistry,
    ImageTag,
    MessageSize,
    PartitionOption,
    Quantity,
    SlurmKeyValue,
    SshdLine,
    SshPublicKey,
    message_size_bytes,
)
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
KubeStringMap = dict[str, KubeText]
"""Labels, annotations, node selectors: the maps users fill through stack config."""


class SpecModel(BaseModel):
    """Base for every spec model: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        # "yes" is not True and "2" is not 2: relational rules read the same values.
        strict=True,
    )


class Toleration(SpecModel):
    """A Kubernetes toleration."""

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class Placement(SpecModel):
    """Where a component's pods may run."""

    node_selector: KubeStringMap = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class Resources(SpecModel):
    """Container resource requests and limits (Kubernetes quantities)."""

    requests: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity] = Field(
        default_factory=dict
    )
    limits: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity] = Field(
        default_factory=dict
    )


class Volume(SpecModel):
    """A persistent volume to create: size and storage class (cluster default if unset)."""

    size: Quantity
    storage_class: str | None = None


class Images(SpecModel):
    """Container images. Each component defaults to `<registry>/<component>:<tag>`; a full
    reference under the component's key replaces that, and pins it by digest with
    `name@sha256:<hex>` or `name:tag@sha256:<hex>` (docs/deploy.md)."""

    registry: ImageRegistry = "ghcr.io/slurm-stack"
    tag: ImageTag | None = None
    pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    pull_secrets: list[DnsLabel] = Field(default_factory=list)
    controller: ImageRef | None = None
    worker: ImageRef | None = None
    login: ImageRef | None = None
    accounting: ImageRef | None = None
    munge: ImageRef | None = None
    jail: ImageRef | None = None
    ops: ImageRef | None = None
    sssd: ImageRef | None = None
    mariadb: ImageRef = MARIADB_IMAGE


class Scheduler(SpecModel):
    """slurmctld scheduling: backfill with GPU-friendly defaults."""

    type: Literal["sched/backfill", "sched/builtin"] = "sched/backfill"
    parameters: list[str] = Field(
        default_factory=lambda: ["bf_continue", "bf_max_job_test=1000", "bf_window=10080"]
    )
    select_type_parameters: Literal[
        "CR_Core_Memory", "CR_CPU_Memory", "CR_Core", "CR_CPU", "CR_Socket_Memory"
    ] = "CR_Core_Memory"


class Metrics(SpecModel):
    """slurmctld's OpenMetrics endpoint (Slurm 25.11 and newer)."""

    enabled: bool = False


class Controller(SpecModel):
    """slurmctld: one replica whose state lives on a protected PVC."""

    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "1", "memory": "2Gi"}, limits={"memory": "8Gi"}
        )
    )
    state_volume: Volume = Field(default_factory=lambda: Volume(size="10Gi"))
    max_node_count: int = Field(default=1024, ge=1, le=65000)
    scheduler: Scheduler = Field(default_factory=Scheduler)
    metrics: Metrics = Field(default_factory=Metrics)
    slurm_conf_extra: list[SlurmKeyValue] = Field(default_factory=list)
    placement: Placement = Field(default_factory=Placement)


class LoginService(SpecModel):
    """How SSH reaches the login pods."""

    type: Literal["LoadBalancer", "NodePort", "ClusterIP"] = "LoadBalancer"
    port: int = Field(default=22, ge=1, le=65535)
    node_port: int | None = Field(default=None, ge=30000, le=32767)
    annotations: KubeStringMap = Field(default_factory=dict)
    load_balancer_source_ranges: list[Cidr] = Field(default_factory=list)

    @model_validator(mode="after")
    def _type_specific_fields(self) -> "LoginService":
        if self.node_port is not None and self.type == "ClusterIP":
            raise ValueError("nodePort is only valid with type NodePort or LoadBalancer")
        if self.load_balancer_source_ranges and self.type != "LoadBalancer":
            raise ValueError("loadBalancerSourceRanges is only valid with type LoadBalancer")
        return self


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
    authorized_keys: list[SshPublicKey] = Field(min_length=1)
    uid: int | None = None
    gid: int | None = None
    groups: list[UnixName] = Field(default_factory=list)
    shell: AbsolutePath = "/bin/bash"
    account: AccountName | None = None
    default_qos: AccountName | None = None

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
    service: LoginService = Field(default_factory=LoginService)
    root_authorized_keys: list[SshPublicKey] = Field(default_factory=list)
    users: list[LoginUser] = Field(default_factory=list)
    default_account: AccountName | None = None
    sshd_extra: list[SshdLine] = Field(default_factory=list)
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "500m", "memory": "1Gi"}, limits={"memory": "4Gi"}
        )
    )
    placement: Placement = Field(default_factory=Placement)

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


class EmptyDirSubmount(SpecModel):
    """Node-local scratch on the pod's node disk."""

    type: Literal["emptyDir"]
    name: SubmountName
    mount_path: AbsolutePath
    size_limit: Quantity | None = None


class MemorySubmount(SpecModel):
    """An in-memory (tmpfs) submount; its size counts against the pod's memory."""

    type: Literal["memory"]
    name: SubmountName
    mount_path: AbsolutePath
    size_limit: Quantity


class HostPathSubmount(SpecModel):
    """A directory of the Kubernetes node (local NVMe, caches), never one of the node's own
    system directories (`/etc`, `/run`, the kubelet's and container runtime's state …)."""

    type: Literal["hostPath"]
    name: SubmountName
    mount_path: AbsolutePath
    host_path: HostDirectory
    read_only: bool = False


class PvcSubmount(SpecModel):
    """A persistent volume: an existing claim (shared) or one new claim per node (template)."""

    type: Literal["pvc"]
    name: SubmountName
    mount_path: AbsolutePath
    existing_claim: DnsLabel | None = None
    size: Quantity | None = None
    storage_class: str | None = None
    read_only: bool = False

    @model_validator(mode="after")
    def _claim_or_template(self) -> "PvcSubmount":
        if (self.existing_claim is None) == (self.size is None):
            raise ValueError(
                "give exactly one of existingClaim (use a claim that exists) or size "
                "(a new claim per node)"
            )
        return self


Submount = Annotated[
    EmptyDirSubmount | MemorySubmount | HostPathSubmount | PvcSubmount,
    Field(discriminator="type"),
]


DEFAULT_DRAIN_WAIT_SECONDS = 300
PERCENT = re.compile(r"(100|[1-9]?[0-9])%")
# Kubernetes needs a number for a pod's grace period; `policy: wait` takes a year.
WAIT_POLICY_GRACE_SECONDS = 365 * 86400


class PoolDrain(SpecModel):
    """What happens to a node's running jobs when its pod stops (scale-down, eviction)."""

    # requeue: jobs get waitSeconds to end, then batch jobs run again elsewhere and the rest
    # are cancelled with a reason; cancel: every job left is cancelled; wait: no deadline.
    policy: Literal["requeue", "cancel", "wait"] = "requeue"
    wait_seconds: int | None = Field(default=None, ge=0, le=7 * 86400)
    # Pods of the pool a Kubernetes node drain may evict at once (a PodDisruptionBudget).
    max_unavailable: int | str = 1

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _pods_or_percent(cls, value: object) -> object:
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        if not valid and not (isinstance(value, str) and PERCENT.fullmatch(value)):
            raise ValueError(
                f"give a number of pods (0 or more) or a percentage such as '25%' (got {value!r})"
            )
        return value

    @model_validator(mode="after")
    def _no_deadline_with_wait(self) -> "PoolDrain":
        if self.policy == "wait" and self.wait_seconds is not None:
            raise ValueError(
                "waitSeconds is a deadline and policy 'wait' has none: drop waitSeconds, or "
                "use policy 'requeue' or 'cancel'"
            )
        return self

    @property
    def effective_wait_seconds(self) -> int | None:
        """Seconds running jobs get before the policy acts; None: as long as they run."""
        if self.policy == "wait":
            return None
        return DEFAULT_DRAIN_WAIT_SECONDS if self.wait_seconds is None else self.wait_seconds


class WorkerPool(SpecModel):
    """A pool of slurmd pods; each pod is one dynamic Slurm node with the pool's feature."""

    renamed_keys: ClassVar[dict[str, str]] = {
        "drainTimeoutSeconds": "drain.waitSeconds (and drain.policy says what happens to the "
        "jobs still running then)"
    }

    name: DnsLabel
    replicas: int = Field(default=1, ge=0, le=10000)
    resources: Resources = Field(
        default_factory=lambda: Resources(requests={"cpu": "1", "memory": "1Gi"})
    )
    gpus: int = Field(default=0, ge=0, le=16)
    gpu_type: GresType | None = None
    features: list[DnsLabel] = Field(default_factory=list)
    weight: int = Field(default=1, ge=0, le=65533)
    node_conf_extra: list[SlurmKeyValue] = Field(default_factory=list)
    submounts: list[Submount] = Field(default_factory=list)
    shm_size: Quantity = "16Gi"
    drain: PoolDrain = Field(default_factory=PoolDrain)
    placement: Placement = Field(default_factory=Placement)

    @model_validator(mode="after")
    def _gpu_type_needs_gpus(self) -> "WorkerPool":
        if self.gpu_type is not None and self.gpus == 0:
            raise ValueError(f"gpuType {self.gpu_type!r} is set but gpus is 0: set gpus to 1-16")
        return self


class Partition(SpecModel):
    """A Slurm partition over some pools (all pools when `pools` is omitted)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")]
    pools: list[str] | None = Field(default=None, min_length=1)
    default: bool = False
    max_time: Annotated[str, Field(pattern=r"^(UNLIMITED|INFINITE|\d+(-\d+)?(:\d+){0,2})$")] = (
        "UNLIMITED"
    )
    options: list[PartitionOption] = Field(default_factory=list)

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
    add_newer_files: bool = False


class Jail(SpecModel):
    """The shared root filesystem every login session and job sees as `/`."""

    existing_claim: DnsLabel | None = None
    storage_class: str | None = None
    size: Quantity = "100Gi"
    populate: PopulateJail = Field(default_factory=PopulateJail)
    submounts: list[Submount] = Field(default_factory=list)
    # Lets a job run on the worker pod's own filesystem with `srun/sbatch --no-jail`: for
    # debugging a node, at the price of the isolation the jail gives. Off by default.
    allow_opt_out: bool = False
    # Lets root submit jobs. Root in a job is root in the jail (it can change any user's
    # files there) but holds no capability beyond file and user administration; off by
    # default, and then Slurm refuses jobs from root (DisableRootJobs=YES).
    allow_root_jobs: bool = False

    @model_validator(mode="after")
    def _claim_source(self) -> "Jail":
        if self.existing_claim is None and self.storage_class is None:
            raise ValueError(
                "the jail needs a ReadWriteMany volume: set storageClass (an RWX class such as "
                "an NFS or CephFS one) or existingClaim (an RWX claim that exists)"
            )
        for submount in self.submounts:
            if isinstance(submount, PvcSubmount) and submount.existing_claim is None:
                raise ValueError(
                    f"jail submount {submount.name!r} is shared by login and workers, so it "
                    "needs existingClaim, not a per-node size"
                )
        return self


class SecretKeyRef(SpecModel):
    """A key of an existing Kubernetes Secret in the cluster's namespace."""

    name: DnsLabel
    key: str


class ExternalDatabase(SpecModel):
    """A MySQL/MariaDB server that slurm-stack does not manage."""

    host: str | None = None
    port: int = Field(default=3306, ge=1, le=65535)
    user: str = "slurm"
    database: str = "slurm_acct_db"
    password_secret: SecretKeyRef | None = None


class EmbeddedDatabase(SpecModel):
    """A MariaDB StatefulSet created by slurm-stack (also the mariadb-operator CR's storage)."""

    volume: Volume = Field(default_factory=lambda: Volume(size="20Gi"))
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "500m", "memory": "1Gi"}, limits={"memory": "4Gi"}
        )
    )


class Purge(SpecModel):
    """slurmdbd purge ages (Slurm time spans such as '12month'); unset keeps records forever."""

    jobs_after: Annotated[str, Field(pattern=r"^\d+(hour|day|month)s?$")] | None = None
    steps_after: Annotated[str, Field(pattern=r"^\d+(hour|day|month)s?$")] | None = None
    events_after: Annotated[str, Field(pattern=r"^\d+(hour|day|month)s?$")] | None = None
    archive: bool = False
    archive_volume: Volume = Field(default_factory=lambda: Volume(size="20Gi"))


class Accounting(SpecModel):
    """slurmdbd and its database."""

    enabled: bool = True
    mode: Literal["embedded", "mariadb-operator", "external"] = "embedded"
    embedded: EmbeddedDatabase = Field(default_factory=EmbeddedDatabase)
    external: ExternalDatabase = Field(default_factory=ExternalDatabase)
    purge: Purge = Field(default_factory=Purge)
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "250m", "memory": "512Mi"}, limits={"memory": "2Gi"}
        )
    )
    placement: Placement = Field(default_factory=Placement)

    @model_validator(mode="after")
    def _external_needs_host(self) -> "Accounting":
        if self.enabled and self.mode == "external" and not self.external.host:
            raise ValueError("mode 'external' needs external.host (the database server's name)")
        return self


class QuickChecks(SpecModel):
    """Slurm's HealthCheckProgram on every worker."""

    enabled: bool = True
    interval_seconds: int = Field(default=300, ge=10, le=86400)
    node_states: list[
        Literal["ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE", "START_ONLY"]
    ] = Field(default_factory=lambda: ["ANY"], min_length=1)
    min_free_disk_percent: int = Field(default=5, ge=0, le=100)


class NcclBenchmark(SpecModel):
    """The periodic all_reduce_perf run that drains slow GPU nodes."""

    enabled: bool | None = None
    schedule: CronSchedule = "0 3 * * *"
    thresholds_gbps: dict[GresType, float] = Field(
        default_factory=lambda: {"a100": 180.0, "h100": 350.0, "h200": 350.0, "b200": 600.0}
    )
    min_bytes: MessageSize = "512M"
    max_bytes: MessageSize = "8G"

    @model_validator(mode="after")
    def _sizes_in_order(self) -> "NcclBenchmark":
        if message_size_bytes(self.min_bytes) > message_size_bytes(self.max_bytes):
            raise ValueError(
                f"minBytes {self.min_bytes!r} is larger than maxBytes {self.max_bytes!r}: "
                "all_reduce_perf sweeps from minBytes up to maxBytes"
            )
        return self


class HealthChecks(SpecModel):
    """Quick checks and the NCCL benchmark."""

    quick: QuickChecks = Field(default_factory=QuickChecks)
    nccl: NcclBenchmark = Field(default_factory=NcclBenchmark)


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
    base_dn: DistinguishedName
    bind_dn: DistinguishedName | None = None
    ca_certificate: PemCertificate | None = None
    login_groups: list[UnixName] = Field(default_factory=list)
    ssh_public_key_attribute: LdapAttribute = "sshPublicKey"


class Cgroups(SpecModel):
    """Cgroup enforcement; when on, slurmd containers must run privileged (documented)."""

    enforce: bool = False


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
    # The API server's addresses as pods reach them (`kubectl get endpointslices -l
    # kubernetes.io/service-name=kubernetes`, the `kubernetes` Service's ClusterIP, and the
    # public endpoint if it has one); NetworkPolicies match addresses only.
    api_server_cidrs: list[Annotated[NetworkBlock, AfterValidator(_not_every_address)]] = Field(
        default_factory=list
    )
    # Where SSH may come from, as the login pods see it (the login Service keeps client
    # addresses): login.service.loadBalancerSourceRanges when empty, anywhere when both are.
    ssh_source_ranges: list[NetworkBlock] = Field(default_factory=list)


class ClusterSpec(SpecModel):
    """A whole Slurm-on-Kubernetes cluster: the `slurm-stack:cluster` stack config value."""

    name: ClusterName
    namespace: DnsLabel = "slurm"
    slurm_version: SlurmVersion = DEFAULT_VERSION
    auth: Literal["munge", "slurm"] = "munge"
    images: Images = Field(default_factory=Images)
    labels: KubeStringMap = Field(default_factory=dict)
    annotations: KubeStringMap = Field(default_factory=dict)
    controller: Controller = Field(default_factory=Controller)
    login: Login = Field(default_factory=Login)
    worker_pools: list[WorkerPool] = Field(min_length=1)
    partitions: list[Partition] = Field(default_factory=list)
    jail: Jail
    accounting: Accounting = Field(default_factory=Accounting)
    health_checks: HealthChecks = Field(default_factory=HealthChecks)
    cgroups: Cgroups = Field(default_factory=Cgroups)
    directory: Directory | None = None
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy)

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
    def nccl_enabled(self) -> bool:
        """The NCCL benchmark runs when asked, and by default only when a pool has GPUs."""
        enabled = self.health_checks.nccl.enabled
        return bool(self.gpu_pools) if enabled is None else enabled

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
