"""Elastic pools on real Slurm: power saving starts and gives back worker pods.

Booted from `Pulumi.elastic.yaml`: pool cpu is elastic (0 to 3 nodes, 5 s idle, 30 s to
start) and the only pool of partition main; pool base is fixed (1 node). The scaler runs as
slurmctld's ResumeProgram/SuspendProgram and changes the pool's StatefulSet size through the
sandbox's stand-in API (its `scale` subresource), whose StatefulSet controller starts and
stops the pods. Every job's fate is read from sacct, polling with a bounded wait.
"""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for

STACK = Path(__file__).resolve().parent / "Pulumi.elastic.yaml"
NODES = ["elastic-cpu-0", "elastic-cpu-1", "elastic-cpu-2"]
IDLE_SECONDS = 5
START_TIMEOUT_SECONDS = 30
# Idle time, Slurm's power-save scan (every second), SuspendTimeout (5 s here) and a margin.
GIVEN_BACK_WITHIN = IDLE_SECONDS + 1 + 5 + 45
START_WITHIN = 90  # submit to start from zero: the pod's start and slurmd's registration


@pytest.fixture(scope="module")
def elastic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    import yaml

    document = yaml.safe_load(STACK.read_text())
    cluster = boot_stack(
        document,
        tmp_path_factory.mktemp("elastic"),
        4,
        settled=lambda c: (
            c.node_states().get("elastic-base-0") == "idle"
            and all(c.node_states().get(n) == "idle~" for n in NODES)
        ),
    )
    yield cluster
    tear_down(cluster)


def pool_pods(cluster: Cluster) -> list[str]:
    """The elastic pool's pods that run now."""
    running = cluster.sandbox.applier().running_pods()
    return sorted(name for name in running if name.startswith("elastic-cpu-"))


def states(cluster: Cluster) -> dict[str, str]:
    """The elastic nodes' compact states (`idle~`, `alloc#`, ...), from sinfo."""
    out = cluster.ok(cluster.ctl("sinfo -N -h -p main -o '%N %t'"))
    return dict(line.split() for line in out.splitlines() if line.strip())


def submit(cluster: Cluster, options: str) -> str:
    return cluster.ok(cluster.login(f"sbatch --parsable {options}")).strip()


def sacct(cluster: Cluster, job: str, fields: str) -> str:
    return cluster.ok(cluster.ctl(f"sacct -X -n -P -j {job} -o {fields}")).strip()


def ended(cluster: Cluster, job: str, timeout: float = 180) -> str:
    """The job's `state|nodelist|submit|start` once it has ended."""
    ends = ("COMPLETED", "CANCELLED", "FAILED", "NODE_FAIL", "TIMEOUT")

    def row() -> str:
        line = sacct(cluster, job, "state,nodelist,submit,start")
        return line if line.startswith(ends) else ""

    try:
        return wait_for(f"job {job} to end", row, timeout=timeout)
    except pytest.fail.Exception as error:
        status = cluster.ctl(f"scontrol show job {job} -o").stdout.strip()
        pytest.fail(f"{error}\nscontrol: {status}\nsinfo: {states(cluster)}")


def all_given_back(cluster: Cluster) -> bool:
    return not pool_pods(cluster) and all(s == "idle~" for s in states(cluster).values())


def wait_all_given_back(cluster: Cluster) -> None:
    wait_for("every elastic node given back", lambda: all_given_back(cluster), GIVEN_BACK_WITHIN)


def seconds_between(start: str, end: str) -> float:
    def parse(stamp: str) -> float:
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))

    return parse(end) - parse(start)


def test_an_elastic_pool_boots_with_no_pod_and_its_nodes_powered_down(elastic: Cluster) -> None:
    assert pool_pods(elastic) == []
    assert states(elastic) == dict.fromkeys(NODES, "idle~")
    # The fixed pool's node is not Slurm's to power down.
    assert elastic.node_states()["elastic-base-0"] == "idle"


def test_a_job_starts_the_pods_it_needs_and_they_are_given_back_when_idle(
    elastic: Cluster,
) -> None:
    wait_all_given_back(elastic)
    job = submit(elastic, "-N2 --wrap 'hostname; sleep 2'")
    state, nodes, submitted, started = ended(elastic, job).split("|")
    assert state == "COMPLETED"
    assert nodes == "elastic-cpu-[0-1]"
    waited = seconds_between(submitted, started)
    print(f"elastic: submit to start from zero, 2 nodes: {waited:.0f}s")
    assert waited <= START_WITHIN
    wait_all_given_back(elastic)
    # No ghost and nothing left behind: the same three nodes, no drain of ours.
    assert sorted(states(elastic)) == NODES
    assert not [n for n in NODES if elastic.node_reason(n).startswith("k8s:")]


def test_only_the_idle_tail_is_given_back_and_a_parked_node_runs_again(elastic: Cluster) -> None:
    wait_all_given_back(elastic)
    long_job = submit(elastic, "-N1 -w elastic-cpu-1 --wrap 'sleep 600'")
    wait_for("the long job to run", lambda: elastic.job_state(long_job) == "RUNNING", START_WITHIN)
    # Pod 0 started with pod 1 (a StatefulSet grows by its ordinals); node 0 stays idle and
    # Slurm powers it down below a busy node: its pod stays, parked.
    wait_for("node 0 powered down", lambda: states(elastic)["elastic-cpu-0"] == "idle~",
             GIVEN_BACK_WITHIN)  # fmt: skip
    assert pool_pods(elastic) == ["elastic-cpu-0", "elastic-cpu-1"]
    assert states(elastic)["elastic-cpu-1"] in ("alloc", "mix")
    # A job for the parked node: its pod is started afresh and the job runs there.
    job = submit(elastic, "-N1 -w elastic-cpu-0 --wrap 'hostname'")
    state, nodes, _, _ = ended(elastic, job).split("|")
    assert (state, nodes) == ("COMPLETED", "elastic-cpu-0")
    assert elastic.job_state(long_job) == "RUNNING"
    elastic.ok(elastic.ctl(f"scancel {long_job}"))
    wait_all_given_back(elastic)
    assert sacct(elastic, long_job, "state").startswith("CANCELLED")


def test_running_up_again_with_no_change_leaves_the_live_size_alone(elastic: Cluster) -> None:
    wait_all_given_back(elastic)
    job = submit(elastic, "-N1 --wrap 'sleep 120'")
    wait_for("the job to run", lambda: elastic.job_state(job) == "RUNNING", START_WITHIN)
    before = pool_pods(elastic)
    report = elastic.sandbox.up(build=False)
    assert not [p for p in [*report.created, *report.removed] if p.startswith("elastic-cpu-")]
    assert pool_pods(elastic) == before
    assert elastic.job_state(job) == "RUNNING"
    elastic.ok(elastic.ctl(f"scancel {job}"))


def test_a_job_larger_than_the_pool_can_grow_is_refused(elastic: Cluster) -> None:
    # Slurm counts the powered-down nodes as the partition's: 3 one-CPU nodes at most.
    result = elastic.login("sbatch --parsable -N4 --wrap hostname")
    assert result.returncode != 0
    assert "Batch job submission failed: More processors requested than permitted" in (
        result.stderr
    )


def test_the_scalers_token_reaches_its_pool_and_nothing_else(elastic: Cluster) -> None:
    """From the slurmctld container, with the token it mounts: the elastic pool's scale
    subresource answers; the fixed pool's, and the namespace's Secrets, are forbidden."""
    probe = (
        "import json,sys; sys.path.insert(0, '/usr/lib/slurm-stack');"
        "from slurm_stack_healthchecks.elastic import in_cluster_api;"
        "from slurm_stack_healthchecks.kube_api import KubeApiError;"
        "api = in_cluster_api({});"
        "out = {};"
        "paths = {'own': '/apis/apps/v1/namespaces/slurm-elastic/statefulsets/elastic-cpu/scale',"
        " 'other': '/apis/apps/v1/namespaces/slurm-elastic/statefulsets/elastic-base/scale',"
        " 'secrets': '/api/v1/namespaces/slurm-elastic/secrets'};\n"
        "for key, path in paths.items():\n"
        "    try: api.get(path); out[key] = 200\n"
        "    except KubeApiError as e: out[key] = e.status\n"
        "try: api.merge_patch(paths['other'], {'spec': {'replicas': 5}}); out['patch'] = 200\n"
        "except KubeApiError as e: out['patch'] = e.status\n"
        "print(json.dumps(out))"
    )
    out = elastic.ok(elastic.ctl(f'python3 -c "{probe}"'))
    assert json.loads(out) == {"own": 200, "other": 403, "secrets": 403, "patch": 403}


def set_elastic(cluster: Cluster, elastic: dict | None, replicas: int | None = None) -> None:  # type: ignore[type-arg]
    """The cpu pool's `elastic` (None: a fixed pool of ``replicas``), as a user edits it."""

    def change(spec: dict) -> None:  # type: ignore[type-arg]
        pool = next(p for p in spec["workerPools"] if p["name"] == "cpu")
        pool.pop("replicas", None)
        if elastic is None:
            pool.pop("elastic", None)
            pool["replicas"] = replicas
        else:
            pool["elastic"] = elastic

    cluster.edit_stack(change)


ELASTIC = {"minReplicas": 0, "maxReplicas": 3, "idleSeconds": IDLE_SECONDS,
           "startTimeoutSeconds": START_TIMEOUT_SECONDS}  # fmt: skip


def test_min_replicas_keeps_its_nodes_up_and_lowering_it_gives_them_back(
    elastic: Cluster,
) -> None:
    wait_all_given_back(elastic)
    set_elastic(elastic, {**ELASTIC, "minReplicas": 1})
    try:
        elastic.sandbox.up(build=False)
        wait_for("node 0 up for minReplicas", lambda: states(elastic)["elastic-cpu-0"] == "idle",
                 START_WITHIN)  # fmt: skip
        # Idle for longer than idleSeconds and one power-save scan more: still up.
        deadline = time.monotonic() + IDLE_SECONDS + 15
        while time.monotonic() < deadline:
            assert states(elastic)["elastic-cpu-0"] == "idle"
            assert pool_pods(elastic) == ["elastic-cpu-0"]
            time.sleep(1)
    finally:
        set_elastic(elastic, ELASTIC)
        elastic.sandbox.up(build=False)
    wait_all_given_back(elastic)


def test_a_pool_made_fixed_and_elastic_again_keeps_its_running_job(elastic: Cluster) -> None:
    wait_all_given_back(elastic)
    job = submit(elastic, "-N1 --wrap 'sleep 45'")
    wait_for("the job running", lambda: elastic.job_state(job) == "RUNNING", START_WITHIN)
    set_elastic(elastic, None, replicas=1)
    try:
        elastic.sandbox.up(build=False)
        # A fixed pool of one node: the nodes it no longer has are gone from Slurm.
        wait_for("only node 0 left", lambda: sorted(states(elastic)) == ["elastic-cpu-0"], 60)
    finally:
        set_elastic(elastic, ELASTIC)
        elastic.sandbox.up(build=False)
    wait_for("the nodes back, powered down", lambda: sorted(states(elastic)) == NODES, 60)
    state, nodes, _, _ = ended(elastic, job).split("|")
    assert (state, nodes) == ("COMPLETED", "elastic-cpu-0")
    wait_all_given_back(elastic)


def test_a_pool_whose_pods_cannot_start_marks_its_nodes_down_and_the_fix_runs_the_job(
    elastic: Cluster,
) -> None:
    from slurm_stack.sandbox.apply import SandboxError

    wait_all_given_back(elastic)

    def set_worker_image(image: str | None) -> None:
        def change(spec: dict) -> None:  # type: ignore[type-arg]
            images = spec.setdefault("images", {})
            images.pop("worker", None)
            if image:
                images["worker"] = image

        elastic.edit_stack(change)

    set_worker_image("localhost/slurm-stack/worker:no-such-tag")
    try:
        with pytest.raises(SandboxError):  # the fixed pool's rolling update stops
            elastic.sandbox.up(build=False)
        job = submit(elastic, "-N1 --wrap hostname")
        wanted = f"elastic: pod elastic-cpu-0 did not register within {START_TIMEOUT_SECONDS}s"
        wait_for("node 0 down, naming its pod",
                 lambda: elastic.node_reason("elastic-cpu-0").startswith(wanted),
                 START_TIMEOUT_SECONDS + START_WITHIN)  # fmt: skip
        assert states(elastic)["elastic-cpu-0"] == "down~"
        # Not started: pending, or waiting for the next node Slurm tries to power up.
        assert elastic.job_state(job) in ("PENDING", "CONFIGURING")
        wait_for("the pod given back", lambda: "elastic-cpu-0" not in pool_pods(elastic), 60)
    finally:
        set_worker_image(None)
        elastic.sandbox.up(build=False)
    state, _, _, _ = ended(elastic, job, timeout=3 * 60 + START_WITHIN).split("|")
    assert state == "COMPLETED"
