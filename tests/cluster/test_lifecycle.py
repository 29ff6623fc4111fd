"""What `pulumi up` does to a running cluster: scale up, a lost controller, a config change.

These change the cluster; the stack file is restored when the module ends (the tier runs its
modules in a random order), but what the tests did to the jail and the logs stays.
"""

import time

import pytest
import yaml

from slurm_stack.paths import ENTRYPOINT
from slurm_stack.sandbox.apply import job_log
from slurm_stack.sandbox.podman import SANDBOX_LABEL
from tests.cluster.conftest import Cluster, wait_for

# It edits the shared itest stack: restored for the modules after it (tests/cluster/conftest.py).
pytestmark = pytest.mark.usefixtures("itest_stack_restored")


def edit_stack(cluster: Cluster, change) -> None:  # type: ignore[no-untyped-def]
    """Change the stack file's cluster definition in place, as a user edits stack config."""
    document = yaml.safe_load(cluster.stack_file.read_text())
    change(document["config"]["slurm-stack:cluster"])
    cluster.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))


def sandbox_pods(cluster: Cluster) -> set[str]:
    return {
        str(p["Name"]) for p in cluster.sandbox.podman.labelled("pod", f"{SANDBOX_LABEL}=itest")
    }


def config_map_name(cluster: Cluster) -> str:
    return next(p.name for p in cluster.sandbox.current_plan.pods if p.component == "reconfigure")


def test_scale_up_adds_nodes_that_register_themselves(cluster: Cluster) -> None:
    slurm_conf_before = cluster.ok(cluster.ctl("cat $SLURM_CONF"))
    reconfigure_before = config_map_name(cluster)

    def three_cpu_nodes(spec: dict) -> None:  # type: ignore[type-arg]
        spec["workerPools"][0]["replicas"] = 3

    edit_stack(cluster, three_cpu_nodes)
    report = cluster.sandbox.up(build=False)
    assert report.created == ("itest-cpu-2",)
    assert report.removed == () and "itest-controller-0" in report.kept
    wait_for("itest-cpu-2 idle", lambda: cluster.node_states().get("itest-cpu-2") == "idle")
    assert cluster.node_field("itest-cpu-2", "AvailableFeatures") == "cpu"
    assert cluster.ok(cluster.ctl("cat $SLURM_CONF")) == slurm_conf_before
    assert config_map_name(cluster) == reconfigure_before  # same config, same hash
    out = cluster.ok(cluster.login("srun -p main -C cpu -N3 hostname"))
    assert "itest-cpu-2" in out.split()


def test_controller_loss_loses_no_job(cluster: Cluster) -> None:
    running = cluster.ok(
        cluster.login("sbatch --parsable -w itest-cpu-0 --exclusive --wrap 'sleep 25'")
    ).strip()
    wait_for("the first job running", lambda: cluster.job_state(running) == "RUNNING")
    queued = [
        cluster.ok(
            cluster.login("sbatch --parsable -w itest-cpu-0 --exclusive --wrap 'true'")
        ).strip()
        for _ in range(10)
    ]
    assert all(cluster.job_state(job) == "PENDING" for job in queued)

    # The controller pod is lost; its Deployment brings a new one up on the same state volume.
    cluster.sandbox.podman.run(["pod", "rm", "--force", cluster.controller])
    report = cluster.sandbox.up(build=False)
    assert cluster.controller in report.created

    assert cluster.job_state(running) in ("RUNNING", "COMPLETED")
    assert all(cluster.job_state(job) in ("PENDING", "RUNNING", "COMPLETED") for job in queued)
    for job in [running, *queued]:
        assert cluster.wait_job(job, timeout=120) == "COMPLETED"


def test_config_change_rolls_the_controller_not_the_workers(cluster: Cluster) -> None:
    running = cluster.ok(
        cluster.login("sbatch --parsable -w itest-cpu-1 --wrap 'sleep 20'")
    ).strip()
    wait_for("the job running", lambda: cluster.job_state(running) == "RUNNING")
    before = config_map_name(cluster)
    sackd = "itest-login-0--sackd"
    daemons_before = cluster.daemons()
    assert sackd in daemons_before

    def limit_main(spec: dict) -> None:  # type: ignore[type-arg]
        spec["partitions"][0]["options"] = ["MaxNodes=2"]

    [old_reconfigure] = [n for n in sandbox_pods(cluster) if n.startswith("itest-reconfigure-")]
    edit_stack(cluster, limit_main)
    report = cluster.sandbox.up(build=False)
    assert cluster.controller in report.created
    assert not [name for name in report.created if "-cpu-" in name or "-gpu-" in name]
    assert any(job.startswith("itest-reconfigure-") for job in report.jobs_run)
    assert config_map_name(cluster) != before

    partition = cluster.ok(cluster.ctl("scontrol show partition main -o"))
    assert "MaxNodes=2" in partition
    # EnforcePartLimits=ALL: a job over the new limit is refused at once, not queued forever.
    over = cluster.login("sbatch -p main -N3 --wrap true")
    assert over.returncode != 0 and "Node count specification invalid" in over.stderr, over
    # The Job pushed only once slurmctld ran the new config, and saw every slurmd restart on it.
    [job] = [job for job in report.jobs_run if job.startswith("itest-reconfigure-")]
    config_hash = job.removeprefix("itest-reconfigure-")
    log = job_log(cluster.sandbox.state, job, "reconfigure").read_text()
    assert f"slurmctld runs config {config_hash}" in log
    assert f"pushed config {config_hash}; every responding slurmd restarted on it" in log
    # The finished Job's pod stays, its munge sidecar stopped, as on Kubernetes; the Job of the
    # config before left the stack, and its pod went with it.
    pods = sandbox_pods(cluster)
    assert job in pods and old_reconfigure not in pods and old_reconfigure in report.removed
    assert cluster.sandbox.podman.exists("container", f"{job}--munge")
    wait_for("the sidecar stopped", lambda: not cluster.sandbox.podman.running(f"{job}--munge"))
    # Every daemon took the pushed config without dying: sackd and slurmd re-execute
    # themselves; sshd, slurmdbd, munged and MariaDB are not touched. Only the controller's
    # pod is new, and none of its containers has restarted either; and the metrics
    # exporter's, slurmrestd's and the node-state controller's, stateless Slurm clients whose
    # pods name the config they read.
    daemons_after = cluster.daemons()
    replaced = (
        f"{cluster.controller}--",
        "itest-exporter-0--",
        "itest-rest-",
        "itest-node-state-0--",
    )
    assert {"itest-exporter-0", "itest-rest-0", "itest-rest-1", "itest-node-state-0"} <= set(
        report.created
    )
    restarted = {
        name: (before_, daemons_after.get(name))
        for name, before_ in daemons_before.items()
        if not name.startswith(replaced) and daemons_after.get(name) != before_
    }
    assert not restarted, restarted
    new_controller = {
        n: c for n, (_, c) in daemons_after.items() if n.startswith(cluster.controller)
    }
    assert new_controller and not any(new_controller.values()), new_controller
    assert "execv() failed" not in cluster.sandbox.podman.logs(sackd, tail=200)
    assert cluster.wait_job(running, timeout=90) == "COMPLETED"
    # Workers fetched the new config without a restart.
    conf = cluster.ok(cluster.node("itest-cpu-1", "cat /var/spool/slurmd/conf-cache/slurm.conf"))
    assert "MaxNodes=2" in conf


RECONFIGURE = f"CONTROLLER_WAIT_SECONDS=4 {ENTRYPOINT} reconfigure"


def served_config_hash(cluster: Cluster) -> str:
    conf = cluster.ok(cluster.ctl("scontrol show config | sed -n 's/^SLURM_CONF *= *//p'"))
    return conf.strip().removesuffix("/slurm.conf").rsplit("/config-", 1)[1]


def test_reconfigure_refuses_to_push_a_config_slurmctld_does_not_run(cluster: Cluster) -> None:
    # The Job of a config slurmctld has not rolled onto yet (a rollout reported done early).
    result = cluster.ctl(f"EXPECTED_CONFIG_HASH=0123456789 {RECONFIGURE}")
    assert result.returncode != 0
    served = served_config_hash(cluster)
    assert (
        "slurmctld does not run config 0123456789 after 4s: it reports SLURM_CONF "
        f"/etc/slurm/config-{served}/slurm.conf, HASH_VAL Match"
    ) in result.stderr


def test_reconfigure_refuses_when_slurmctlds_slurm_conf_differs_from_its_own(
    cluster: Cluster,
) -> None:
    served = served_config_hash(cluster)
    copy = f"/tmp/config-{served}"
    result = cluster.ctl(
        f"rm -rf {copy} && cp -rL $(dirname $SLURM_CONF) {copy} && "
        f"echo MaxJobCount=12345 >> {copy}/slurm.conf && "
        f"SLURM_CONF={copy}/slurm.conf EXPECTED_CONFIG_HASH={served} {RECONFIGURE}"
    )
    assert result.returncode != 0
    assert f"slurmctld does not run config {served} after 4s" in result.stderr
    assert "HASH_VAL Different" in result.stderr


def test_opting_out_of_the_jail_works_once_the_config_allows_it(cluster: Cluster) -> None:
    where = (
        "srun -w itest-cpu-0 {} sh -c 'test -e /.slurm-stack-populated && echo jail || echo pod'"
    )
    assert cluster.login(where.format("--no-jail")).returncode != 0

    def allow_opt_out(spec: dict) -> None:  # type: ignore[type-arg]
        spec["jail"]["allowOptOut"] = True

    edit_stack(cluster, allow_opt_out)
    report = cluster.sandbox.up(build=False)
    assert any(job.startswith("itest-reconfigure-") for job in report.jobs_run)

    def opted_out() -> str:
        result = cluster.login(where.format("--no-jail"))
        return result.stdout.strip() if result.returncode == 0 else ""

    assert wait_for("srun --no-jail to be accepted", opted_out, timeout=60) == "pod"
    assert cluster.ok(cluster.login(where.format(""))).strip() == "jail"


def test_add_newer_files_restores_image_files_and_keeps_everything_else(cluster: Cluster) -> None:
    # An image file lost from the jail, a file the admin changed, and a user's file.
    lost = cluster.jail / "etc" / "debian_version"
    original = lost.read_text()
    lost.unlink()
    changed = cluster.jail / "etc" / "issue.net"
    changed.write_text("site banner\n")
    cluster.ok(cluster.login("echo mine > ~/still-here.txt"))
    marker = (cluster.jail / ".slurm-stack-populated").read_text()

    def add_newer_files(spec: dict) -> None:  # type: ignore[type-arg]
        spec["jail"].setdefault("populate", {})["addNewerFiles"] = True

    edit_stack(cluster, add_newer_files)
    report = cluster.sandbox.up(build=False)
    assert [job for job in report.jobs_run if job.startswith("itest-populate-jail-")]
    assert lost.read_text() == original
    assert changed.read_text() == "site banner\n"
    assert cluster.ok(cluster.login("cat ~/still-here.txt")) == "mine\n"
    # The marker records the run and keeps the history before it.
    new_marker = (cluster.jail / ".slurm-stack-populated").read_text()
    assert "add_newer_files=1" in new_marker and new_marker.endswith(marker)


def test_scale_down_drains_the_last_node_lets_its_job_finish_and_leaves_no_ghost(
    cluster: Cluster,
) -> None:
    states = cluster.node_states()
    assert "itest-cpu-2" in states, "the scale-up test left three cpu nodes"
    job = cluster.ok(cluster.login("sbatch --parsable -w itest-cpu-2 --wrap 'sleep 10'")).strip()
    wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")

    def two_cpu_nodes(spec: dict) -> None:  # type: ignore[type-arg]
        spec["workerPools"][0]["replicas"] = 2

    edit_stack(cluster, two_cpu_nodes)
    report = cluster.sandbox.up(build=False)  # returns once the pod is gone
    assert report.removed == ("itest-cpu-2",)
    accounting = wait_for(
        "the job in sacct",
        lambda: cluster.ctl(f"sacct -X -n -P -j {job} -o state,exitcode,nodelist").stdout.strip(),
    )
    assert accounting == "COMPLETED|0:0|itest-cpu-2"  # its preStop drain waited for it
    wait_for("itest-cpu-2 gone", lambda: "itest-cpu-2" not in cluster.node_states(), timeout=30)
    record = cluster.ctl("scontrol show node itest-cpu-2")
    assert record.returncode != 0 or "NodeName=itest-cpu-2" not in record.stdout
    out = cluster.ok(cluster.login("srun -p main -C cpu -N2 hostname"))
    assert sorted(out.split()) == ["itest-cpu-0", "itest-cpu-1"]


def test_a_killed_worker_pod_comes_back_and_its_job_runs_again(cluster: Cluster) -> None:
    job = cluster.ok(
        cluster.login("sbatch --parsable --requeue -w itest-cpu-1 --wrap 'sleep 8'")
    ).strip()
    wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")
    started = time.monotonic()
    report = cluster.sandbox.kill_pod("itest-cpu-1")
    assert report.created == ("itest-cpu-1",)

    def finished() -> str:
        out = cluster.ctl(f"sacct -X -n -P -j {job} -o state,exitcode").stdout.strip()
        return out if out.startswith("COMPLETED") else ""

    # Slurm holds a requeued batch job before it runs again (10 s on 26.05 as rendered, 120 s
    # on 24.11); without the entrypoint's help the requeue itself would wait for
    # SlurmdTimeout (300 s) first.
    assert wait_for("the job to run again and complete", finished, timeout=240) == "COMPLETED|0:0"
    restarts = cluster.ok(cluster.ctl(f"scontrol show job {job} -o"))
    assert "Restarts=1" in restarts, restarts
    assert time.monotonic() - started < 200
    wait_for("itest-cpu-1 idle", lambda: cluster.node_states().get("itest-cpu-1") == "idle", 60)
    assert not cluster.node_reason("itest-cpu-1").startswith("k8s:")
    out = cluster.ok(cluster.login("srun -p main -C cpu -N2 hostname"))
    assert sorted(out.split()) == ["itest-cpu-0", "itest-cpu-1"]


def test_an_admins_drain_survives_a_pod_restart(cluster: Cluster) -> None:
    cluster.ok(cluster.ctl("scontrol update NodeName=itest-cpu-0 State=DRAIN Reason=maintenance"))
    try:
        cluster.sandbox.kill_pod("itest-cpu-0")
        slurmd = cluster.sandbox.node_container("itest-cpu-0")

        def recovered() -> bool:  # slurmd answers and the entrypoint's helper has finished
            helper = cluster.sandbox.podman.exec(slurmd, ["pgrep", "-f", "entrypoint slurmd"])
            return helper.returncode == 1 and cluster.node_states().get("itest-cpu-0") == "drain"

        wait_for("itest-cpu-0 back and its start-up done", recovered, timeout=90)
        assert cluster.node_reason("itest-cpu-0") == "maintenance"
    finally:
        cluster.ok(cluster.ctl("scontrol update NodeName=itest-cpu-0 State=RESUME"))
