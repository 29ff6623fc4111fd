"""checkov finds nothing in the dev, production and itest renders beyond the exceptions below.

checkov lives in its own virtualenv, `.venv/checkov` (scripts/setup.sh): it pins
`packaging<24`, which pulumi (`packaging>=26`) cannot share a virtualenv with.

Two kinds of exception, each with the reason it cannot apply here:
- `SKIP_CHECKS`: checks skipped for every object (`--skip-check`);
- `ALLOWED`: a check that may fail on one component's workloads (the
  `app.kubernetes.io/component` label) and nowhere else. An entry that no render needs any more
  fails `test_every_exception_is_still_needed`: remove it. A component can instead carry the
  annotation `checkov.io/skip<N>: <check>=<reason>`; a check checkov skips that way counts as
  the entry being needed.
"""

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.security_renders import COMPONENT, STACKS, render

CHECKOV = ROOT / ".venv" / "checkov" / "bin" / "checkov"
PINNED = re.search(r"^CHECKOV_VERSION=(\S+)$", (ROOT / "scripts" / "setup.sh").read_text(), re.M)

SKIP_CHECKS = {
    # Image pull policy Always: images are pinned by tag or digest and pulled IfNotPresent; the
    # sandbox runs local builds (localhost/slurm-stack) that no registry serves.
    "CKV_K8S_15": "pinned images; local sandbox builds cannot be pulled",
    # Image digest: the stack file chooses tag or digest (images.*); the dev and itest stacks
    # use local sandbox builds, which have no registry digest.
    "CKV_K8S_43": "the stack file pins images; local sandbox builds have no digest",
    # CPU limits: Slurm, not the kubelet, divides a node's CPUs; a CFS quota throttles
    # slurmctld/slurmd heartbeats and jobs. workerPools[].resources sets limits when wanted.
    "CKV_K8S_11": "Slurm divides CPUs; CFS quotas throttle daemons and jobs",
    # readOnlyRootFilesystem: KNOWN GAP, not a fundamental limit. The entrypoints write /etc,
    # /run and /var/log in their images; each path needs an emptyDir before this can be on.
    "CKV_K8S_22": "known gap: entrypoints write to the image filesystem",
}

MUNGE = "the munge sidecar starts as root with CHOWN/SETUID/SETGID to take its key"
JAIL = "slurmd/sshd set up the jail as root with SYS_ADMIN; tasks and sessions drop it"

ALLOWED: dict[tuple[str, str], str] = {
    # Added capabilities (any).
    ("CKV_K8S_25", "controller"): MUNGE,
    ("CKV_K8S_25", "accounting"): MUNGE,
    ("CKV_K8S_25", "reconfigure"): MUNGE,
    ("CKV_K8S_25", "pool-update"): MUNGE,
    ("CKV_K8S_25", "nccl-benchmark"): MUNGE,
    ("CKV_K8S_25", "exporter"): MUNGE,
    ("CKV_K8S_25", "node-state"): MUNGE,
    ("CKV_K8S_38", "node-state"): "the node-state controller lists nodes and pods: its token",
    ("CKV_K8S_25", "users"): MUNGE + "; sync-users has CHOWN to hand homes to their users",
    ("CKV_K8S_25", "jail"): "populate-jail writes a root filesystem: CHOWN, FOWNER, ...",
    ("CKV_K8S_25", "worker"): JAIL,
    ("CKV_K8S_25", "login"): JAIL,
    # CAP_SYS_ADMIN.
    ("CKV_K8S_39", "worker"): JAIL,
    ("CKV_K8S_39", "login"): JAIL,
    # Root containers, and UIDs below 10000.
    ("CKV_K8S_23", "worker"): JAIL,
    ("CKV_K8S_23", "login"): JAIL,
    ("CKV_K8S_23", "users"): "sync-users creates accounts and homes in the jail as root",
    ("CKV_K8S_23", "jail"): "populate-jail writes a root filesystem as root",
    ("CKV_K8S_40", "worker"): JAIL,
    ("CKV_K8S_40", "login"): JAIL,
    ("CKV_K8S_40", "users"): "sync-users creates accounts and homes in the jail as root",
    ("CKV_K8S_40", "jail"): "populate-jail writes a root filesystem as root",
    ("CKV_K8S_40", "database"): "the upstream MariaDB image's mysql user (999) owns its data",
    # CPU and memory requests: a pool's requests are workerPools[].resources; itest's fake-GPU
    # pool sets none.
    ("CKV_K8S_10", "worker"): "a pool's requests are the stack file's; itest's gpu pool has none",
    ("CKV_K8S_12", "worker"): "a pool's requests are the stack file's; itest's gpu pool has none",
}


def _components(documents: list[dict[str, Any]]) -> dict[str, str]:
    """checkov's resource id (Kind.namespace.name) → component label."""
    return {
        ".".join((d["kind"], d["metadata"].get("namespace", "default"), d["metadata"]["name"])): (
            d["metadata"].get("labels", {}).get(COMPONENT, "")
        )
        for d in documents
    }


def run_checkov(directory: Path) -> dict[str, Any]:
    """checkov's JSON report on the manifests under ``directory``, offline."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run scripts/setup.sh")
    result = subprocess.run(
        [
            str(CHECKOV),
            *("-d", str(directory), "--framework", "kubernetes"),
            # Not --quiet: it drops the skipped checks, which test_every_exception_is_still_needed
            # counts.
            *("--compact", "-o", "json", "--skip-download"),
            *("--skip-check", ",".join(sorted(SKIP_CHECKS))),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert isinstance(report, dict), "checkov found nothing to check (or several reports)"
    return report


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Per stack: {(check, component): [resource ids]} of failed and of annotation-skipped."""
    out = tmp_path_factory.mktemp("checkov")
    found = {}
    for stack, path in STACKS.items():
        components = _components(render(path, out / stack))
        report = run_checkov(out / stack)
        assert report["summary"]["checkov_version"] == PINNED.group(1)
        assert report["summary"]["parsing_errors"] == 0
        assert report["summary"]["passed"] > 0
        found[stack] = {
            kind: _by_check(report["results"][f"{kind}_checks"], components)
            for kind in ("failed", "skipped")
        }
    return found


def _by_check(results: list[dict[str, Any]], components: dict[str, str]) -> dict:
    grouped: dict[tuple[str, str], list[str]] = {}
    for result in results:
        key = (result["check_id"], components.get(result["resource"], "?"))
        grouped.setdefault(key, []).append(result["resource"])
    return grouped


@pytest.mark.parametrize("stack", STACKS)
def test_checkov_finds_nothing_unexplained(stack: str, reports: dict[str, Any]) -> None:
    failed = reports[stack]["failed"]
    unexplained = {key: ids for key, ids in failed.items() if key not in ALLOWED}
    assert unexplained == {}


def test_every_exception_is_still_needed(reports: dict[str, Any]) -> None:
    used = {key for report in reports.values() for kind in report.values() for key in kind}
    assert set(ALLOWED) - used == set()
    for check, reason in SKIP_CHECKS.items():
        assert re.fullmatch(r"CKV_K8S_\d+", check) and reason, check
