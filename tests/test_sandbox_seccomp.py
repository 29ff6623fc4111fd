"""The sandbox's RuntimeDefault seccomp profile refuses what containerd's refuses: on a real
node slurmrestd crash-looped on `fatal: Unable to unshare System V namespace: Operation not
permitted`, under podman's own profile it ran. Checked on the profile itself, and on real
containers under runc."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_stack.k8s.rest_api import SLURMRESTD_SECURITY as SECURITY
from slurm_stack.paths import SLURMRESTD_UID
from slurm_stack.sandbox.seccomp import (
    CAPABILITY_GATES,
    EPERM,
    NEVER,
    PODMAN_DEFAULT_PROFILE,
    gated_calls,
    runtime_default_profile,
    write_runtime_default_profile,
)
from slurm_stack.spec.models import IMAGE_REVISION

IMAGE = f"localhost/slurm-stack/base:26.05-{IMAGE_REVISION}"  # images/build.sh's first
REST_IMAGE = f"localhost/slurm-stack/rest:26.05-{IMAGE_REVISION}"

needs_podmans_profile = pytest.mark.skipif(
    not PODMAN_DEFAULT_PROFILE.exists(), reason="podman's default profile is not installed"
)


def rules_naming(profile: dict, call: str) -> list[dict]:  # type: ignore[type-arg]
    return [rule for rule in profile["syscalls"] if call in rule["names"]]


@needs_podmans_profile
def test_podmans_profile_lets_any_container_unshare_and_the_sandboxs_does_not() -> None:
    podmans = json.loads(PODMAN_DEFAULT_PROFILE.read_text())
    assert any(not rule.get("includes") for rule in rules_naming(podmans, "unshare"))
    sandboxs = runtime_default_profile(podmans)
    assert [rule["includes"] for rule in rules_naming(sandboxs, "unshare")] == [
        {"caps": ["CAP_SYS_ADMIN"]}
    ]


@needs_podmans_profile
def test_every_gated_call_is_allowed_only_with_one_of_its_capabilities() -> None:
    profile = runtime_default_profile(json.loads(PODMAN_DEFAULT_PROFILE.read_text()))
    gates: dict[str, set[str]] = {}
    for capability, names in CAPABILITY_GATES.items():
        for name in names:
            gates.setdefault(name, set()).add(capability)
    for call in gated_calls():
        allowing = [r for r in rules_naming(profile, call) if r["action"] == "SCMP_ACT_ALLOW"]
        unconditional = [r for r in allowing if not r.get("includes") and not r.get("excludes")]
        assert not unconditional, call
        with_capability = {c for r in allowing for c in r.get("includes", {}).get("caps", [])}
        assert with_capability == gates[call], call
    for call in NEVER:
        assert not rules_naming(profile, call), call
    assert profile["defaultErrnoRet"] == EPERM


def run_in_container(
    profile: Path, image: str, argv: list[str], *options: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", "run", "--rm", "--network=none", "--cap-drop=all", *options,
         "--security-opt", f"seccomp={profile}", "--entrypoint", argv[0], image, *argv[1:]],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@needs_podmans_profile
def test_under_runc_slurmrestd_cannot_unshare_without_cap_sys_admin(tmp_path: Path) -> None:
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    for image in (IMAGE, REST_IMAGE):
        if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
            pytest.skip(f"{image} is not built here (images/build.sh)")
    sandboxs = write_runtime_default_profile(tmp_path / "runtime-default.json")
    # slurmrestd as its pod runs it, up to its first step after the unshare: it looks for a
    # slurm.conf, which there is none of here.
    slurmrestd = ["slurmrestd", "127.0.0.1:6820"]
    as_its_user = f"--user={SLURMRESTD_UID}:{SLURMRESTD_UID}"
    refused = run_in_container(sandboxs, REST_IMAGE, slurmrestd, as_its_user)
    assert "fatal: Unable to unshare System V namespace: Operation not permitted" in refused.stderr
    for ran in (
        run_in_container(PODMAN_DEFAULT_PROFILE, REST_IMAGE, slurmrestd, as_its_user),
        run_in_container(sandboxs, REST_IMAGE, slurmrestd, as_its_user, "--cap-add=SYS_ADMIN"),
        run_in_container(
            sandboxs, REST_IMAGE, slurmrestd, as_its_user, f"--env=SLURMRESTD_SECURITY={SECURITY}"
        ),
    ):
        assert "unshare" not in ran.stderr and "failed to fetch config" in ran.stderr, ran
    # Processes still start: clone(2) without namespace flags is allowed.
    ordinary = ["sh", "-c", "sh -c 'true & wait' && ls / >/dev/null && echo ok"]
    assert run_in_container(sandboxs, IMAGE, ordinary).stdout.strip() == "ok"
