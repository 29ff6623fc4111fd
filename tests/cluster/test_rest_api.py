"""The REST API on real Slurm: slurmrestd pods of the itest stack, tokens from `scontrol token`
on the login node, requests with curl from a login session (docs/rest-api.md)."""

import json
import shlex

import pytest

from slurm_stack import naming, paths
from slurm_stack.k8s.rest_api import openapi_versions
from tests.cluster.conftest import Cluster, wait_for

# It edits the shared itest stack: restored for the modules after it (tests/cluster/conftest.py).
pytestmark = pytest.mark.usefixtures("itest_stack_restored")

KEY = f"{paths.JWT_KEY_DIR}/{paths.JWT_KEY_FILE}"
# What slurmrestd answers when slurmctld refuses a request's token (src/common/http.c maps
# SLURM_PROTOCOL_AUTHENTICATION_ERROR to 511) and when a request carries none (401).
REFUSED_TOKEN = 511
NO_TOKEN = 401


def api_url(cluster: Cluster) -> str:
    host = naming.service_host(naming.rest_api_name(cluster.name), cluster.sandbox.spec.namespace)
    return f"http://{host}:{paths.SLURMRESTD_PORT}"


def latest(cluster: Cluster) -> str:
    return openapi_versions(cluster.sandbox.spec)[-1]


def curl(
    cluster: Cluster,
    path: str,
    *,
    user: str | None = "sandbox",
    token: str | None = "$(scontrol token | cut -d= -f2)",
    body: dict | None = None,  # type: ignore[type-arg]
    base: str | None = None,
) -> tuple[int, dict]:  # type: ignore[type-arg]
    """One request from a login session as the sandbox user: (HTTP status, JSON body). The
    token is a shell word; by default the session's own, fresh from `scontrol token`."""
    headers = []
    if user is not None:
        headers += ["-H", shlex.quote(f"X-SLURM-USER-NAME: {user}")]
    if token is not None:
        headers += ["-H", f'"X-SLURM-USER-TOKEN: {token}"']
    if body is not None:
        headers += ["-H", "'Content-Type: application/json'", "-d", shlex.quote(json.dumps(body))]
    url = shlex.quote(f"{base or api_url(cluster)}{path}")
    command = f"curl -sS -o body.json -w '%{{http_code}}' {' '.join(headers)} {url}; cat body.json"
    out = cluster.ok(cluster.login(command))
    status, text = int(out[:3]), out[3:]
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, {"text": text}


def test_a_token_reads_diag_on_each_version_the_release_ships(cluster: Cluster) -> None:
    status, spec = curl(cluster, "/openapi/v3")
    assert status == 200
    served = {path.split("/")[2] for path in spec["paths"] if path.startswith("/slurm/")}
    assert served == set(openapi_versions(cluster.sandbox.spec))
    # Accounting is on: the slurmdb/ endpoints are served too.
    assert any(path.startswith("/slurmdb/") for path in spec["paths"])
    for version in sorted(served):
        status, diag = curl(cluster, f"/slurm/{version}/diag")
        assert status == 200, diag
        assert diag["errors"] == [] and diag["statistics"]["server_thread_count"] >= 1


def test_every_replica_answers(cluster: Cluster) -> None:
    pods = sorted(p.name for p in cluster.sandbox.current_plan.pods if p.component == "rest")
    assert len(pods) == 2
    for pod in pods:
        base = f"http://{pod}:{paths.SLURMRESTD_PORT}"
        status, diag = curl(cluster, f"/slurm/{latest(cluster)}/diag", base=base)
        assert status == 200, (pod, diag)


def test_a_job_submitted_through_the_api_runs_as_its_user_and_completes(
    cluster: Cluster,
) -> None:
    home = cluster.ok(cluster.login("echo $HOME")).strip()
    cluster.ok(cluster.login("rm -f rest-job.out"))
    job = {
        "name": "from-rest",
        "current_working_directory": home,
        "environment": ["PATH=/usr/bin:/bin"],
    }
    script = "#!/bin/bash\nid -un > rest-job.out\n"
    status, reply = curl(
        cluster, f"/slurm/{latest(cluster)}/job/submit", body={"script": script, "job": job}
    )
    assert status == 200 and reply["errors"] == [], reply
    job_id = str(reply["job_id"])
    assert cluster.wait_job(job_id) == "COMPLETED"
    # The job ran in the jail as the token's user; its file is in the user's home.
    assert cluster.ok(cluster.login("cat rest-job.out")).strip() == "sandbox"
    # Accounting through the API: slurmdbd took the same token.
    status, record = curl(cluster, f"/slurmdb/{latest(cluster)}/job/{job_id}")
    assert status == 200, record
    [entry] = record["jobs"]
    assert entry["state"]["current"] == ["COMPLETED"] and entry["user"] == "sandbox"


def test_requests_without_a_valid_token_are_refused(cluster: Cluster) -> None:
    diag = f"/slurm/{latest(cluster)}/diag"
    status, _ = curl(cluster, diag, user=None, token=None)
    assert status == NO_TOKEN
    # The session's own token, sent under another user's name.
    status, reply = curl(cluster, diag, user="root")
    assert status == REFUSED_TOKEN, reply
    # Another user's token (SlurmUser may issue one for anyone) once it has expired.
    issued = cluster.ok(cluster.ctl("scontrol token username=root lifespan=1"))
    other = issued.strip().removeprefix("SLURM_JWT=")

    def refused() -> bool:
        status, reply = curl(cluster, diag, user="root", token=other)
        return status == REFUSED_TOKEN and "Protocol authentication error" in json.dumps(reply)

    wait_for("the expired token to be refused", refused, timeout=30)
    # A forged token is refused the same way.
    status, _ = curl(cluster, diag, token="e30.e30.c2lnbmF0dXJl")
    assert status == REFUSED_TOKEN


def test_users_cannot_get_a_token_for_someone_else(cluster: Cluster) -> None:
    out = cluster.login("scontrol token username=root")
    assert out.returncode != 0 and "SLURM_JWT" not in out.stdout


def test_the_key_is_only_where_tokens_are_signed_and_checked(cluster: Cluster) -> None:
    # slurmctld and slurmdbd read it as SlurmUser's group; no one else may (auth/jwt checks).
    for component in ("controller", "accounting"):
        pod = cluster.sandbox.pod_of(component)
        stat = cluster.sandbox.exec(pod, ["stat", "-L", "-c", "%U:%G %a", KEY])
        assert cluster.ok(stat).split() == ["root:slurm", "440"]
    rest = cluster.sandbox.pod_of("rest")
    missing = cluster.sandbox.exec(rest, ["ls", paths.JWT_KEY_DIR])
    assert missing.returncode != 0
    # Nor in a login session or a job: neither sees any pod's secrets.
    assert cluster.login(f"cat {KEY}").returncode != 0
    job = cluster.login(f"srun -N1 cat {KEY}")
    assert job.returncode != 0 and "No such file" in job.stderr


# Last in the module: it restarts slurmctld and slurmdbd.
def test_a_new_key_generation_retires_every_token(cluster: Cluster) -> None:
    old = cluster.ok(cluster.login("scontrol token lifespan=3600")).strip().split("=", 1)[1]
    diag = f"/slurm/{latest(cluster)}/diag"
    assert curl(cluster, diag, token=old)[0] == 200
    running = cluster.ok(cluster.login("sbatch --parsable --wrap 'sleep 20'")).strip()
    wait_for("the job to run", lambda: cluster.job_state(running) == "RUNNING")

    cluster.edit_stack(lambda c: c["restApi"].update(keyGeneration=2))
    report = cluster.sandbox.up(build=False)
    services = {cluster.sandbox.pod_of("controller"), cluster.sandbox.pod_of("accounting")}
    assert services <= set(report.created)

    wait_for("the API to answer a new token", lambda: curl(cluster, diag)[0] == 200, timeout=60)
    assert curl(cluster, diag, token=old)[0] == REFUSED_TOKEN
    # The restart took no job with it.
    assert cluster.wait_job(running) == "COMPLETED"
