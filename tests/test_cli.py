"""`python -m slurm_stack render`: files written, secrets redacted, errors named, deterministic."""

import subprocess
import sys
from pathlib import Path

import yaml

from slurm_stack.cli import main
from tests.conftest import PROD_STACK, ROOT


def test_render_dev_stack(tmp_path: Path, capsys) -> None:
    assert (
        main(["render", "--stack", "dev", "--out", str(tmp_path), "--project-dir", str(ROOT)]) == 0
    )
    documents = list(yaml.safe_load_all((tmp_path / "manifests.yaml").read_text()))
    kinds = [d["kind"] for d in documents]
    assert kinds.index("Secret") < kinds.index("ConfigMap") < kinds.index("StatefulSet")
    secrets = [d for d in documents if d["kind"] == "Secret"]
    for secret in secrets:
        values = [*secret.get("data", {}).values(), *secret.get("stringData", {}).values()]
        assert values and set(values) <= {"redacted", "cmVkYWN0ZWQ="}  # data: base64
    configs = {p.name for p in (tmp_path / "configs").iterdir()}
    assert {"slurm.conf", "cgroup.conf", "gres.conf", "plugstack.conf"} <= configs
    assert {"slurmdbd.conf", "sshd_config", "users.json", "authorized_keys.alice"} <= configs
    assert "ClusterName=dev" in (tmp_path / "configs" / "slurm.conf").read_text()
    assert "valid against Kubernetes 1.30, 1.31, 1.32, 1.33, 1.34" in capsys.readouterr().out


def test_render_is_deterministic_and_shows_secrets_on_request(tmp_path: Path) -> None:
    first, second, shown = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out in (first, second):
        assert main(["render", "--config", str(PROD_STACK), "--out", str(out)]) == 0
    for name in ("manifests.yaml", "outputs.json", "configs/slurm.conf"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    assert main(["render", "--config", str(PROD_STACK), "--out", str(shown), "--show-secrets"]) == 0
    text = (shown / "manifests.yaml").read_text()
    assert "BEGIN OPENSSH PRIVATE KEY" in text and "redacted" not in text


def test_invalid_stack_file_names_each_key(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.broken.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "slurm-stack:cluster": {
                        "name": "broken",
                        "workerPools": [{"name": "cpu", "gpus": 2}],
                        "partitions": [{"name": "p", "pools": ["gpu"]}],
                        "jail": {"storageClass": "nfs"},
                        "login": {"service": {"type": "Public"}},
                    }
                }
            }
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_stack",
            "render",
            "--config",
            str(stack),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2
    assert "slurm-stack:cluster.partitions[0].pools[0]: unknown pool 'gpu'" in out.stderr
    assert "slurm-stack:cluster.login.service.type" in out.stderr
    assert "slurm-stack:cluster.workerPools[0].gpuType" in out.stderr
    assert not (tmp_path / "o").exists()


def test_missing_stack_file(tmp_path: Path, capsys) -> None:
    assert (
        main(["render", "--stack", "nope", "--out", str(tmp_path), "--project-dir", str(tmp_path)])
        == 2
    )
    assert "Pulumi.nope.yaml does not exist" in capsys.readouterr().err
