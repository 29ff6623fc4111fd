"""What `pulumi up` waits for: annotations the provider reads and every custom timeout,
checked against the code's single source and docs/deploy.md."""

import re

from slurm_stack.components.timeouts import JOB_MARGIN_SECONDS, TIMEOUTS
from slurm_stack.offline import ProgramRun
from tests.conftest import ROOT
from tests.helpers import kube
from tests.test_program import _run_with

DOC = ROOT / "docs" / "deploy.md"


def _doc_timeouts() -> dict[str, str]:
    text = DOC.read_text()
    table = text.split("<!-- timeouts: begin -->")[1].split("<!-- timeouts: end -->")[0]
    return dict(re.findall(r"^\| `([\w-]+)` \| (\w+) \|$", table, re.M))


def _seconds(timeout: str) -> int:
    assert timeout.endswith("m"), timeout
    return int(timeout[:-1]) * 60


def test_doc_lists_every_timeout_of_the_code() -> None:
    assert _doc_timeouts() == TIMEOUTS
    keys = set(re.findall(r"\| `([\w-]+)` \|$", DOC.read_text(), re.M))
    assert keys == set(TIMEOUTS), "the await table names a timeout the code lacks"


def _timeout_of(run: ProgramRun, kind: str, name: str) -> dict[str, str] | None:
    [resource] = [r for r in kube(run, kind) if r.inputs["metadata"]["name"].startswith(name)]
    return resource.custom_timeouts


def test_registered_timeouts_come_from_the_table(dev_run: ProgramRun) -> None:
    expected = {
        ("apps/v1:StatefulSet", "dev-mariadb"): "mariadb",
        ("apps/v1:Deployment", "dev-accounting"): "slurmdbd",
        ("apps/v1:StatefulSet", "dev-controller"): "slurmctld",
        ("batch/v1:Job", "dev-populate-jail"): "populate-jail",
        ("apps/v1:StatefulSet", "dev-login"): "login",
        ("core/v1:Service", "dev-login"): "login-service",
        ("core/v1:Service", "dev-mariadb"): "mariadb-service",
        ("core/v1:Service", "dev-accounting"): "slurmdbd-service",
        ("core/v1:Service", "dev-controller"): "slurmctld-service",
        ("batch/v1:Job", "dev-reconfigure"): "reconfigure",
        ("batch/v1:Job", "dev-users"): "users",
        ("batch/v1:Job", "dev-pool-update"): "pool-update",
        ("apps/v1:Deployment", "dev-exporter"): "exporter",
        ("core/v1:Service", "dev-metrics"): "exporter-service",
    }
    timed = [r for r in dev_run.resources if (r.custom_timeouts or {}).get("create")]
    assert len(timed) == len(expected), [r.urn for r in timed]
    for (kind, name), key in expected.items():
        want = {"create": TIMEOUTS[key], "update": TIMEOUTS[key]}
        assert _timeout_of(dev_run, kind, name) == want, (kind, name)


def test_a_service_waits_as_long_as_the_pods_it_selects() -> None:
    # A Service with a selector is awaited while a selected pod is not Ready.
    for workload in ("mariadb", "slurmdbd", "slurmctld"):
        assert TIMEOUTS[f"{workload}-service"] == TIMEOUTS[workload]


def test_jobs_end_by_their_deadline_before_pulumi_times_out(dev_run: ProgramRun) -> None:
    jobs = kube(dev_run, "batch/v1:Job")
    assert jobs
    for job in jobs:
        deadline = job.inputs["spec"]["activeDeadlineSeconds"]
        assert _seconds(job.custom_timeouts["create"]) >= deadline + JOB_MARGIN_SECONDS, job.urn
    populate = [j for j in jobs if "populate" in j.inputs["metadata"]["name"]]
    assert populate[0].inputs["spec"]["activeDeadlineSeconds"] == 3 * 3600


def test_mariadb_operator_resource_is_awaited_until_ready() -> None:
    run = _run_with(lambda c: c["accounting"].update(mode="mariadb-operator"))
    [mariadb] = [r for r in run.resources if r.type.endswith(":MariaDB")]
    assert mariadb.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"
    want = TIMEOUTS["mariadb-operator"]
    assert mariadb.custom_timeouts == {"create": want, "update": want}
    assert mariadb.protect


def test_a_worker_pool_is_awaited_until_it_exists_and_its_deletion_as_long_as_it_drains(
    dev_run: ProgramRun,
) -> None:
    [pool] = [r for r in kube(dev_run, "apps/v1:StatefulSet") if r.name == "dev-cpu"]
    annotations = pool.inputs["metadata"]["annotations"]
    # Not skipAwait: with it, the provider would not await the delete of a replacement.
    assert annotations == {"pulumi.com/waitFor": "jsonpath={.metadata.name}"}
    grace = pool.inputs["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert pool.custom_timeouts == {"delete": f"{-(-(grace + JOB_MARGIN_SECONDS) // 60)}m"}
    assert _seconds(pool.custom_timeouts["delete"]) >= grace
