"""Day 2 on real Slurm: updates of pod templates and images, and their jobs' fates.

Booted from `Pulumi.updates.yaml` (one pool of two nodes; updates wait for jobs). A change of
the pool's template replaces its pods one at a time, highest ordinal first, each when its
jobs are done; a template whose pod never becomes ready stops the roll there, and the next
apply with a good template recovers without a pod deleted by hand. Every job's fate is read
from sacct; times are compared as epoch seconds (sacct's End, podman's StartedAt).
"""

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from slurm_stack.sandbox.apply import SandboxError, job_log
from tests.cluster.conftest import Cluster, running_stack, wait_for

STACK = Path(__file__).resolve().parent / "Pulumi.updates.yaml"
NODES = ("updates-cpu-0", "updates-cpu-1")


@pytest.fixture(scope="module")
def updates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_stack(STACK, tmp_path_factory, 2)


def submit(cluster: Cluster, options: str) -> str:
    return cluster.ok(cluster.login(f"sbatch --parsable {options}")).strip()


def started_at(cluster: Cluster, pod: str) -> int:
    """When the pod's main container started, in epoch seconds."""
    name = f"{pod}--slurmd" if "-cpu-" in pod else f"{pod}--slurmctld"
    out = cluster.sandbox.podman.run(["inspect", "-f", "{{.State.StartedAt.Unix}}", name])
    return int(out.stdout.strip())


def job_runs(cluster: Cluster, job: str) -> list[tuple[str, int]]:
    """Every run of the job in sacct once it has ended: (state, end in epoch seconds)."""
    out = cluster.ok(cluster.ctl(f"SLURM_TIME_FORMAT=%s sacct -X -D -n -P -j {job} -o state,end"))
    return [(state, int(end)) for state, end in (line.split("|") for line in out.splitlines())]


def ended(cluster: Cluster, job: str, timeout: float = 180) -> list[tuple[str, int]]:
    def done() -> list[tuple[str, int]] | None:
        try:
            runs = job_runs(cluster, job)
        except (AssertionError, ValueError):  # End is "Unknown" while it runs
            return None
        return runs if runs and runs[-1][0] not in ("RUNNING", "PENDING") else None

    return wait_for(f"job {job} to end in sacct", done, timeout=timeout)


def set_pool(cluster: Cluster, **fields: object) -> None:
    def change(spec: dict) -> None:  # type: ignore[type-arg]
        spec["workerPools"][0].update(fields)

    cluster.edit_stack(change)


def set_image(cluster: Cluster, component: str, reference: str | None) -> None:
    def change(spec: dict) -> None:  # type: ignore[type-arg]
        if reference is None:
            spec["images"].pop(component, None)
        else:
            spec["images"][component] = reference

    cluster.edit_stack(change)


def template_hash(cluster: Cluster, pod: str) -> str:
    out = cluster.node(pod, "echo $POD_TEMPLATE_HASH")
    return cluster.ok(out).strip()


def update_reason(cluster: Cluster) -> str:
    """updates-cpu-0's drain reason when its pod stops for an update, else '' (also while
    this apply replaces the controller pod, whose slurm.conf the change touches too)."""
    reason = cluster.ctl("sinfo -h -n updates-cpu-0 -o '%E'").stdout.strip()
    return reason if reason.startswith("k8s: pod updating") else ""


def test_a_template_change_replaces_each_node_only_when_its_jobs_are_done(
    updates: Cluster,
) -> None:
    cluster = updates
    job = submit(cluster, "-w updates-cpu-0 --wrap 'sleep 35'")
    wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")
    before = {pod: started_at(cluster, pod) for pod in NODES}
    old_template = template_hash(cluster, "updates-cpu-0")

    set_pool(cluster, resources={"limits": {"cpu": "1", "memory": "600Mi"}})
    with ThreadPoolExecutor(1) as pool:
        applying = pool.submit(cluster.sandbox.up, build=False)
        # While the busy node's stop waits for its job, sinfo says why it takes no new job.
        reason = wait_for("updates-cpu-0 drained for the update", lambda: update_reason(cluster))
        report = applying.result()

    assert set(NODES) <= set(report.created)
    [update_job] = [j for j in report.jobs_run if j.startswith("updates-pool-update-")]
    new_template = update_job.removeprefix("updates-pool-update-")
    assert new_template != old_template
    assert reason == f"k8s: pod updating to template {new_template}", reason
    log = job_log(cluster.sandbox.state, update_job, "mark-pool-update").read_text()
    assert f"marked 2 node(s) of updates-cpu for pod template {new_template}" in log
    assert all(template_hash(cluster, pod) == new_template for pod in NODES)

    # The job ran to its end, once, on the node it started on; nothing was requeued.
    runs = ended(cluster, job)
    assert [state for state, _ in runs] == ["COMPLETED"], runs
    job_end = runs[0][1]
    after = {pod: started_at(cluster, pod) for pod in NODES}
    assert all(after[pod] > before[pod] for pod in NODES)
    # The idle node went first (highest ordinal first); the busy one only after its job.
    assert after["updates-cpu-1"] < job_end <= after["updates-cpu-0"], (after, job_end)
    comment = cluster.ok(cluster.ctl(f"sacct -X -n -P -j {job} -o admincomment")).strip()
    assert comment == ""
    wait_for("both nodes idle on the new template", lambda: cluster.all_idle(2))
    memory = cluster.node_field("updates-cpu-0", "RealMemory")
    assert memory == str(int(600 * 0.95)), memory


def test_an_update_policy_of_requeue_requeues_what_outlasts_its_wait(updates: Cluster) -> None:
    cluster = updates
    # The policy is part of the template: the pods that stop must already carry it.
    set_pool(cluster, update={"policy": "requeue", "waitSeconds": 5})
    cluster.sandbox.up(build=False)
    wait_for("both nodes idle", lambda: cluster.all_idle(2))
    job = submit(cluster, "-w updates-cpu-1 --wrap 'sleep 300'")
    wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")

    set_pool(cluster, resources={"limits": {"cpu": "1", "memory": "640Mi"}})
    report = cluster.sandbox.up(build=False)
    [update_job] = [j for j in report.jobs_run if j.startswith("updates-pool-update-")]
    template = update_job.removeprefix("updates-pool-update-")
    first_run = cluster.ok(
        cluster.ctl(f"sacct -X -D -n -P -j {job} -o state,nodelist")
    ).splitlines()[0]
    assert first_run == "REQUEUED|updates-cpu-1", first_run
    # Requeued, it runs again once a node named in its request is back; sacct records the
    # reason (set on the job in slurmctld at once) with the job's last run, when it ends.
    wait_for("the job running again", lambda: cluster.job_state(job) == "RUNNING", timeout=180)
    cluster.ok(cluster.ctl(f"scancel {job}"))
    assert cluster.wait_job(job) == "CANCELLED"
    reason = (
        f"slurm-stack: requeued: node updates-cpu-1 was updated to pod template {template} "
        "after the pool's 5s wait"
    )

    def last_run() -> list[str]:
        out = cluster.ok(cluster.ctl(f"sacct -X -n -P -j {job} -o state,admincomment"))
        return out.strip().split("|")

    wait_for(
        "the last run with the requeue's reason in sacct",
        lambda: last_run()[0].startswith("CANCELLED") and last_run()[1] == reason,
    )


def test_a_broken_pool_image_stops_after_one_node_and_the_fix_needs_no_hand(
    updates: Cluster,
) -> None:
    cluster = updates
    set_image(cluster, "worker", "localhost/slurm-stack/worker:no-such-tag")
    with pytest.raises(SandboxError) as failed:
        cluster.sandbox.up(build=False)
    message = str(failed.value)
    assert "rolling update of StatefulSet updates-cpu stopped at updates-cpu-1" in message
    assert "updates-cpu-0 kept the template before" in message
    assert "no-such-tag" in message
    # The node not reached keeps running jobs on the template before.
    out = cluster.ok(cluster.login("srun -w updates-cpu-0 hostname"))
    assert out.strip() == "updates-cpu-0"

    # Back to the template updates-cpu-0 still runs: only the broken pod is replaced.
    set_image(cluster, "worker", None)
    report = cluster.sandbox.up(build=False)
    assert "updates-cpu-1" in report.created and "updates-cpu-0" in report.kept
    wait_for("both nodes idle again", lambda: cluster.all_idle(2))
    out = cluster.ok(cluster.login("srun -N2 hostname | sort"))
    assert out.split() == list(NODES)


def test_a_broken_controller_image_then_the_good_one_keeps_every_job(updates: Cluster) -> None:
    cluster = updates
    running = submit(cluster, "-w updates-cpu-0 --wrap 'sleep 30'")
    wait_for("the job running", lambda: cluster.job_state(running) == "RUNNING")
    queued = submit(cluster, f"-d afterok:{running} --wrap true")

    set_image(cluster, "controller", "localhost/slurm-stack/controller:no-such-tag")
    with pytest.raises(SandboxError) as failed:
        cluster.sandbox.up(build=False)
    assert "StatefulSet updates-controller stopped at updates-controller-0" in str(failed.value)

    # Fixed: the pod of the broken template is replaced without being deleted by hand
    # (podManagementPolicy Parallel), and slurmctld comes back on its saved state.
    set_image(cluster, "controller", None)
    report = cluster.sandbox.up(build=False)
    assert cluster.controller in report.created
    assert [state for state, _ in ended(cluster, running)] == ["COMPLETED"]
    assert [state for state, _ in ended(cluster, queued)] == ["COMPLETED"]
    assert cluster.ok(cluster.login("srun -N2 true")) == ""


@pytest.mark.parametrize(
    ("component", "pod"),
    [("accounting", "updates-accounting-0"), ("login", "updates-login-0")],
    ids=["slurmdbd", "login"],
)
def test_a_broken_image_then_the_good_one_converges_without_a_hand(
    updates: Cluster, component: str, pod: str
) -> None:
    # slurmdbd is a Deployment (a new ReplicaSet replaces a pod that is not ready); login a
    # Parallel StatefulSet, as the controller above.
    cluster = updates
    set_image(cluster, component, f"localhost/slurm-stack/{component}:no-such-tag")
    with pytest.raises(SandboxError) as failed:
        cluster.sandbox.up(build=False)
    assert pod in str(failed.value) and "no-such-tag" in str(failed.value)
    set_image(cluster, component, None)
    report = cluster.sandbox.up(build=False)
    assert pod in report.created
    job = submit(cluster, "--wrap true")
    assert [state for state, _ in ended(cluster, job)] == ["COMPLETED"]


def test_new_login_and_controller_images_keep_every_job(updates: Cluster) -> None:
    # A new release of the login and controller images: the same build under a new tag.
    cluster = updates
    spec = cluster.sandbox.spec
    new = {c: f"{spec.image(c)}-next" for c in ("login", "controller")}
    for component, reference in new.items():
        cluster.sandbox.podman.run(["tag", spec.image(component), reference])
    try:
        running = submit(cluster, "-w updates-cpu-1 --wrap 'sleep 20'")
        wait_for("the job running", lambda: cluster.job_state(running) == "RUNNING")
        queued = submit(cluster, f"-d afterok:{running} --wrap true")
        # An idle client learns that its server is gone from the FIN the dying sshd sends, or,
        # where none arrives (the pod's network went first), from its next packet: keepalives
        # every 2 s, as a client configured for long sessions sends them.
        ssh = cluster.sandbox.ssh_command("sandbox")
        ssh[1:1] = ["-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3"]
        session = subprocess.Popen(
            [*ssh, "sleep 600"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        login = cluster.sandbox.pod_of("login")
        wait_for(
            "the session's sleep on the login pod",
            lambda: cluster.sandbox.exec(login, ["pgrep", "-f", "^sleep 600"]).returncode == 0,
        )
        for component, reference in new.items():
            set_image(cluster, component, reference)
        report = cluster.sandbox.up(build=False)
        assert {cluster.controller, login} <= set(report.created)
        # The session on the old login pod ended with it; a new one reaches the same cluster.
        assert session.wait(timeout=30) != 0
        assert cluster.ok(cluster.login("echo ok")).strip() == "ok"
        assert [state for state, _ in ended(cluster, running)] == ["COMPLETED"]
        assert [state for state, _ in ended(cluster, queued)] == ["COMPLETED"]
    finally:
        for component in new:
            set_image(cluster, component, None)
        cluster.sandbox.up(build=False)
        for reference in new.values():
            # The name alone: `podman untag IMAGE` without a name removes every name of the
            # image, the release tag the other stacks run too.
            cluster.sandbox.podman.run(["untag", reference, reference], check=False)
