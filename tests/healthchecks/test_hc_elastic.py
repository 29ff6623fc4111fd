"""The elastic scaler's decisions: which size each pool takes when Slurm powers nodes up,
down, or gives up on one, and which pods it restarts. Slurm's answers are recorded
`scontrol` output; the API is an in-memory StatefulSet that keeps what it is told. The real
programs run on real Slurm in tests/cluster/test_elastic.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from slurm_stack_healthchecks.elastic import (
    ElasticConfig,
    ElasticPool,
    NodeRecord,
    Scaler,
    Slurm,
    in_cluster_api,
    parse_nodes,
    retry_failed,
    size_to_keep,
    sync_nodes,
)
from slurm_stack_healthchecks.kube_api import KubeApiError
from slurm_stack_healthchecks.runner import CommandResult

POOL = ElasticPool("cpu", "c-cpu", 0, 4, "Feature=cpu Weight=1 RealMemory=486 CPUs=1", 60)
GPU = ElasticPool("gpu", "c-gpu", 1, 2, "Feature=gpu Gres=gpu:1 Weight=1", 300)
CONFIG = ElasticConfig("ns", (POOL, GPU))


def node(name: str, state: str) -> str:
    return f"NodeName={name} Arch=x86_64 CoresPerSocket=1 State={state} ThreadsPerCore=1"


def test_power_states_are_read_from_scontrol_one_liners() -> None:
    text = "\n".join(
        [
            node("c-cpu-0", "ALLOCATED"),
            node("c-cpu-1", "IDLE+CLOUD+POWERED_DOWN"),
            node("c-cpu-2", "IDLE+POWERING_DOWN"),
            node("c-cpu-3", "IDLE+CLOUD+POWERING_UP"),
        ]
    )
    records = {r.name: r for r in parse_nodes(text)}
    assert not records["c-cpu-0"].given_back
    assert records["c-cpu-1"].given_back
    assert records["c-cpu-2"].given_back
    assert not records["c-cpu-3"].given_back


def test_nodes_are_told_apart_by_pool_and_ordinal() -> None:
    assert CONFIG.pool_of("c-cpu-12") == (POOL, 12)
    assert CONFIG.pool_of("c-gpu-0") == (GPU, 0)
    assert CONFIG.pool_of("c-cpuX-1") is None
    assert CONFIG.pool_of("c-cpu-") is None
    assert CONFIG.pool_of("other-0") is None


@pytest.mark.parametrize(
    ("states", "leaving", "size"),
    [
        # The idle tail goes; a busy node keeps everything below it.
        (["ALLOCATED", "IDLE+POWERING_DOWN", "IDLE+POWERING_DOWN"], ["c-cpu-1", "c-cpu-2"], 1),
        (["IDLE+POWERING_DOWN", "ALLOCATED", "IDLE+POWERING_DOWN"], ["c-cpu-0", "c-cpu-2"], 2),
        (["IDLE+POWERED_DOWN", "IDLE+POWERED_DOWN", "IDLE+POWERING_DOWN"], ["c-cpu-2"], 0),
        # A node being powered up is kept, whatever its neighbours do.
        (["IDLE+POWERED_DOWN", "IDLE+POWERING_UP", "IDLE+POWERING_DOWN"], ["c-cpu-2"], 2),
        # Listed as leaving though Slurm's record is older: it goes all the same.
        (["IDLE", "IDLE"], ["c-cpu-1"], 1),
    ],
)
def test_the_size_kept_is_one_above_the_highest_node_still_powered_up(
    states: list[str], leaving: list[str], size: int
) -> None:
    records = [NodeRecord(f"c-cpu-{i}", frozenset(s.split("+"))) for i, s in enumerate(states)]
    assert size_to_keep(POOL, records, leaving) == size


def test_min_replicas_are_never_given_back() -> None:
    records = [NodeRecord("c-gpu-0", frozenset({"IDLE", "POWERING_DOWN"}))]
    assert size_to_keep(GPU, records, ["c-gpu-0"]) == 1


class StatefulSets:
    """The API as far as the scaler uses it: scale subresources and pod deletes."""

    def __init__(self, sizes: dict[str, int], forbidden: Sequence[str] = ()) -> None:
        self.sizes, self.forbidden = sizes, set(forbidden)
        self.deleted: list[str] = []
        self.patches: list[tuple[str, int]] = []

    def _name(self, path: str) -> str:
        path, _, query = path.partition("?")
        assert query in ("", "fieldManager=slurm-stack-elastic-scaler")
        name = path.split("/")[-2] if path.endswith("/scale") else path.split("/")[-1]
        if name in self.forbidden:
            raise KubeApiError(f"{path}: HTTP 403 forbidden", 403)
        return name

    def get(self, path: str, params: Any = None) -> dict[str, Any]:
        return {"spec": {"replicas": self.sizes[self._name(path)]}}

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        name = self._name(path)
        self.sizes[name] = patch["spec"]["replicas"]
        self.patches.append((name, self.sizes[name]))
        return {"spec": {"replicas": self.sizes[name]}}

    def delete(self, path: str) -> dict[str, Any]:
        self.deleted.append(self._name(path))
        return {}


class RecordedSlurm:
    """A runner answering `scontrol` from a table of node states, recording updates."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self.calls: list[list[str]] = []

    def __call__(
        self, argv: Sequence[str], *, timeout: float, stdin: str | None = None
    ) -> CommandResult:
        self.calls.append(list(argv))
        if argv[:3] == ["scontrol", "-o", "show"]:
            names = argv[4:] or list(self.states)
            out = "\n".join(node(n, self.states[n]) for n in names if n in self.states)
            return CommandResult(tuple(argv), 0 if out else 1, out, "")
        if argv[:3] == ["scontrol", "show", "hostlist"]:
            return CommandResult(tuple(argv), 0, argv[3] + "\n", "")
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return CommandResult(tuple(argv), 0, "\n".join(argv[3].split(",")), "")
        if argv[:2] == ["sinfo", "-h"]:
            out = "c-cpu-2|elastic: pod c-cpu-2 did not register\nc-gpu-1|healthcheck: xid 79\n"
            return CommandResult(tuple(argv), 0, out, "")
        return CommandResult(tuple(argv), 0, "", "")


def scaler(sizes: dict[str, int], states: dict[str, str], forbidden: Sequence[str] = ()):
    api, runner, lines = StatefulSets(sizes, forbidden), RecordedSlurm(states), []
    return Scaler(CONFIG, api, Slurm(runner), lines.append), api, runner, lines  # type: ignore[arg-type]


def test_a_resume_grows_each_pool_to_its_highest_ordinal() -> None:
    s, api, _, _ = scaler({"c-cpu": 1, "c-gpu": 1}, {})
    assert s.resume(["c-cpu-1", "c-cpu-2", "c-gpu-1", "other-7"]) == []
    assert api.sizes == {"c-cpu": 3, "c-gpu": 2}
    assert api.deleted == []


def test_a_resume_of_a_parked_node_restarts_its_pod_and_does_not_shrink() -> None:
    s, api, _, lines = scaler({"c-cpu": 3, "c-gpu": 1}, {})
    assert s.resume(["c-cpu-0"]) == []
    assert api.deleted == ["c-cpu-0"]
    assert api.sizes["c-cpu"] == 3
    assert api.patches == []
    assert any("parked pod c-cpu-0" in line for line in lines)


def test_a_resume_the_api_refuses_marks_the_nodes_down_with_the_reason() -> None:
    s, _, runner, _ = scaler({"c-cpu": 0, "c-gpu": 1}, {}, forbidden=["c-cpu"])
    failures = s.resume(["c-cpu-0"])
    assert len(failures) == 1 and "403" in failures[0]
    update = next(c for c in runner.calls if c[:2] == ["scontrol", "update"])
    assert update[2:4] == ["NodeName=c-cpu-0", "State=DOWN"]
    assert update[4].startswith("Reason=elastic: could not start:")


def test_a_suspend_gives_back_the_idle_tail_only() -> None:
    states = {
        "c-cpu-0": "IDLE+POWERING_DOWN",
        "c-cpu-1": "MIXED",
        "c-cpu-2": "IDLE+POWERING_DOWN",
        "c-cpu-3": "IDLE+POWERING_DOWN",
    }
    s, api, _, _ = scaler({"c-cpu": 4, "c-gpu": 1}, states)
    assert s.suspend(["c-cpu-0", "c-cpu-2", "c-cpu-3"]) == []
    assert api.sizes["c-cpu"] == 2
    states["c-cpu-1"] = "IDLE+POWERING_DOWN"
    s.suspend(["c-cpu-1"])
    assert api.sizes["c-cpu"] == 0


def test_a_suspend_never_grows_a_pool() -> None:
    s, api, _, lines = scaler({"c-cpu": 1, "c-gpu": 1}, {"c-cpu-2": "ALLOCATED"})
    s.suspend(["c-cpu-0"])
    assert api.patches == []
    assert any("parked" in line for line in lines)


def test_a_failed_start_is_marked_down_naming_the_pod_and_given_back() -> None:
    states = {"c-cpu-0": "ALLOCATED", "c-cpu-1": "DOWN+CLOUD+POWERED_DOWN"}
    s, api, runner, _ = scaler({"c-cpu": 2, "c-gpu": 1}, states)
    assert s.resume_failed(["c-cpu-1"]) == []
    update = next(c for c in runner.calls if c[:2] == ["scontrol", "update"])
    assert update[:4] == ["scontrol", "update", "NodeName=c-cpu-1", "State=DOWN"]
    assert "pod c-cpu-1 did not register within 60s (startTimeoutSeconds)" in update[4]
    assert api.sizes["c-cpu"] == 1


def test_sync_creates_the_missing_nodes_powered_down_and_powers_up_the_minimum() -> None:
    runner = RecordedSlurm({"c-cpu-0": "IDLE", "c-gpu-0": "IDLE+CLOUD+POWERED_DOWN"})
    lines: list[str] = []
    assert sync_nodes(CONFIG, Slurm(runner), lines.append) == []
    creates = [c for c in runner.calls if c[:2] == ["scontrol", "create"]]
    assert creates == [
        ["scontrol", "create", "NodeName=c-cpu-1,c-cpu-2,c-cpu-3", "State=CLOUD",
         "Feature=cpu", "Weight=1", "RealMemory=486", "CPUs=1"],
        ["scontrol", "create", "NodeName=c-gpu-1", "State=CLOUD",
         "Feature=gpu", "Gres=gpu:1", "Weight=1"],
    ]  # fmt: skip
    powered = [c for c in runner.calls if c[-1] == "State=POWER_UP"]
    assert powered == [["scontrol", "update", "NodeName=c-gpu-0", "State=POWER_UP"]]


def test_a_template_change_returns_the_pools_failed_nodes_only() -> None:
    runner = RecordedSlurm({})
    assert retry_failed(Slurm(runner), "c-cpu-", lambda _: None) == []
    assert ["scontrol", "update", "NodeName=c-cpu-2", "State=RESUME"] in runner.calls
    assert not any("c-gpu-1" in " ".join(c) for c in runner.calls if c[1] == "update")


def test_the_api_address_comes_from_the_file_when_slurmctld_gives_no_variables(
    tmp_path: Path,
) -> None:
    address = tmp_path / "kube-api"
    address.write_text("10.0.0.8 6443\n")
    assert in_cluster_api({}, address).base_url == "https://10.0.0.8:6443"
    environ = {"KUBERNETES_SERVICE_HOST": "10.1.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster_api(environ, address).base_url == "https://10.1.0.1:443"


def test_the_config_is_read_beside_slurm_conf(tmp_path: Path) -> None:
    (tmp_path / "elastic.json").write_text(
        '{"namespace": "ns", "pools": [{"name": "cpu", "statefulSet": "c-cpu", '
        '"minReplicas": 0, "maxReplicas": 4, "nodeConf": "Feature=cpu Weight=1 '
        'RealMemory=486 CPUs=1", "startTimeoutSeconds": 60}]}'
    )
    config = ElasticConfig.beside(str(tmp_path / "slurm.conf"))
    assert config == ElasticConfig("ns", (POOL,))


def test_sync_deletes_powered_down_nodes_no_elastic_pool_claims() -> None:
    runner = RecordedSlurm(
        {
            "c-cpu-4": "IDLE+CLOUD+POWERED_DOWN",  # above maxReplicas (4): ordinals 0-3
            "c-old-0": "IDLE+CLOUD+POWERED_DOWN",  # a pool made fixed
            "c-old-1": "IDLE+CLOUD",  # runs: kept until Slurm gives it back
            "c-base-0": "IDLE",  # a fixed pool's node
            "c-cpu-0": "IDLE+CLOUD+POWERED_DOWN",
        }
    )
    sync_nodes(CONFIG, Slurm(runner), lambda _: None)
    deletes = [c for c in runner.calls if c[:2] == ["scontrol", "delete"]]
    assert deletes == [["scontrol", "delete", "NodeName=c-cpu-4,c-old-0"]]


def test_without_elastic_pools_sync_only_cleans_up(tmp_path: Path) -> None:
    config = ElasticConfig.beside(str(tmp_path / "slurm.conf"), missing_ok=True)
    runner = RecordedSlurm({"c-base-0": "IDLE"})
    assert sync_nodes(config, Slurm(runner), lambda _: None) == []
    assert [c[1] for c in runner.calls if c[0] == "scontrol"] == ["-o"]
