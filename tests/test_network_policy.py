"""NetworkPolicies: which connections the rendered policies allow, computed from the objects
themselves (policies, pod template labels, ports), equals exactly the set the cluster uses."""

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from slurm_stack.offline import ProgramRun, manifests, run_program, validate_manifests
from slurm_stack.offline.render import run_stack
from slurm_stack.paths import SLURMCTLD_PORT
from slurm_stack.program import run
from tests.conftest import DEV_STACK, ROOT
from tests.helpers import kube

ITEST_STACK = ROOT / "tests" / "cluster" / "Pulumi.itest.yaml"
COMPONENT = "app.kubernetes.io/component"
POOL = "slurm-stack.io/pool"

# ------------------------------------------------------------------------- policy evaluation


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (with a namespace) or an address outside the cluster."""

    name: str
    namespace: str | None
    labels: Mapping[str, str] = field(default_factory=dict)
    ip: str = "10.244.0.2"


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) against labels; {} selects all."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        if not {
            "In": present and labels.get(key) in (values or []),
            "NotIn": not present or labels[key] not in (values or []),
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def peer_matches(peer: Mapping[str, Any], namespace: str, other: Peer) -> bool:
    """A NetworkPolicyPeer of a policy in ``namespace`` against ``other``. ipBlock names only
    addresses outside the cluster (the stricter reading, e.g. Cilium's); a podSelector without
    a namespaceSelector means the policy's own namespace."""
    if "ipBlock" in peer:
        if other.namespace is not None:
            return False
        address = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        networks = [ipaddress.ip_network(block["cidr"])]
        excepted = [ipaddress.ip_network(c) for c in block.get("except", [])]
        return any(address in n for n in networks if n.version == address.version) and not any(
            address in n for n in excepted if n.version == address.version
        )
    if other.namespace is None:
        return False
    if "namespaceSelector" in peer:
        name_label = {"kubernetes.io/metadata.name": other.namespace}
        in_namespace = selects(peer["namespaceSelector"], name_label)
    else:
        in_namespace = other.namespace == namespace
    return in_namespace and selects(peer.get("podSelector", {}), other.labels)


def port_matches(ports: list[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        if "port" not in entry:
            return True
        assert isinstance(entry["port"], int), "named ports are not used"
        if entry["port"] <= port <= entry.get("endPort", entry["port"]):
            return True
    return False


def policy_types(spec: Mapping[str, Any]) -> list[str]:
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def allowed(
    policies: Iterable[Mapping[str, Any]], source: Peer, target: Peer, port: int, protocol="TCP"
) -> bool:
    """Whether ``source`` may open a connection to ``target``:``port``: the target's ingress
    and the source's egress must both allow it (a pod no policy selects allows all)."""

    def side(pod: Peer, direction: str, other: Peer) -> bool:
        if pod.namespace is None:
            return True
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        applying = [
            p
            for p in policies
            if p["metadata"]["namespace"] == pod.namespace
            and selects(p["spec"]["podSelector"], pod.labels)
            and direction in policy_types(p["spec"])
        ]
        if not applying:
            return True
        return any(
            port_matches(rule.get("ports"), port, protocol)
            and (
                not rule.get(peers_key)
                or any(
                    peer_matches(peer, p["metadata"]["namespace"], other)
                    for peer in rule[peers_key]
                )
            )
            for p in applying
            for rule in p["spec"].get(key, [])
        )

    return side(target, "Ingress", source) and side(source, "Egress", target)


# ------------------------------------------------------------------------- the cluster's flows

ANY_PORT = "any"
EVERYONE = "everyone"  # any pod of any namespace, and any address outside the cluster
ANY_POD = "any pod"  # any pod of any namespace
JOBS = ("users", "reconfigure", "nccl-benchmark", "exporter")

# (source, destination, ports, who opens the connection). SRUN is slurm.conf's SrunPortRange.
SLURM_FLOWS: list[tuple[str, str, Any, str]] = [
    ("accounting", "database", {3306}, "slurmdbd -> MariaDB (slurmdbd.conf StorageHost)"),
    ("controller", "accounting", {6819}, "slurmctld -> slurmdbd (AccountingStorageHost)"),
    ("login", "accounting", {6819}, "sacct, sacctmgr, sreport in login sessions"),
    ("worker", "accounting", {6819}, "sacct, sacctmgr, sreport inside jobs"),
    ("users", "accounting", {6819}, "the users Job's sacctmgr (sync-users)"),
    ("accounting", "controller", {6817}, "slurmdbd pushes association/QOS updates"),
    ("login", "controller", {6817}, "sackd fetches the config (configless); user commands"),
    ("worker", "controller", {6817}, "slurmd registers and fetches the config; commands in jobs"),
    ("users", "controller", {6817}, "sacctmgr: the network guide lists it as a slurmctld client"),
    ("reconfigure", "controller", {6817}, "scontrol reconfigure"),
    ("nccl-benchmark", "controller", {6817}, "nccl-submit's sinfo, squeue, sbatch"),
    ("exporter", "controller", {6817}, "the metrics exporter's sinfo, squeue, sdiag"),
    ("exporter", "accounting", {6819}, "the metrics exporter's sacctmgr ping and sacct"),
    (ANY_POD, "exporter", {9341}, "a scraper -> the exporter's /metrics"),
    ("rest", "controller", {6817}, "slurmrestd's requests, each with its caller's token"),
    ("rest", "accounting", {6819}, "slurmrestd's slurmdb/ requests"),
    (ANY_POD, "rest", {6820}, "portals, CI systems, sessions -> slurmrestd"),
    ("controller", "worker", {6818}, "slurmctld -> slurmd: launch, ping, signal, terminate"),
    ("login", "worker", ANY_PORT, "srun's launch, sbcast, sstat -> slurmd; port forwards"),
    ("worker", "worker", ANY_PORT, "slurmd fan-out, srun in batch scripts, MPI/NCCL tasks"),
    ("controller", "worker", "SRUN", "slurmctld -> srun/salloc run inside a job"),
    ("controller", "login", "SRUN", "slurmctld -> srun/salloc on a login node"),
    ("worker", "login", "SRUN", "slurmstepd -> srun: I/O and task exits"),
    ("controller", "login", {6818}, "slurmctld -> sackd: reconfigure pushes (sackd --port)"),
    (EVERYONE, "login", {22}, "SSH (no source ranges given)"),
]
# auth: slurm gives the Jobs a sackd sidecar, which registers for pushes like login's.
AUTH_SLURM_FLOWS = [
    ("controller", job, {6818}, "slurmctld -> the Job's sackd: reconfigure pushes") for job in JOBS
]
# controller.metrics: Prometheus, from a namespace of its own, scrapes /metrics on 6817.
METRICS_FLOWS = [(ANY_POD, "controller", {6817}, "a scraper -> slurmctld's /metrics")]

# Every port the cluster's pods listen on, SrunPortRange's ends and what lies just outside it,
# and ports a job might open (torch.distributed, Jupyter).
PROBE_PORTS = (
    22, 3306, 6817, 6818, 6819, 6820, 9341, 60000, 60001, 61234, 63000, 63001, 8888, 29500,
)  # fmt: skip
OUTSIDE = [
    Peer("internet", None, ip="198.51.100.7"),
    Peer("prometheus", "monitoring", {"app.kubernetes.io/name": "prometheus"}, "10.244.9.9"),
    # A pod of someone else's in the cluster's namespace, and another cluster's login pod.
    Peer("stranger", "@namespace", {"app": "other"}, "10.244.8.8"),
    Peer(
        "other-cluster",
        "@namespace",
        {"app.kubernetes.io/name": "slurm", "app.kubernetes.io/instance": "x", COMPONENT: "login"},
        "10.244.7.7",
    ),
]


def srun_ports(run: ProgramRun) -> set[int]:
    """The range slurm.conf gives srun, from the rendered ConfigMap."""
    conf = next(
        r.inputs["data"]["slurm.conf"]
        for r in kube(run, "core/v1:ConfigMap")
        if "slurm.conf" in r.inputs.get("data", {})
    )
    match = re.search(r"^SrunPortRange=(\d+)-(\d+)$", conf, re.MULTILINE)
    assert match, "slurm.conf sets no SrunPortRange"
    first, last = int(match[1]), int(match[2])
    assert last - first + 1 >= 1000  # slurm.conf(5): "ideally 1000 or more ports"
    return {p for p in PROBE_PORTS if first <= p <= last}


def templates(run: ProgramRun) -> list[tuple[Any, dict[str, Any]]]:
    """(resource, pod template) of every workload of the run."""
    out = []
    for resource in run.resources:
        spec = resource.inputs.get("spec", {}) if resource.type.startswith("kubernetes:") else {}
        job = spec.get("jobTemplate", {}).get("spec", {})
        if template := spec.get("template") or job.get("template"):
            out.append((resource, template))
    return out


def pods(run: ProgramRun) -> list[Peer]:
    """One peer per pod template of the run, named by component (worker pools apart)."""
    out = []
    for resource, template in templates(run):
        labels = template["metadata"]["labels"]
        name = labels[COMPONENT] + (f":{labels[POOL]}" if POOL in labels else "")
        namespace = resource.inputs["metadata"]["namespace"]
        out.append(Peer(name, namespace, labels, f"10.244.1.{len(out) + 1}"))
    return out


def policies_of(run: ProgramRun) -> list[dict[str, Any]]:
    return [d for d in manifests(run.resources) if d["kind"] == "NetworkPolicy"]


def computed_flows(run: ProgramRun, extra: Iterable[Peer] = ()) -> set[tuple[str, str, int]]:
    """(source, destination, TCP port) for every connection the policies allow, sources
    and destinations named by component (a worker pool by `worker:<pool>`); ``extra`` are
    more peers outside the cluster."""
    policies = policies_of(run)
    ours = pods(run)
    namespace = ours[0].namespace
    outside = [
        Peer(p.name, namespace, p.labels, p.ip) if p.namespace == "@namespace" else p
        for p in [*OUTSIDE, *extra]
    ]
    return {
        (source.name, target.name, port)
        for target in ours
        for source in [*ours, *outside]
        if source is not target
        for port in PROBE_PORTS
        if allowed(policies, source, target, port)
    }


def expected_flows(
    run: ProgramRun, *flow_tables: list[tuple[str, str, Any, str]], extra: Iterable[Peer] = ()
) -> set:
    """The table's flows between the components this run has, expanded to peers and ports
    (``extra``: more peers outside the cluster, named by their name)."""
    extra_names = [p.name for p in extra]
    names = [p.name for p in pods(run)]
    srun = srun_ports(run)

    def expand(component: str) -> list[str]:
        if component in extra_names:
            return [component]
        if component == EVERYONE:
            return [*names, *(p.name for p in OUTSIDE), *extra_names]
        if component == ANY_POD:
            return [*names, *(p.name for p in OUTSIDE if p.namespace is not None)]
        return [n for n in names if n.split(":")[0] == component]

    out = set()
    for table in flow_tables:
        for source, target, ports, _ in table:
            port_set = set(PROBE_PORTS) if ports == ANY_PORT else srun if ports == "SRUN" else ports
            out |= {
                (s, t, port)
                for s in expand(source)
                for t in expand(target)
                if s != t
                for port in port_set
            }
    return out


def run_dev(change: Any) -> ProgramRun:
    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    change(config)
    return run_program(run, config={"slurm-stack:cluster": json.dumps(config)})


@pytest.fixture(scope="module")
def itest_run() -> ProgramRun:
    return run_stack(ITEST_STACK)


# ------------------------------------------------------------------------- tests


def test_the_itest_stack_allows_exactly_the_flows_slurm_uses(itest_run: ProgramRun) -> None:
    names = {p.name for p in pods(itest_run)}
    assert {"worker:cpu", "worker:gpu", "database", "nccl-benchmark", "jail"} <= names
    # controller.metrics on: scrapers from any namespace reach slurmctld's /metrics.
    assert computed_flows(itest_run) == expected_flows(itest_run, SLURM_FLOWS, METRICS_FLOWS)


def test_the_production_stack_allows_exactly_the_flows_slurm_uses_and_the_scraper(
    prod_run: ProgramRun,
) -> None:
    # External accounting: no database pod; metrics on: scrapers from any namespace.
    assert "database" not in {p.name for p in pods(prod_run)}
    expected = expected_flows(prod_run, SLURM_FLOWS, METRICS_FLOWS)
    assert computed_flows(prod_run) == expected


def test_auth_slurm_lets_slurmctld_push_configs_to_the_jobs_sackd() -> None:
    slurm_auth = run_dev(lambda c: c.update(auth="slurm"))
    expected = expected_flows(slurm_auth, SLURM_FLOWS, AUTH_SLURM_FLOWS)
    assert computed_flows(slurm_auth) == expected


def test_the_probe_covers_every_port_a_pod_listens_on(itest_run: ProgramRun) -> None:
    listened = {
        port["containerPort"]
        for _, template in templates(itest_run)
        for container in template["spec"]["containers"]
        for port in container.get("ports", [])
    }
    assert listened == {22, 3306, 6817, 6818, 6819, 6820, 9341}
    assert listened <= set(PROBE_PORTS)


def test_slurm_conf_and_the_policies_agree_on_srun_ports(itest_run: ProgramRun) -> None:
    assert srun_ports(itest_run) == {60001, 61234, 63000}
    ranges = [
        port
        for policy in policies_of(itest_run)
        for rule in policy["spec"].get("ingress", [])
        for port in rule.get("ports", [])
        if "endPort" in port
    ]
    assert {(p["port"], p["endPort"]) for p in ranges} == {(60001, 63000)}


def ssh_sources(run: ProgramRun, *addresses: str) -> dict[str, bool]:
    policies = policies_of(run)
    login = next(p for p in pods(run) if p.name == "login")
    peers = [Peer(a, None, ip=a) for a in addresses]
    peers.append(next(p for p in pods(run) if p.name == "controller"))
    return {peer.name: allowed(policies, peer, login, 22) for peer in peers}


def test_ssh_comes_only_from_the_load_balancers_source_ranges_or_the_given_ones() -> None:
    def load_balancer(config: dict[str, Any]) -> None:
        config["login"]["service"] = {
            "type": "LoadBalancer",
            "loadBalancerSourceRanges": ["203.0.113.0/24", "2001:db8:1::/48"],
        }

    restricted = run_dev(load_balancer)
    assert ssh_sources(restricted, "203.0.113.9", "2001:db8:1::5", "198.51.100.7") == {
        "203.0.113.9": True,
        "2001:db8:1::5": True,
        "198.51.100.7": False,
        "controller": False,  # a pod is not an address in the ranges
    }

    def own_ranges(config: dict[str, Any]) -> None:
        load_balancer(config)
        config["networkPolicy"] = {"sshSourceRanges": ["198.51.100.0/24"]}

    assert ssh_sources(run_dev(own_ranges), "203.0.113.9", "198.51.100.7") == {
        "203.0.113.9": False,
        "198.51.100.7": True,
        "controller": False,
    }


def test_login_worker_and_rest_egress_reaches_all_but_metadata_and_the_api_server() -> None:
    blocked = ["172.20.0.1/32", "10.0.0.0/28", "fd00:10::1/128"]
    result = run_dev(
        lambda c: c.update(networkPolicy={"apiServerCidrs": blocked}, restApi={"enabled": True})
    )
    policies = policies_of(result)
    coredns = Peer("coredns", "kube-system", {"k8s-app": "kube-dns"}, "10.244.5.5")
    by_name = {p.name: p for p in pods(result)}
    for name in ("login", "worker:cpu", "rest"):
        pod = by_name[name]

        def reaches(address: str, port: int, protocol: str = "TCP", pod: Peer = pod) -> bool:
            return allowed(policies, pod, Peer(address, None, ip=address), port, protocol)

        assert not reaches("169.254.169.254", 80)  # the cloud metadata service
        assert not reaches("172.20.0.1", 443) and not reaches("10.0.0.9", 6443)
        assert not reaches("fd00:10::1", 443)
        assert reaches("10.0.0.16", 443)  # just outside the blocked range
        assert reaches("198.51.100.7", 443) and reaches("2001:db8::1", 443)  # pip, datasets
        assert reaches("169.254.20.10", 53, "UDP")  # NodeLocal DNSCache
        assert allowed(policies, pod, coredns, 53, "UDP") and allowed(
            policies, pod, coredns, 53, "TCP"
        )
    # Pods that run no user code keep their egress (slurmdbd reaches an external database).
    metadata = Peer("metadata", None, ip="169.254.169.254")
    assert allowed(policies, by_name["accounting"], metadata, 80)


def test_by_default_only_the_metadata_address_is_blocked(itest_run: ProgramRun) -> None:
    egress = [p for p in policies_of(itest_run) if "Egress" in p["spec"]["policyTypes"]]
    assert [p["spec"]["egress"] for p in egress] == [
        [
            {
                "to": [
                    {"namespaceSelector": {}},
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}},
                    {"ipBlock": {"cidr": "::/0"}},
                ]
            }
        ]
    ]


def test_every_policy_is_valid_in_strict_mode(itest_run: ProgramRun, prod_run: ProgramRun) -> None:
    for result in (itest_run, prod_run):
        documents = policies_of(result)
        assert len(documents) >= 6
        assert validate_manifests(documents) == []  # every supported minor


def test_turned_off_no_policy_and_nothing_else_changes(dev_run: ProgramRun) -> None:
    off = run_dev(lambda c: c.update(networkPolicy={"enabled": False}))
    assert not policies_of(off)
    assert not [r for r in off.resources if r.type == "slurm-stack:index:NetworkPolicies"]
    on = [d for d in manifests(dev_run.resources) if d["kind"] != "NetworkPolicy"]
    assert manifests(off.resources) == on  # no pod template changes: no pod restarts
    assert policies_of(dev_run)


def test_the_policies_exist_before_the_clusters_pods(dev_run: ProgramRun) -> None:
    policies = {r.urn for r in kube(dev_run, "networking.k8s.io/v1:NetworkPolicy")}
    assert policies
    for resource in dev_run.resources:
        spec = resource.inputs.get("spec", {}) if resource.type.startswith("kubernetes:") else {}
        if "template" in spec and resource.type != "kubernetes:batch/v1:Job":
            assert policies <= set(resource.dependencies), resource.urn


def test_the_deny_comes_after_the_allows(dev_run: ProgramRun) -> None:
    policies = {
        r.inputs["metadata"]["name"]: r for r in kube(dev_run, "networking.k8s.io/v1:NetworkPolicy")
    }
    deny = policies.pop("dev-deny-ingress")
    assert {r.urn for r in policies.values()} == set(deny.dependencies)


def test_a_primary_and_a_backup_controller_reach_each_other() -> None:
    def with_backup(config: dict[str, Any]) -> None:
        config["controller"] = {
            **config.get("controller", {}),
            "replicas": 2,
            "stateVolume": {"size": "1Gi", "storageClass": "cephfs"},
        }

    for change, reachable in ((with_backup, True), (lambda _: None, False)):
        stack = run_dev(change)
        [controller] = [p for p in pods(stack) if p.name == "controller"]
        # Two pods of one template: the model's one peer stands for both.
        assert allowed(policies_of(stack), controller, controller, SLURMCTLD_PORT) is reachable


def test_a_nodes_sshd_is_reached_from_login_and_worker_pods_only() -> None:
    def with_node_sshd(config: dict[str, Any]) -> None:
        config["cgroups"] = {"enforce": True}
        config["workerPools"][0]["sshd"] = True

    stack = run_dev(with_node_sshd)
    policies = policies_of(stack)
    ours = pods(stack)
    [node] = [p for p in ours if p.name == "worker:cpu"]
    outside = [
        Peer(p.name, node.namespace, p.labels, p.ip) if p.namespace == "@namespace" else p
        for p in OUTSIDE
    ]
    for source in [*ours, *outside]:
        if source is node:
            continue
        reachable = source.name.split(":")[0] in ("login", "worker")
        assert allowed(policies, source, node, 22) is reachable, source.name


# externalNodes: a host in the declared ranges reaches slurmctld (registration, configless
# fetch, its jobs' clients), every port of the worker pods (a job spanning hosts and pods:
# srun's launches and the tasks' own ports) and srun on the login pods (its slurmstepd's
# I/O); a host outside the ranges reaches nothing but SSH.
OUTSIDE_HOST = Peer("outside-host", None, ip="192.0.2.9")
OUTSIDE_HOST_FLOWS = [
    ("outside-host", "controller", {SLURMCTLD_PORT}, "slurmd registers, fetches its config"),
    ("outside-host", "worker", ANY_PORT, "srun launches on pods; tasks talk on their ports"),
    ("outside-host", "login", "SRUN", "slurmstepd -> srun on a login pod"),
]


def with_outside_hosts(config: dict[str, Any]) -> None:
    config["externalNodes"] = {
        "addressRanges": ["192.0.2.0/28"],
        "pools": [{"name": "metal", "hosts": ["bm1", "bm2"]}],
    }


def test_outside_hosts_in_the_declared_ranges_reach_exactly_what_slurm_needs() -> None:
    hybrid = run_dev(with_outside_hosts)
    stranger = Peer("other-host", None, ip="192.0.2.77")  # beside the range, not in it
    computed = computed_flows(hybrid, extra=[OUTSIDE_HOST, stranger])
    expected = expected_flows(
        hybrid, SLURM_FLOWS, OUTSIDE_HOST_FLOWS, extra=[OUTSIDE_HOST, stranger]
    )
    assert computed == expected
    assert {flow for flow in computed if flow[0] == "other-host"} == {("other-host", "login", 22)}


def test_without_outside_hosts_no_address_reaches_slurmctld(dev_run: ProgramRun) -> None:
    assert not [
        rule
        for policy in policies_of(dev_run)
        for rule in policy["spec"].get("ingress", [])
        for peer in rule.get("from", [])
        if "ipBlock" in peer and policy["metadata"]["name"].endswith("controller-ingress")
    ]
