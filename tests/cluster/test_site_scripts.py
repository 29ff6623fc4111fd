"""The site's scripts on real Slurm (`siteScripts`, docs/site-scripts.md).

Booted from `Pulumi.site.yaml`: a Prolog leaves a marker in the worker pod while the job
runs, an Epilog removes it, slurmctld's own Prolog and Epilog log each job in the controller
pod, a TaskProlog sets a variable in each task and a TaskEpilog leaves a file after it, as
its user, a
cli_filter.lua refuses a job name at the login node's sbatch, and a job_submit.lua refuses
jobs without a time limit with a message the user sees at sbatch. A changed job_submit.lua
and site file, re-applied, change what is accepted and what the pods read without restarting
any worker. Job fates come from sacct.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from slurm_stack.spec.versions import at_least
from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for

STACK = Path(__file__).resolve().parent / "Pulumi.site.yaml"
NODES = ("site-cpu-0", "site-cpu-1")


def task_scripts(version: str) -> bool:
    """Task scripts need Slurm 25.11 (configless ships them from then on); 24.11 refuses them."""
    return at_least(version, "25.11")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, slurm_version: str | None) -> Iterator[Cluster]:
    document = yaml.safe_load(STACK.read_text())
    if slurm_version and not task_scripts(slurm_version):
        for key in ("taskProlog", "taskEpilog"):
            del document["config"]["slurm-stack:cluster"]["siteScripts"][key]
    cluster = boot_stack(document, tmp_path_factory.mktemp("site"), 2, version=slurm_version)
    yield cluster
    tear_down(cluster)


def _fate(cluster: Cluster, job: str) -> str:
    def state() -> str | None:
        out = cluster.ctl(f"sacct -X -n -P -j {job} -o State").stdout.strip()
        return out if out and out not in ("PENDING", "RUNNING") else None

    return wait_for(f"job {job} ended in sacct", state, timeout=120)


@pytest.mark.both_majors
def test_the_prolog_marks_each_node_of_a_job_and_the_epilog_unmarks_it(site: Cluster) -> None:
    job = site.ok(site.login("sbatch --parsable -N2 --time=5 --wrap 'srun sleep 10'")).strip()
    marks = {node: f"/run/site-marks/{job}" for node in NODES}
    wait_for("the job running", lambda: site.job_state(job) == "RUNNING", timeout=60)
    for node, mark in marks.items():
        content = wait_for(
            f"the prolog's mark on {node}",
            lambda node=node, mark=mark: site.node(node, f"cat {mark}").stdout.strip(),
            timeout=30,
        )
        assert content == "sandbox hello from the site", (node, content)
    assert _fate(site, job) == "COMPLETED"
    for node, mark in marks.items():
        wait_for(
            f"the epilog's removal on {node}",
            lambda node=node, mark=mark: site.node(node, f"test -e {mark}").returncode == 1,
            timeout=30,
        )
    assert set(site.node_states().values()) == {"idle"}  # neither script failed a node


@pytest.mark.both_majors
def test_slurmctlds_scripts_log_each_job_in_the_controller_pod(site: Cluster) -> None:
    job = site.ok(site.login("sbatch --parsable --time=1 --wrap true")).strip()
    assert _fate(site, job) == "COMPLETED"
    lines = wait_for(
        f"both scripts' lines for job {job}",
        lambda: (
            (log := site.ctl("cat /run/slurm/site-jobs.log").stdout).count(f" {job}") == 2
            and log.splitlines()
        ),
        timeout=30,
    )
    assert f"start {job} sandbox slurm" in lines and f"end {job}" in lines, lines


@pytest.mark.both_majors
def test_job_submit_lua_refuses_a_job_without_a_time_limit_with_its_message(
    site: Cluster,
) -> None:
    refused = site.login("sbatch --parsable --wrap true")
    assert refused.returncode != 0
    assert "site policy: give every job a time limit (--time)" in refused.stderr, refused
    accepted = site.ok(site.login("sbatch --parsable --time=1 --wrap true")).strip()
    assert _fate(site, accepted) == "COMPLETED"


def test_task_scripts_run_for_each_task_as_the_user_in_the_jail(site: Cluster) -> None:
    if not task_scripts(site.sandbox.spec.slurm_version):
        pytest.skip("task scripts need Slurm 25.11 or newer")
    out = site.ok(site.login("srun -N2 --time=1 sh -c 'echo $SLURM_JOB_ID $SITE_TASK_PROLOG'"))
    [(job, _), _] = pairs = [line.split() for line in out.splitlines()]
    assert [value for _, value in pairs] == ["ran-as-sandbox-in-jail-yes"] * 2

    # The TaskEpilog of each task left its file, as the user, in the submit directory.
    def traces() -> list[str] | None:
        listed = site.login(f"stat -c '%n %U' ~/task-epilog.{job}.*").stdout.split()
        return sorted(listed) if len(listed) == 4 else None

    assert wait_for("both tasks' epilog files", traces, timeout=30) == sorted(
        word for task in (0, 1) for word in (f"/home/sandbox/task-epilog.{job}.{task}", "sandbox")
    )


@pytest.mark.both_majors
def test_cli_filter_lua_refuses_at_the_login_nodes_client(site: Cluster) -> None:
    refused = site.login("sbatch --parsable -J forbidden --time=1 --wrap true")
    assert refused.returncode != 0
    assert "site filter: the job name 'forbidden' is reserved" in refused.stderr, refused
    job = site.ok(site.login("sbatch --parsable -J allowed --time=1 --wrap true")).strip()
    assert _fate(site, job) == "COMPLETED"


@pytest.mark.both_majors
def test_changed_lua_and_site_files_apply_without_restarting_a_worker(site: Cluster) -> None:
    workers = {name: started for name, started in site.daemons().items() if name.startswith(NODES)}
    assert {f"{node}--slurmd" for node in NODES} <= set(workers), workers

    def allow_everything(spec: dict) -> None:  # type: ignore[type-arg]
        spec["siteScripts"]["jobSubmitLua"] = (
            "function slurm_job_submit(job_desc, part_list, submit_uid)\n"
            "\treturn slurm.SUCCESS\nend\n\n"
            "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)\n"
            "\treturn slurm.SUCCESS\nend\n"
        )

        spec["siteScripts"]["files"][0]["content"] = "hello again"

    site.edit_stack(allow_everything)
    site.sandbox.up(build=False)
    job = site.ok(site.login("sbatch --parsable --wrap true")).strip()
    assert _fate(site, job) == "COMPLETED"
    # The site file changed in place in the running pods, the controller's too.
    for pod in (*NODES, site.controller):
        greeting = site.sandbox.exec(pod, ["cat", "/etc/slurm-stack/site-files/greeting"])
        assert greeting.stdout == "hello again", (pod, greeting)
    after = {name: started for name, started in site.daemons().items() if name in workers}
    assert after == workers  # same start times, no restart
