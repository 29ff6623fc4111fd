"""Secrets stay out of logs (README, "Secrets stay secrets": "never an environment variable
or a log line"), read from what the running itest stack's containers printed."""

import subprocess

from slurm_stack import naming, paths
from slurm_stack.k8s.accounting import db_password_secret, db_root_password_secret
from slurm_stack.k8s.common import munge_key_secret_name
from slurm_stack.k8s.login import host_keys_secret_name
from slurm_stack.k8s.rest_api import openapi_versions
from tests.cluster.conftest import Cluster
from tests.cluster.secret_scan import leaks, stack_secrets


def use_every_secret(cluster: Cluster) -> None:
    """Work that goes through each secret, so its users have logged what they log about it:
    an ssh login (host keys), a job on two nodes (munge), accounting (slurmdbd's database
    password) and a REST API request with a token (the JWT key)."""
    spec = cluster.sandbox.spec
    assert cluster.ok(cluster.login("srun -N2 hostname")).split(), "srun printed nothing"
    assert spec.name in cluster.ok(cluster.login("sacctmgr -n -P show cluster format=cluster"))
    host = naming.service_host(naming.rest_api_name(spec.name), spec.namespace)
    url = f"http://{host}:{paths.SLURMRESTD_PORT}/slurm/{openapi_versions(spec)[-1]}/diag"
    token = '"X-SLURM-USER-TOKEN: $(scontrol token | cut -d= -f2)"'
    status = cluster.ok(
        cluster.login(f"curl -sS -o /dev/null -w '%{{http_code}}' -H {token} {url}")
    )
    assert status == "200", status


def test_no_secret_value_is_in_any_log(cluster: Cluster) -> None:
    """itest's secrets: the munge key, the SSH host keys (private halves), slurmdbd's database
    password and MariaDB's root password, the REST API's JWT key, and the node-state
    controller's ServiceAccount token. The other kinds are scanned on the stacks that have
    them: slurm.key (test_auth_slurm.py), registry credentials (test_gpus.py), the LDAP bind
    password (test_directory.py), an external database's password (test_external_database.py)."""
    spec = cluster.sandbox.spec
    secrets = stack_secrets(cluster)
    names = {where.split()[1].split("/")[0] for where in secrets if where.startswith("Secret ")}
    assert names >= {
        munge_key_secret_name(spec),
        host_keys_secret_name(spec),
        db_password_secret(spec)[0],
        db_root_password_secret(spec)[0],
        naming.jwt_key_secret_name(cluster.name),
    }, names
    assert any(where.startswith("token of ") for where in secrets), sorted(secrets)
    # What was collected is what the pods hold: the key munged reads in the controller pod.
    munge = f"{cluster.controller}--munge"
    key = subprocess.run(
        ["podman", "exec", munge, "cat", f"{paths.MUNGE_KEY_DIR}/munge.key"],
        capture_output=True,
        check=True,
    ).stdout
    assert key == secrets[f"Secret {munge_key_secret_name(spec)}/munge.key"]

    use_every_secret(cluster)
    found, printed = leaks(cluster, secrets)
    # Enough was read that a leak would be seen: some Job's log too.
    assert any(where.startswith("file ") and "/jobs/" in where for where in printed), sorted(
        printed
    )
    assert not found, "\n".join(found)
    size = sum(map(len, printed.values()))
    print(f"{len(secrets)} secret values, {len(printed)} logs ({size} bytes) scanned")
