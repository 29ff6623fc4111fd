"""Least privilege, read from the running processes of the itest stack (README, "Least
privilege"): slurmctld, slurmdbd and MariaDB run as non-root with no capabilities, munged runs
as munge with none, the metrics exporter and slurmrestd run as the users their pods'
securityContexts name (`slurm_stack/k8s/`), slurmd and sshd hold the capabilities listed in
workers.py and login.py, and only the node-state controller's pod mounts a ServiceAccount
token. Each daemon's process and every process it started are read from the host's /proc
(Uid, Gid, CapEff, CapPrm, CapInh, CapAmb, CapBnd, NoNewPrivs; mountinfo): the kernel's word,
not the manifest's. The sandbox's own exec probes are left out: they are not the container's
processes but the host's, entering it (`sandbox/exec_probes.py`)."""

import os
from dataclasses import dataclass
from pathlib import Path

from slurm_stack import naming, paths
from slurm_stack.k8s import accounting, controller, login, metrics, node_state, rest_api, workers
from slurm_stack.k8s.elastic_access import SERVICE_ACCOUNT_DIR
from slurm_stack.sandbox.plan import Container, Pod
from slurm_stack.sandbox.podman import container_name
from tests.cluster.conftest import Cluster

# Linux capabilities by bit number (include/uapi/linux/capability.h).
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
)  # fmt: skip
HELD = ("CapEff", "CapPrm", "CapInh", "CapAmb")  # what a process can use or pass on


def capability_names(mask: int) -> set[str]:
    return {name for bit, name in enumerate(CAPABILITIES) if mask >> bit & 1}


@dataclass(frozen=True)
class Process:
    """One process as /proc/<pid>/status shows it."""

    pid: int
    status: dict[str, str]
    argv: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.status["Name"]

    @property
    def names(self) -> set[str]:
        """What the process may be known by: its name, and each word of its command line
        without a directory (slurmctld's name is its executable's, slurmctld-wlm; a script's
        name is the interpreter's first argument)."""
        return {self.name, *(Path(word).name for word in self.argv)}

    def ids(self, field: str) -> set[int]:
        """The real, effective, saved and filesystem ids of ``field`` (Uid or Gid)."""
        return {int(value) for value in self.status[field].split()}

    def capabilities(self, field: str) -> set[str]:
        return capability_names(int(self.status[field], 16))

    def __str__(self) -> str:
        shown = ("Uid", "Gid", "Groups", *HELD, "CapBnd", "NoNewPrivs")
        return (
            f"{self.name} (pid {self.pid}: "
            + ", ".join(f"{field} {self.status.get(field, '?')}" for field in shown)
            + ")"
        )


def status_of(pid: int) -> dict[str, str] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone meanwhile
        return None
    return {
        key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())
    }


def argv_of(pid: int) -> tuple[str, ...]:
    try:
        return tuple(Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1])
    except OSError:  # gone meanwhile
        return ()


def process_tree(root: int) -> list[Process]:
    """``root`` and every process descended from it, from the host's /proc."""
    everyone = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (status := status_of(int(entry.name))) is not None:
            everyone[int(entry.name)] = status
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in everyone:
            tree.append(Process(pid, everyone[pid], argv_of(pid)))
            todo += [child for child, s in everyone.items() if int(s["PPid"]) == pid]
    return tree


def containers(
    cluster: Cluster, component: str | None, name: str | None = None
) -> list[tuple[Pod, Container]]:
    """The containers of the long-running pods of ``component`` (any, if None): the main one,
    or the one called ``name``."""
    found = [
        (pod, c)
        for pod in cluster.sandbox.current_plan.pods
        if component in (None, pod.component) and not pod.job
        for c in pod.containers
        if (c.name == name if name else c.role == "main")
    ]
    assert found, f"no {name or 'main'} container in a pod of component {component}"
    return found


def main_pid(cluster: Cluster, pod: Pod, container: Container) -> int:
    name = container_name(pod, container)
    pid = cluster.sandbox.podman.main_pid(name)
    assert pid is not None, f"{name} does not run"
    return pid


def processes_of(cluster: Cluster, pod: Pod, container: Container) -> list[Process]:
    """The processes of one running container: its main process and those it started."""
    return process_tree(main_pid(cluster, pod, container))


def host_bounding_set() -> set[str]:
    """The capabilities podman can give a container here: those of the host's bounding set
    (a host that runs in a container itself may lack some)."""
    return Process(0, status_of(os.getpid()) or {}, ()).capabilities("CapBnd")


def assert_unprivileged(
    cluster: Cluster, component: str | None, daemon: str, uid: int, *, container: str | None = None
) -> list[str]:
    """In each of ``component``'s pods, ``daemon`` runs (in the main container, or the one
    called ``container``), and it and every process of that container run as ``uid`` (group
    the same) holding no capability, with no way to gain one (no_new_privs), its bounding set
    no more than what the container was given (none, for `non_root`). The containers read."""
    read = []
    for pod, c in containers(cluster, component, container):
        tree = processes_of(cluster, pod, c)
        where = f"{container_name(pod, c)}: "
        assert any(daemon in p.names for p in tree), where + ", ".join(map(str, tree))
        for process in tree:
            assert process.ids("Uid") == {uid}, where + str(process)
            assert process.ids("Gid") == {uid}, where + str(process)
            for field in HELD:
                assert process.capabilities(field) == set(), where + str(process)
            assert process.capabilities("CapBnd") <= set(c.cap_add), where + str(process)
            assert process.status["NoNewPrivs"] == "1", where + str(process)
        read.append(container_name(pod, c))
    return read


def test_slurmctld_runs_as_slurm_with_no_capabilities(cluster: Cluster) -> None:
    assert_unprivileged(cluster, controller.COMPONENT, "slurmctld", paths.SLURM_UID)


def test_slurmdbd_runs_as_slurm_with_no_capabilities(cluster: Cluster) -> None:
    assert_unprivileged(cluster, accounting.COMPONENT, "slurmdbd", paths.SLURM_UID)


def test_mariadb_runs_as_mysql_with_no_capabilities(cluster: Cluster) -> None:
    assert_unprivileged(cluster, accounting.DB_COMPONENT, "mariadbd", paths.MARIADB_UID)


def test_the_metrics_exporter_runs_as_slurm_with_no_capabilities(cluster: Cluster) -> None:
    # A Slurm client pod (k8s/jobs.py client_pod): the SlurmUser, as the scrape's commands.
    assert_unprivileged(cluster, metrics.COMPONENT, "healthcheck", paths.SLURM_UID)


def test_slurmrestd_runs_as_its_own_user_with_no_capabilities(cluster: Cluster) -> None:
    read = assert_unprivileged(cluster, rest_api.COMPONENT, "slurmrestd", paths.SLURMRESTD_UID)
    assert len(read) == cluster.sandbox.spec.rest_api.replicas, read


def test_munged_runs_as_munge_with_no_capabilities_in_every_pod(cluster: Cluster) -> None:
    # The sidecar starts as root with CHOWN, SETGID and SETUID to hand the key to munge;
    # munged itself holds none of them (its bounding set still lists them: setpriv leaves
    # it). The images give the munge group the munge user's id (images/base/Containerfile).
    read = assert_unprivileged(cluster, None, "munged", paths.MUNGE_UID, container="munge")
    pods = {name.split("--")[0] for name in read}
    components = {pod.component for pod in cluster.sandbox.current_plan.pods if pod.name in pods}
    assert components >= {
        controller.COMPONENT,
        accounting.COMPONENT,
        metrics.COMPONENT,
        login.COMPONENT,
        workers.COMPONENT,
    }, components


def held_by_daemon(cluster: Cluster, component: str, daemon: str) -> dict[str, set[str]]:
    """The effective capabilities of ``daemon`` (a root process) in each of ``component``'s
    main containers, by pod name, checked equal to its permitted and bounding sets."""
    held = {}
    for pod, c in containers(cluster, component):
        tree = processes_of(cluster, pod, c)
        where = f"{container_name(pod, c)}: " + ", ".join(map(str, tree))
        # Debian's binary is `<daemon>-wlm`: a slurmd that re-executed itself on a
        # `scontrol reconfigure` is named after it.
        named = [p for p in tree if p.name in (daemon, f"{daemon}-wlm")]
        assert len(named) == 1, where
        [process] = named
        for field in ("CapEff", "CapPrm", "CapBnd"):
            assert process.capabilities(field) == process.capabilities("CapEff"), where
        assert process.status["NoNewPrivs"] == "1", where
        held[pod.name] = process.capabilities("CapEff")
    return held


def test_slurmd_holds_the_capabilities_workers_py_lists(cluster: Cluster) -> None:
    # GPU pools add SYSLOG (workers.py, _security_context). Where the host cannot give
    # a capability podman leaves it out without a word: a host in a container may lack
    # SYS_RESOURCE, and then so does slurmd.
    possible = host_bounding_set()
    gpu_pools = {pool.name for pool in cluster.sandbox.spec.worker_pools if pool.gpus}
    held = held_by_daemon(cluster, workers.COMPONENT, "slurmd")
    assert len(held) == sum(pool.replicas for pool in cluster.sandbox.spec.worker_pools), held
    for pod, capabilities in held.items():
        listed = set(workers.SLURMD_CAPABILITIES)
        if pod.rsplit("-", 1)[0] in {naming.pool_name(cluster.name, p) for p in gpu_pools}:
            listed.add("SYSLOG")
        assert capabilities == listed & possible, f"{pod}: {capabilities ^ (listed & possible)}"


def test_sshd_holds_the_capabilities_login_py_lists_but_sys_admin(cluster: Cluster) -> None:
    # SYS_ADMIN binds the pod's pieces into the jail at start, then leaves the bounding set
    # before sshd starts (images/base/entrypoint, role_sshd).
    expected = (set(login.LOGIN_CAPABILITIES) - {"SYS_ADMIN"}) & host_bounding_set()
    held = held_by_daemon(cluster, login.COMPONENT, "sshd")
    assert len(held) == cluster.sandbox.spec.login.replicas, held
    for pod, capabilities in held.items():
        assert capabilities == expected, f"{pod}: {capabilities ^ expected}"


def test_only_the_node_state_controller_mounts_a_service_account_token(cluster: Cluster) -> None:
    # The kernel's mount table of each running container; /var/run is /run in the images.
    token_dir = SERVICE_ACCOUNT_DIR.removeprefix("/var")
    mounting = set()
    every = containers(cluster, None) + [
        (pod, c)
        for pod in cluster.sandbox.current_plan.pods
        if not pod.job
        for c in pod.containers
        if c.role == "sidecar"
    ]
    for pod, c in every:
        mounts = Path(f"/proc/{main_pid(cluster, pod, c)}/mountinfo").read_text().splitlines()
        if any(line.split()[4] in (token_dir, SERVICE_ACCOUNT_DIR) for line in mounts):
            mounting.add(pod.component)
    assert mounting == {node_state.COMPONENT}, mounting
