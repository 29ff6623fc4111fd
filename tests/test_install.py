"""`pulumi install` fills the project's virtualenv from requirements.txt (Pulumi.yaml's python
runtime, `toolchain: pip`: pulumi/pulumi sdk/python/toolchain/pip.go runs
`<venv>/bin/python -m pip install -r requirements.txt` in the project directory)."""

import os
import re
import subprocess
import sys
import time
import tomllib
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
# What pip prints when it cannot reach an index; any other failure is the test's to report.
_OFFLINE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
    r"resolution|Name or service not known|Network is unreachable|ProxyError|"
    r"ConnectTimeoutError|Read timed out|No matching distribution found for setuptools",
)


def _requirement_lines() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in REQUIREMENTS.read_text().splitlines())
    return [line for line in lines if line]


def _key(requirement: Requirement) -> tuple[str, str, str]:
    name = re.sub(r"[-_.]+", "-", requirement.name).lower()
    return name, str(requirement.specifier), str(requirement.marker or "")


def test_requirements_agree_with_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = _requirement_lines()
    # The project itself, editable, after its dependencies (see requirements.txt).
    assert lines[-1] == "-e ."
    listed = sorted(_key(Requirement(line)) for line in lines[:-1])
    declared = sorted(_key(Requirement(text)) for text in project["dependencies"])
    assert listed == declared


def test_pulumi_yaml_installs_with_pip_into_dot_venv() -> None:
    import yaml

    runtime = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["runtime"]
    assert runtime["name"] == "python"
    assert runtime["options"] == {"toolchain": "pip", "virtualenv": ".venv"}


def test_fresh_venv_from_requirements_runs_the_program_imports(tmp_path: Path) -> None:
    """What `pulumi install` does, into an empty venv: then the program's imports resolve."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    # Fail fast without a network instead of pip's default retries; the cache stays shared.
    env["PIP_DEFAULT_TIMEOUT"] = "20"
    env["PIP_RETRIES"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    started = time.monotonic()
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "-r", "requirements.txt"],
        cwd=ROOT,  # as Pulumi runs it: `-e .` is the project directory
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    elapsed = time.monotonic() - started
    if install.returncode != 0 and _OFFLINE.search(install.stdout + install.stderr):
        pytest.skip(f"pip cannot reach a package index: {install.stderr.strip()[-300:]}")
    assert install.returncode == 0, install.stdout + install.stderr
    print(f"pip install -r requirements.txt: {elapsed:.1f} s", file=sys.stderr)
    # From outside the checkout, so the installed project (not the cwd) provides slurm_stack.
    probe = subprocess.run(
        [
            python,
            "-c",
            "import slurm_stack.program, pulumi_kubernetes, pulumi_random, pulumi_tls; "
            "from slurm_stack.spec import load_spec; print(slurm_stack.program.__file__)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).resolve() == ROOT / "slurm_stack" / "program.py"


def test_the_kubernetes_provider_is_one_that_awaits_rollouts_and_never_adopts_objects() -> None:
    """pulumi-kubernetes 4.26 fixed a StatefulSet rollout reported done before it began, and
    4.29 creates with client-side create (CHANGELOG.md of pulumi/pulumi-kubernetes)."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [kubernetes] = [Requirement(d) for d in dependencies if d.startswith("pulumi-kubernetes")]
    assert not kubernetes.specifier.contains("4.28.9")
    assert kubernetes.specifier.contains("4.29.0")
