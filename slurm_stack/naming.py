"""Kubernetes object and Slurm node names derived from the spec, in one place."""

# Slurm features that start with this come from Kubernetes node labels (a pool's
# labelFeatures): the node-state controller sets and replaces them (its LABEL_FEATURE_PREFIX).
LABEL_FEATURE_PREFIX = "k8s-"
# The reason a pool's node registers drained with when its switch comes from a node label:
# the node-state controller's `k8s:` prefix, so the controller resumes it once placed.
AWAITING_SWITCH_REASON = "k8s: awaiting its switch from the node-state controller"
# The leaf switch such a node registers on (topology.conf declares it): a node outside the
# topology made Slurm refuse, at submission, a job only it could run ("Requested node
# configuration is not available") rather than queue it.
UNPLACED_SWITCH = "unplaced"

# Pool names that would collide with the names of the cluster's other workloads.
RESERVED_POOL_NAMES = frozenset(
    {
        "controller",
        "login",
        "accounting",
        "slurmdbd",
        "mariadb",
        "jail",
        "populate-jail",
        "reconfigure",
        "nccl",
        "config",
        "munge",
        "ssh",
        "state",
        "services",
        "rest",
    }
)

# StatefulSet names must leave room for "-<ordinal>" and the 11-character revision hash
# label suffix within 63 characters.
MAX_STATEFULSET_NAME = 52


def controller_name(cluster: str) -> str:
    """slurmctld StatefulSet and Service name; also SlurmctldHost."""
    return f"{cluster}-controller"


def accounting_name(cluster: str) -> str:
    """slurmdbd Deployment and Service name."""
    return f"{cluster}-accounting"


def database_name(cluster: str) -> str:
    """Embedded MariaDB StatefulSet and Service name."""
    return f"{cluster}-mariadb"


def rest_api_name(cluster: str) -> str:
    """The REST API's Deployment, Service and ServiceAccount."""
    return f"{cluster}-rest"


def jwt_key_secret_name(cluster: str) -> str:
    """The Secret holding the key that signs and checks the REST API's tokens."""
    return f"{cluster}-jwt-key"


def node_state_name(cluster: str) -> str:
    """The node-state controller's Deployment, ServiceAccount and Role."""
    return f"{cluster}-node-state"


def registry_auth_secret_name(cluster: str) -> str:
    """The Secret holding the credentials worker pods pull container jobs' images with."""
    return f"{cluster}-registry-auth"


def login_name(cluster: str) -> str:
    """sshd StatefulSet and Service name."""
    return f"{cluster}-login"


def services_budget_name(cluster: str) -> str:
    """The PodDisruptionBudget over slurmctld, slurmdbd and the embedded MariaDB."""
    return f"{cluster}-services"


def pool_name(cluster: str, pool: str) -> str:
    """A worker pool's StatefulSet and headless Service name; node names add `-<ordinal>`."""
    return f"{cluster}-{pool}"


def elastic_partition_name(pool: str) -> str:
    """The hidden partition over an elastic pool's nodes: it carries the pool's SuspendTime
    and ResumeTimeout, which Slurm sets per partition (24.11 has no per-node SuspendTime)."""
    return f"elastic-{pool}"


# An elastic pool's StatefulSet carries this annotation: its live size belongs to the scaler
# (Slurm's ResumeProgram/SuspendProgram), and `pulumi up` (ignoreChanges) and the sandbox
# leave it alone.
SCALED_BY_ANNOTATION = "slurm-stack.io/scaled-by"
SCALED_BY_POWER_SAVING = "slurm-power-saving"

# The scaler's settings, beside slurm.conf in the config ConfigMap.
ELASTIC_CONFIG_FILE = "elastic.json"
# The hosts outside Kubernetes the stack declares, beside slurm.conf (healthchecks'
# outside_sync.CONFIG_FILE).
OUTSIDE_CONFIG_FILE = "outside.json"


def jail_claim_name(cluster: str) -> str:
    """The jail PVC's name when slurm-stack creates it."""
    return f"{cluster}-jail"


def config_map_name(cluster: str, config_hash: str) -> str:
    """The Slurm config ConfigMap, named by its content hash."""
    return f"{cluster}-slurm-config-{config_hash}"


def reconfigure_job_name(cluster: str, config_hash: str) -> str:
    """The Job that pushes a config to every slurmd, named by the same hash."""
    return f"{cluster}-reconfigure-{config_hash}"


def pool_update_job_name(cluster: str, template_hash: str) -> str:
    """The Job that marks a pool's nodes before its pods take template ``template_hash``
    (the template names the pool: its labels are in it); fits 63 characters."""
    return f"{cluster}-pool-update-{template_hash}"


def service_host(service: str, namespace: str) -> str:
    """A Service's DNS name, resolvable from any pod through the cluster's search path."""
    return f"{service}.{namespace}.svc"


def controller_host(cluster: str, namespace: str) -> str:
    """Where slurmd, sackd and clients reach slurmctld (a stable ClusterIP Service)."""
    return service_host(controller_name(cluster), namespace)


def controller_pods_service(cluster: str) -> str:
    """The headless Service that gives each slurmctld pod of a primary and a backup a DNS
    name (the StatefulSet's serviceName)."""
    return f"{controller_name(cluster)}-pods"


def controller_pod_hosts(cluster: str, namespace: str, replicas: int) -> list[tuple[str, str]]:
    """Each slurmctld pod's (hostname, address), primary first: what SlurmctldHost lists.
    One controller is reached through its ClusterIP Service; a primary and a backup each
    through its own pod's name, since only one of them is in control."""
    name = controller_name(cluster)
    if replicas == 1:
        return [(f"{name}-0", controller_host(cluster, namespace))]
    pods = controller_pods_service(cluster)
    return [(f"{name}-{i}", service_host(f"{name}-{i}.{pods}", namespace)) for i in range(replicas)]


def accounting_host(cluster: str, namespace: str) -> str:
    """Where slurmctld reaches slurmdbd."""
    return service_host(accounting_name(cluster), namespace)


def site_files_config_map_name(cluster: str) -> str:
    """The ConfigMap of the site's files for its scripts (updated in place, never renamed)."""
    return f"{cluster}-site-files"


def node_sshd_config_map_name(cluster: str, digest: str) -> str:
    """The ConfigMap of the nodes' sshd_config (workerPools[].sshd), named by its content."""
    return f"{cluster}-node-sshd-config-{digest}"


def node_host_keys_secret_name(cluster: str) -> str:
    """The Secret with the SSH host keys that every node running sshd shares."""
    return f"{cluster}-node-ssh-host-keys"


def users_config_map_name(cluster: str) -> str:
    """The ConfigMap of declared users and their keys (updated in place, never renamed)."""
    return f"{cluster}-users"


def users_job_name(cluster: str, users_hash: str) -> str:
    """The Job that applies one version of the declared users, named by its content hash."""
    return f"{cluster}-users-{users_hash}"
