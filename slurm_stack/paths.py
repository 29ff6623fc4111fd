"""Paths and ports inside the project's containers, shared by renderers and pod builders."""

SLURM_CONF_DIR = "/etc/slurm"


def controller_config_dir(config_hash: str) -> str:
    """Where slurmctld reads its config files: a directory named by their hash, so that
    `scontrol show config` (SLURM_CONF) tells which config the running slurmctld started on."""
    return f"{SLURM_CONF_DIR}/config-{config_hash}"


STATE_SAVE_DIR = "/var/spool/slurmctld"
SLURMD_SPOOL_DIR = "/var/spool/slurmd"
SLURMDBD_SPOOL_DIR = "/var/spool/slurmdbd"
SLURMDBD_ARCHIVE_DIR = "/var/spool/slurmdbd/archive"
SLURM_RUN_DIR = "/run/slurm"
MUNGE_SOCKET_DIR = "/run/munge"
MUNGE_KEY_DIR = "/run/secrets/munge"  # not under /etc/munge, which only munge may enter
SLURM_KEY_DIR = "/run/secrets/slurm"  # auth/slurm: the Secret, root-only (slurmd, root Jobs)
SLURM_KEY_COPY_DIR = "/run/slurm-key"  # auth/slurm: a copy owned by SlurmUser, in memory
JAIL_DIR = "/mnt/jail"
SUBMOUNT_STAGING_DIR = "/mnt/submounts"
GPU_DRIVER_DIR = "/run/slurm-stack/gpu-driver"  # this node's driver files (GPU pools only)
# gres.conf lines of the pod's own GPUs, written by a worker's entrypoint (empty elsewhere):
# gres.conf includes it, and the jail plugin reads which device each GPU index is.
NODE_GRES_CONF = "/etc/slurm-stack/node-gres.conf"
# Root-only directories on a worker holding each job's private /tmp and /dev/shm (one
# directory per job id, bound in by the jail plugin, removed by the epilog).
JOB_TMP_DIR = "/var/lib/slurm-stack/job-tmp"
# Unpacked images of container jobs (containers.cache): in the worker pod, or on the jail's
# volume (root-only) where every node sharing the jail finds them.
CONTAINER_CACHE_NODE_DIR = "/var/cache/slurm-stack/containers"
CONTAINER_CACHE_JAIL_DIR = f"{JAIL_DIR}/var/cache/slurm-stack/containers"
JOB_SHM_DIR = "/dev/shm/slurm-stack-jobs"
SSH_HOST_KEY_DIR = "/etc/ssh/host-keys"
SSH_AUTHORIZED_KEYS_DIR = "/etc/ssh/authorized-keys"  # the users ConfigMap, in login pods
USERS_DIR = "/etc/slurm-stack/users"  # the users ConfigMap, in the users Job
SSHD_CONFIG_DIR = "/etc/ssh/slurm-stack"
DB_PASSWORD_DIR = "/run/secrets/slurmdbd"
# The REST API's JWT signing key, in slurmctld and slurmdbd pods only (AuthAltParameters).
JWT_KEY_DIR = "/run/secrets/jwt"
JWT_KEY_FILE = "jwt_hs256.key"
SSSD_CONFIG_DIR = "/etc/sssd"  # where the sssd sidecar puts its private copy of the Secret
SSSD_SECRET_DIR = "/run/secrets/sssd"  # the sssd Secret, in the sssd sidecar
SSS_PIPES_DIR = "/var/lib/sss/pipes"  # sssd's sockets, shared by the pod and bound into the jail
PROJECT_LIB_DIR = "/usr/lib/slurm-stack"

# The Slurm client that jobs and login sessions run is their pod's own, so it always matches
# the slurmd or sackd beside it, also while a version change rolls through the cluster: these
# paths of the pod (Debian's slurm-client commands and the plugin directory, which holds
# libslurmfull.so) are bound read-only over the jail's copies, wherever the jail has them.
SLURM_PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
SLURM_CLIENT_COMMANDS = (
    "sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol",
    "scrontab", "scrun", "sdiag", "sinfo", "sprio", "squeue", "sreport", "srun", "sshare",
    "sstat", "strigger", "swait",
)  # fmt: skip
SLURM_CLIENT_PATHS = (*(f"/usr/bin/{name}" for name in SLURM_CLIENT_COMMANDS), SLURM_PLUGIN_DIR)
CHROOT_PLUGIN = f"{PROJECT_LIB_DIR}/spank_chroot.so"
HEALTHCHECK_PROGRAM = f"{PROJECT_LIB_DIR}/healthcheck"
# slurmctld's power-saving programs: links to the healthcheck program, in the controller image.
ELASTIC_RESUME = f"{PROJECT_LIB_DIR}/elastic-resume"
ELASTIC_SUSPEND = f"{PROJECT_LIB_DIR}/elastic-suspend"
ELASTIC_RESUME_FAIL = f"{PROJECT_LIB_DIR}/elastic-resume-fail"
EPILOG = f"{PROJECT_LIB_DIR}/epilog"  # slurmd's, in worker pods
# On a host outside Kubernetes that runs jobs on its own root filesystem: the jail plugin
# leaves its steps there (chroot_plugin/spank_chroot.c HOST_ROOT_MARKER).
OUTSIDE_HOST_ROOT_MARKER = "/etc/slurm-stack/jobs-on-host-root"
CONTAINER_FETCH = f"{PROJECT_LIB_DIR}/container-fetch"  # pulls --container-image, in worker pods
# containerRegistryAuth, root-only in worker pods; the fetch program reads it (same path).
REGISTRY_AUTH_DIR = "/etc/slurm-stack/registry"
REGISTRY_AUTH_FILE = "auth.json"
AUTHORIZED_KEYS_COMMAND = f"{PROJECT_LIB_DIR}/authorized-keys"  # sshd's, in login pods
ROOT_SESSION = f"{PROJECT_LIB_DIR}/root-session"  # root's ForceCommand, in login pods
# workerPools[].sshd: what login sessions' ssh reads, bound into the jail by login pods, and
# where login pods find the nodes' public host keys and that ssh_config.
NODE_SSH_CONFIG_IN_JAIL = "/etc/ssh/ssh_config.d/slurm-stack-nodes.conf"
NODE_KNOWN_HOSTS_IN_JAIL = "/etc/ssh/ssh_known_hosts.slurm-stack-nodes"
NODE_HOST_KEYS_DIR = "/etc/slurm-stack/node-host-keys"
NODE_SSH_CONFIG_DIR = "/etc/slurm-stack/node-ssh"
SYNC_USERS = f"{PROJECT_LIB_DIR}/sync-users"  # the users Job's program

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SSH_PORT = 22
MYSQL_PORT = 3306
SLURMRESTD_PORT = 6820  # slurmrestd's customary port (Slurm's rest_quickstart guide)
# SrunPortRange: srun, salloc and sattach listen here for slurmctld and slurmstepd (the
# NetworkPolicies open it). slurm.conf(5) asks for 1000 or more ports and gives this example;
# one srun takes 4, plus 2 for every 48 nodes beyond the first 48, plus 1 with --pty.
SRUN_PORT_RANGE = (60001, 63000)

# Fixed ids baked into the project's images, so files on shared volumes agree everywhere.
SLURM_UID = 64030
SLURM_USER = "slurm"  # SlurmUser
MUNGE_UID = 64031
SLURMRESTD_UID = 64032  # the rest image's slurmrestd user
MARIADB_UID = 999

ENTRYPOINT = f"{PROJECT_LIB_DIR}/entrypoint"
POPULATE_JAIL = f"{PROJECT_LIB_DIR}/populate-jail"
JAIL_MARKER = ".slurm-stack-populated"
# The site's PrologSlurmctld/EpilogSlurmctld scripts in the controller pod: a path that does
# not change with the config hash, since slurm.conf names them absolutely.
SLURMCTLD_SCRIPTS_DIR = "/etc/slurm-stack/slurmctld-scripts"
# The site's read-only files for its scripts, in worker and controller pods.
SITE_FILES_DIR = "/etc/slurm-stack/site-files"
# Each node's latest quick-check results, in the jail (so every node can write its own and
# the exporter read them all) and readable there by users too.
HEALTHCHECK_RESULTS_IN_JAIL = "var/lib/slurm-stack/healthchecks"
# Where the exporter mounts only that directory of the jail.
HEALTHCHECK_RESULTS_MOUNT = "/var/lib/slurm-stack/healthchecks"
