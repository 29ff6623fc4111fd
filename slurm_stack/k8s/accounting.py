"""slurmdbd and its database: embedded MariaDB, a mariadb-operator resource, or external."""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import (
    PARALLEL,
    ROLLING_UPDATE,
    Manifest,
    auth_mounts,
    auth_sidecars,
    auth_volumes,
    cluster_ip_service,
    container,
    env,
    image_pull,
    metadata,
    non_root,
    placement,
    pod_security,
    resources,
    run_volume,
    selector_labels,
    tcp_probe,
    volume_claim,
)
from slurm_stack.k8s.identity import pod_identity
from slurm_stack.k8s.rest_api import jwt_key_annotations, jwt_key_mounts, jwt_key_volumes
from slurm_stack.render import database_endpoint
from slurm_stack.spec.models import ClusterSpec
from slurm_stack.spec.quantity import to_mebibytes

COMPONENT = "accounting"
DB_COMPONENT = "database"
PASSWORD_KEY = "password"

# The embedded MariaDB reads both passwords from Secret files (`*_FILE`, as the upstream
# image does): no password is ever in a pod's environment.
MARIADB_USER_SECRET_DIR = "/run/secrets/mariadb-user"
MARIADB_ROOT_SECRET_DIR = "/run/secrets/mariadb-root"

# What slurmdbd.conf can hold as StoragePass (src/common/parse_config.c): an unquoted value
# ends at whitespace, an unescaped `#` starts a comment, `\` is an escape character (and one
# at the end of a line continues it), and a value in `"…"` loses its quotes. Other printable
# ASCII is read back as written. images/base/entrypoint (role_slurmdbd) has the same rule.
STORAGE_PASS_FORBIDDEN = frozenset('#\\"')


# Up to an hour for slurmdbd to start listening (5 s between probes).
SLURMDBD_START_PROBES = 720


def storage_pass_problem(password: str) -> str | None:
    """Why slurmdbd.conf cannot hold ``password`` (never quoting it), or None if it can."""
    if not password:
        return "is empty"
    if not all("!" <= c <= "~" and c not in STORAGE_PASS_FORBIDDEN for c in password):
        return (
            "cannot be written to slurmdbd.conf: use printable ASCII without spaces, "
            "newlines, '#', '\\' or '\"'"
        )
    return None


def db_password_secret(spec: ClusterSpec) -> tuple[str, str]:
    """(Secret name, key) of the database password slurmdbd uses."""
    ref = spec.accounting.external.password_secret
    if spec.accounting.mode == "external" and ref is not None:
        return ref.name, ref.key
    return f"{spec.name}-db-password", PASSWORD_KEY


def db_root_password_secret(spec: ClusterSpec) -> tuple[str, str]:
    """(Secret name, key) of the root password of a database slurm-stack creates. A Secret of
    its own: slurmdbd's pod can name only the password it uses."""
    return f"{spec.name}-db-root-password", PASSWORD_KEY


def _secret_volume(name: str, secret: str, key: str) -> Manifest:
    """One key of a Secret as a file readable by the pod's fsGroup only."""
    return {
        "name": name,
        "secret": {
            "secretName": secret,
            "items": [{"key": key, "path": key}],
            "defaultMode": 0o440,
        },
    }


def db_claim_name(spec: ClusterSpec) -> str:
    """The embedded database's data volume."""
    return f"{naming.database_name(spec.name)}-data"


def archive_claim_name(spec: ClusterSpec) -> str:
    """Where slurmdbd writes archived records before purging them from the database."""
    return f"{naming.accounting_name(spec.name)}-archive"


def archive_pvc(spec: ClusterSpec) -> Manifest | None:
    """The archive volume, when purged records are archived."""
    if not spec.accounting.purge.archive:
        return None
    volume = spec.accounting.purge.archive_volume
    return volume_claim(spec, archive_claim_name(spec), COMPONENT, volume)


def db_pvc(spec: ClusterSpec) -> Manifest:
    """The embedded MariaDB's data volume."""
    volume = spec.accounting.embedded.volume
    return volume_claim(spec, db_claim_name(spec), DB_COMPONENT, volume)


def db_service(spec: ClusterSpec) -> Manifest:
    """The embedded MariaDB's Service."""
    name = naming.database_name(spec.name)
    return cluster_ip_service(spec, name, DB_COMPONENT, "mysql", paths.MYSQL_PORT)


# Slurm's accounting guide: a buffer pool of 5-50 % of the server's memory, a redo log of a
# quarter of it, a 900 s lock wait, packets of at least 16M, and no snapshot isolation (on by
# default since MariaDB 11.6; slurmdbd fatals on the write conflicts it reports).
BUFFER_POOL_SHARE = 4  # a quarter of the container's memory
MIN_BUFFER_POOL_MIB = 128


def innodb_buffer_pool_mib(spec: ClusterSpec) -> int:
    """A quarter of the MariaDB container's memory limit (its request if no limit)."""
    resources = spec.accounting.embedded.resources
    memory = resources.limits.get("memory") or resources.requests.get("memory")
    if memory is None:
        return MIN_BUFFER_POOL_MIB
    return max(MIN_BUFFER_POOL_MIB, to_mebibytes(memory) // BUFFER_POOL_SHARE)


def mariadb_args(spec: ClusterSpec) -> list[str]:
    """mariadbd options for what Slurm's accounting docs ask of InnoDB."""
    buffer_pool = innodb_buffer_pool_mib(spec)
    return [
        f"--innodb-buffer-pool-size={buffer_pool}M",
        f"--innodb-log-file-size={buffer_pool // 4}M",
        "--innodb-lock-wait-timeout=900",
        "--max-allowed-packet=16M",
        # `loose-`: an older server that lacks the variable still starts.
        "--loose-innodb-snapshot-isolation=OFF",
    ]


def db_statefulset(spec: ClusterSpec) -> Manifest:
    """Upstream MariaDB with the slurm user and database created on first start; root only
    at localhost (the default host of upstream's root is '%'), both passwords from files."""
    name = naming.database_name(spec.name)
    secret, key = db_password_secret(spec)
    root_secret, root_key = db_root_password_secret(spec)
    endpoint = database_endpoint(spec)
    health = ["healthcheck.sh", "--connect", "--innodb_initialized"]
    mariadb = {
        "name": "mariadb",
        "image": spec.images.mariadb,
        "imagePullPolicy": spec.images.pull_policy,
        "args": mariadb_args(spec),
        "ports": [{"name": "mysql", "containerPort": paths.MYSQL_PORT}],
        "env": env(
            MARIADB_DATABASE=str(endpoint["database"]),
            MARIADB_USER=str(endpoint["user"]),
            MARIADB_PASSWORD_FILE=f"{MARIADB_USER_SECRET_DIR}/{key}",
            MARIADB_ROOT_HOST="localhost",
            MARIADB_ROOT_PASSWORD_FILE=f"{MARIADB_ROOT_SECRET_DIR}/{root_key}",
        ),
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/mysql"},
            {"name": "user-password", "mountPath": MARIADB_USER_SECRET_DIR, "readOnly": True},
            {"name": "root-password", "mountPath": MARIADB_ROOT_SECRET_DIR, "readOnly": True},
        ],
        "resources": resources(spec.accounting.embedded.resources),
        "securityContext": non_root(paths.MARIADB_UID),
        "startupProbe": {"exec": {"command": health}, "periodSeconds": 5, "failureThreshold": 120},
        "readinessProbe": {"exec": {"command": health}, "periodSeconds": 10},
        "livenessProbe": {"exec": {"command": health}, "periodSeconds": 30, "failureThreshold": 4},
    }
    return {
        "metadata": metadata(spec, name, DB_COMPONENT),
        "spec": {
            "replicas": 1,
            "serviceName": name,
            # One MariaDB at a time all the same (one pod name); see ROLLING_UPDATE.
            "podManagementPolicy": PARALLEL,
            "updateStrategy": dict(ROLLING_UPDATE),
            "selector": {"matchLabels": selector_labels(spec, DB_COMPONENT)},
            "template": {
                "metadata": {"labels": metadata(spec, name, DB_COMPONENT)["labels"]},
                "spec": {
                    **pod_identity(spec, DB_COMPONENT),
                    **placement(spec.accounting.placement),
                    **pod_security(fsGroup=paths.MARIADB_UID, fsGroupChangePolicy="OnRootMismatch"),
                    "containers": [mariadb],
                    "volumes": [
                        {
                            "name": "data",
                            "persistentVolumeClaim": {"claimName": db_claim_name(spec)},
                        },
                        _secret_volume("user-password", secret, key),
                        _secret_volume("root-password", root_secret, root_key),
                    ],
                },
            },
        },
    }


# pulumi-kubernetes creates a custom resource and moves on unless it carries this annotation
# (provider/pkg/metadata/overrides.go, ReadyCondition): `condition=Ready` waits for the
# operator's status condition Ready=True, so slurmdbd starts against a running server.
WAIT_FOR_READY = {"pulumi.com/waitFor": "condition=Ready"}


def mariadb_operator_resource(spec: ClusterSpec) -> Manifest:
    """A `k8s.mariadb.com/v1alpha1` MariaDB for an installed mariadb-operator. Root has its
    own password: the operator manages the server as root over the network."""
    secret, key = db_password_secret(spec)
    root_secret, root_key = db_root_password_secret(spec)
    endpoint = database_endpoint(spec)
    volume = spec.accounting.embedded.volume
    storage: Manifest = {"size": volume.size}
    if volume.storage_class:
        storage["storageClassName"] = volume.storage_class
    return {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "MariaDB",
        "metadata": metadata(
            spec, naming.database_name(spec.name), DB_COMPONENT, annotations=WAIT_FOR_READY
        ),
        "spec": {
            "rootPasswordSecretKeyRef": {
                "name": root_secret,
                "key": root_key,
                "generate": False,
            },
            "database": endpoint["database"],
            "username": endpoint["user"],
            "passwordSecretKeyRef": {"name": secret, "key": key, "generate": False},
            "storage": storage,
            "port": paths.MYSQL_PORT,
            "resources": resources(spec.accounting.embedded.resources),
        },
    }


def slurmdbd_service(spec: ClusterSpec) -> Manifest:
    """The Service slurmctld reaches slurmdbd through."""
    name = naming.accounting_name(spec.name)
    return cluster_ip_service(spec, name, COMPONENT, "slurmdbd", paths.SLURMDBD_PORT)


def slurmdbd_deployment(spec: ClusterSpec, config_map: str) -> Manifest:
    """slurmdbd as the SlurmUser; the password arrives only as a Secret file."""
    name = naming.accounting_name(spec.name)
    secret, key = db_password_secret(spec)
    slurmdbd = container(
        spec,
        "slurmdbd",
        spec.image("accounting"),
        "slurmdbd",
        ports=[{"name": "slurmdbd", "containerPort": paths.SLURMDBD_PORT}],
        env=env(
            DB_PASSWORD_FILE=f"{paths.DB_PASSWORD_DIR}/{key}",
            SLURMDBD_CONF_TEMPLATE=f"{paths.SLURM_CONF_DIR}/slurmdbd.conf",
        ),
        volumeMounts=[
            {"name": "slurmdbd-config", "mountPath": paths.SLURM_CONF_DIR, "readOnly": True},
            {"name": "db-password", "mountPath": paths.DB_PASSWORD_DIR, "readOnly": True},
            {"name": "run", "mountPath": paths.SLURM_RUN_DIR},
            {"name": "spool", "mountPath": paths.SLURMDBD_SPOOL_DIR},
            *(
                [{"name": "archive", "mountPath": paths.SLURMDBD_ARCHIVE_DIR}]
                if spec.accounting.purge.archive
                else []
            ),
            *auth_mounts(spec, sack_dir="/run/slurmdbd"),
            *jwt_key_mounts(spec),
        ],
        resources=resources(spec.accounting.resources),
        securityContext=non_root(paths.SLURM_UID),
        # slurmdbd listens only once its storage plugin has started, which after a Slurm
        # upgrade converts the database first (accounting_storage_mysql.c, init): "tens of
        # minutes" on large databases (upgrades.shtml), and killing it then risks data loss.
        startupProbe=tcp_probe(paths.SLURMDBD_PORT, period=5, failures=SLURMDBD_START_PROBES),
        readinessProbe=tcp_probe(paths.SLURMDBD_PORT),
        livenessProbe=tcp_probe(paths.SLURMDBD_PORT, period=30, failures=4),
    )
    return {
        "metadata": metadata(spec, name, COMPONENT),
        "spec": {
            "replicas": 1,
            # Two slurmdbd against one database would race on schema upgrades.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector_labels(spec, COMPONENT)},
            "template": {
                "metadata": {
                    "labels": metadata(spec, name, COMPONENT)["labels"],
                    **jwt_key_annotations(spec),
                },
                "spec": {
                    **pod_identity(spec, COMPONENT),
                    **image_pull(spec),
                    **placement(spec.accounting.placement),
                    **pod_security(fsGroup=paths.SLURM_UID),
                    "initContainers": auth_sidecars(spec),
                    "containers": [slurmdbd],
                    "volumes": [
                        {"name": "slurmdbd-config", "configMap": {"name": config_map}},
                        _secret_volume("db-password", secret, key),
                        run_volume(),
                        {"name": "spool", "emptyDir": {}},
                        *(
                            [
                                {
                                    "name": "archive",
                                    "persistentVolumeClaim": {
                                        "claimName": archive_claim_name(spec)
                                    },
                                }
                            ]
                            if spec.accounting.purge.archive
                            else []
                        ),
                        *auth_volumes(spec, sack=True),
                        *jwt_key_volumes(spec),
                    ],
                },
            },
        },
    }
