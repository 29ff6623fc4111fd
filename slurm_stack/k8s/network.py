"""NetworkPolicies: the cluster's pods accept only the connections Slurm makes.

One policy denies all ingress to every pod of the cluster (pods it did not create, such as a
mariadb-operator's, are not its to isolate); one per component then allows exactly the flows
in `flows()`, each from the components whose daemons or clients open it (Slurm's network
guide, doc/html/network.shtml, and the man pages cited below). Egress of login and worker
pods, where users' sessions and jobs run, may go anywhere but the cloud metadata address and
`networkPolicy.apiServerCidrs`.

Kubernetes says ipBlock is for addresses outside the cluster (kubernetes.io/docs/concepts/
services-networking/network-policies, "Behavior of to and from selectors"): pods are named by
label here, addresses only for the outside.
"""

import ipaddress
from dataclasses import dataclass

from slurm_stack import paths
from slurm_stack.k8s.common import Manifest, metadata, selector_labels
from slurm_stack.k8s.metrics import EXPORTER_PORT
from slurm_stack.spec.models import METADATA_CIDR, ClusterSpec
from slurm_stack.spec.versions import at_least

COMPONENT_LABEL = "app.kubernetes.io/component"
# A port, a (first, last) range, or None for every port and protocol.
Port = int | tuple[int, int] | None
EVERYWHERE = ("0.0.0.0/0", "::/0")
# Where users' sessions and jobs run: their egress is limited.
USER_COMPONENTS = ("login", "worker")


@dataclass(frozen=True)
class Flow:
    """Connections to ``target``'s pods on ``port``, from the pods of the ``sources``
    components, from every pod of every namespace (``any_pod``), from ``blocks`` (addresses
    outside the cluster), or from anyone (none of these)."""

    target: str
    port: Port
    sources: tuple[str, ...] = ()
    any_pod: bool = False
    blocks: tuple[str, ...] = ()


def client_jobs(spec: ClusterSpec) -> tuple[str, ...]:
    """Components of the Jobs, the metrics exporter and the node-state controller, that run
    Slurm commands (the populate-jail Job runs none)."""
    return (
        "users",
        "reconfigure",
        *(("nccl-benchmark",) if spec.nccl_enabled else ()),
        *(("exporter",) if spec.metrics.enabled else ()),
        *(("node-state",) if spec.node_state.enabled else ()),
    )


def rest_api_clients(spec: ClusterSpec) -> tuple[str, ...]:
    """The REST API's component, when it runs: a client of slurmctld and slurmdbd."""
    return ("rest",) if spec.rest_api.enabled else ()


def flows(spec: ClusterSpec) -> list[Flow]:
    """Every connection the cluster's pods accept, and who opens it."""
    accounting = spec.accounting.enabled
    srun = paths.SRUN_PORT_RANGE
    jobs = client_jobs(spec)
    ssh_ranges = ssh_source_ranges(spec)
    out = [
        # slurmctld: slurmd registers and fetches its config (configless), as does sackd on
        # login pods; clients everywhere (srun, sbatch, scontrol, sinfo, sacctmgr …), the
        # Jobs' and slurmrestd among them; slurmdbd pushes association and QOS updates to it.
        Flow(
            "controller",
            paths.SLURMCTLD_PORT,
            (
                "login",
                "worker",
                *jobs,
                *rest_api_clients(spec),
                *(("accounting",) if accounting else ()),
                # With a backup, each slurmctld asks the other whether it is in control, and
                # a returning primary tells the backup to step down.
                *(("controller",) if spec.controller.replicas == 2 else ()),
            ),
        ),
        # slurmd: slurmctld launches, pings and signals.
        Flow("worker", paths.SLURMD_PORT, ("controller",)),
        # From login and worker pods, everything: srun sends the step launch to slurmd (which
        # forwards it on, TreeWidth), sbcast and sstat reach slurmd, a job's tasks on several
        # nodes talk on ports they pick (MPI, NCCL's bootstrap, torch.distributed, PMIx), and
        # a login session's port forward reaches a server in a job (docs/deploy.md). Any
        # login user can run a job on a worker pod, so fewer ports from login pods would
        # protect nothing that worker pods can reach anyway.
        Flow("worker", None, ("login", "worker")),
        # srun, salloc and sattach listen in SrunPortRange for slurmctld's messages and for
        # slurmstepd's I/O and task exits (slurm.conf(5) SrunPortRange).
        Flow("worker", srun, ("controller",)),
        Flow("login", srun, ("controller", "worker")),
        # sackd listens on SlurmdPort for slurmctld's reconfigure pushes (sackd(8) --port).
        Flow("login", paths.SLURMD_PORT, ("controller",)),
        # SSH, on the container's port whatever port the Service has; from anyone when no
        # range is given.
        Flow("login", paths.SSH_PORT, blocks=ssh_ranges),
    ]
    if blocks := outside_ranges(spec):
        out.extend(
            [
                # Outside hosts' slurmd registers and fetches its config; srun, sbatch and
                # scontrol in their jobs ask slurmctld too.
                Flow("controller", paths.SLURMCTLD_PORT, blocks=blocks),
                # A job that spans outside hosts and worker pods: srun on a host launches on
                # the pods' slurmd, and the tasks talk on ports they pick (as between pods).
                Flow("worker", None, blocks=blocks),
                # slurmstepd on an outside host reaches srun on a login pod.
                Flow("login", srun, blocks=blocks),
            ]
        )
    if spec.auth == "slurm":
        # The Jobs' sackd sidecars register for reconfigure pushes too.
        out.extend(Flow(job, paths.SLURMD_PORT, ("controller",)) for job in jobs)
    if accounting:
        # slurmdbd: slurmctld sends accounting; sacct, sacctmgr and sreport run on login pods,
        # in jobs on worker pods, and in the users Job (sacctmgr).
        # The exporter asks slurmdbd too (sacctmgr ping, sacct for the NCCL verdicts), as does
        # slurmrestd for the slurmdb/ endpoints.
        exporter = ("exporter",) if spec.metrics.enabled else ()
        out.append(
            Flow(
                "accounting",
                paths.SLURMDBD_PORT,
                ("controller", "login", "worker", "users", *exporter, *rest_api_clients(spec)),
            )
        )
        if spec.accounting.mode == "embedded":
            # MariaDB: slurmdbd only.
            out.append(Flow("database", paths.MYSQL_PORT, ("accounting",)))
    if spec.metrics.enabled:
        # The exporter's /metrics: its scraper runs in a namespace of its own.
        out.append(Flow("exporter", EXPORTER_PORT, any_pod=True))
    if spec.rest_api.enabled:
        # slurmrestd: its callers (portals, CI systems, login sessions, jobs) may run in any
        # namespace; each request carries its own token.
        out.append(Flow("rest", paths.SLURMRESTD_PORT, any_pod=True))
    if spec.controller.metrics.enabled and at_least(spec.slurm_version, "25.11"):
        # slurmctld serves /metrics on its own port (doc/html/metrics.shtml); a scraper such
        # as Prometheus runs in a namespace of its own.
        out.append(Flow("controller", paths.SLURMCTLD_PORT, any_pod=True))
    return out


def outside_ranges(spec: ClusterSpec) -> tuple[str, ...]:
    """Where hosts outside Kubernetes are (externalNodes.addressRanges); empty without."""
    if spec.external_nodes is None:
        return ()
    return tuple(
        str(ipaddress.ip_network(r, strict=False)) for r in spec.external_nodes.address_ranges
    )


def ssh_source_ranges(spec: ClusterSpec) -> tuple[str, ...]:
    """Where SSH may come from: networkPolicy.sshSourceRanges, else the load balancer's
    source ranges (the login Service's externalTrafficPolicy Local keeps client addresses),
    else anywhere (an empty tuple)."""
    ranges = spec.network_policy.ssh_source_ranges or spec.login.service.load_balancer_source_ranges
    return tuple(str(ipaddress.ip_network(r, strict=False)) for r in ranges)


def policy_name(spec: ClusterSpec, what: str) -> str:
    """`<cluster>-<what>`: NetworkPolicies share no name space with other kinds."""
    return f"{spec.name}-{what}"


def _pods(spec: ClusterSpec, components: tuple[str, ...]) -> Manifest:
    """A podSelector for the cluster's pods of ``components``."""
    if len(components) == 1:
        return {"matchLabels": selector_labels(spec, components[0])}
    common = selector_labels(spec, components[0])
    common.pop(COMPONENT_LABEL)
    return {
        "matchLabels": common,
        "matchExpressions": [
            {"key": COMPONENT_LABEL, "operator": "In", "values": list(components)}
        ],
    }


def _port(port: Port) -> list[Manifest]:
    if port is None:
        return []
    if isinstance(port, tuple):
        return [{"protocol": "TCP", "port": port[0], "endPort": port[1]}]
    return [{"protocol": "TCP", "port": port}]


def _ingress_rule(spec: ClusterSpec, flow: Flow) -> Manifest:
    peers: list[Manifest] = []
    if flow.sources:
        peers.append({"podSelector": _pods(spec, flow.sources)})
    if flow.any_pod:
        peers.append({"namespaceSelector": {}})
    peers.extend({"ipBlock": {"cidr": block}} for block in flow.blocks)
    rule: Manifest = {"from": peers} if peers else {}  # no `from`: anyone
    if ports := _port(flow.port):
        rule["ports"] = ports
    return rule


def deny_ingress_policy(spec: ClusterSpec) -> Manifest:
    """Every pod of the cluster accepts nothing but what another policy allows."""
    cluster = selector_labels(spec, "network")
    cluster.pop(COMPONENT_LABEL)
    return {
        "metadata": metadata(spec, policy_name(spec, "deny-ingress"), "network"),
        "spec": {"podSelector": {"matchLabels": cluster}, "policyTypes": ["Ingress"]},
    }


def ingress_policies(spec: ClusterSpec) -> list[Manifest]:
    """One policy per component that accepts connections, with a rule per flow."""
    rules: dict[str, list[Manifest]] = {}
    for flow in flows(spec):
        rules.setdefault(flow.target, []).append(_ingress_rule(spec, flow))
    return [
        {
            "metadata": metadata(spec, policy_name(spec, f"{target}-ingress"), target),
            "spec": {
                "podSelector": _pods(spec, (target,)),
                "policyTypes": ["Ingress"],
                "ingress": target_rules,
            },
        }
        for target, target_rules in rules.items()
    ]


def _blocked(spec: ClusterSpec, version: int) -> list[str]:
    blocked = [METADATA_CIDR, *spec.network_policy.api_server_cidrs]
    return [c for c in blocked if ipaddress.ip_network(c).version == version]


def egress_policy(spec: ClusterSpec) -> Manifest:
    """Login sessions and jobs reach every pod and the internet (DNS, pip, datasets), but not
    the cloud metadata address or the API server; nor does slurmrestd, which serves requests
    from any namespace."""
    everything = []
    for version, cidr in ((4, EVERYWHERE[0]), (6, EVERYWHERE[1])):
        block: Manifest = {"cidr": cidr}
        if blocked := _blocked(spec, version):
            block["except"] = blocked
        everything.append({"ipBlock": block})
    return {
        "metadata": metadata(spec, policy_name(spec, "user-egress"), "network"),
        "spec": {
            "podSelector": _pods(spec, (*USER_COMPONENTS, *rest_api_clients(spec))),
            "policyTypes": ["Egress"],
            # Pods by selector (ipBlock is for addresses outside the cluster), the rest by
            # address.
            "egress": [{"to": [{"namespaceSelector": {}}, *everything]}],
        },
    }
