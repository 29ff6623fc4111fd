"""`render`: the real program under the mock engine, written out and schema-validated."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_stack.k8s.common import CONFIG_FILES_LABEL
from slurm_stack.offline.engine import ProgramRun, run_program
from slurm_stack.offline.manifests import REDACTED, dump_yaml, manifests, redact_secrets
from slurm_stack.offline.validate import default_versions, validate_manifests
from slurm_stack.stackfile import load_stack_config


class RenderError(RuntimeError):
    """The program ran but produced objects the Kubernetes schema rejects."""


@dataclass(frozen=True)
class RenderResult:
    """What `render_stack` wrote."""

    manifests: list[dict[str, Any]]
    config_files: dict[str, str]
    outputs: dict[str, Any]
    versions: tuple[str, ...]
    run: ProgramRun


def run_stack(path: Path, *, project: str = "slurm-stack") -> ProgramRun:
    """Run `slurm_stack.program.run` with the config of stack file ``path``."""
    from slurm_stack.program import run

    stack = load_stack_config(path, project)
    return run_program(
        run,
        project=project,
        stack=stack.stack,
        config=stack.config,
        secret_keys=stack.secret_keys,
    )


def config_files(documents: list[dict[str, Any]]) -> dict[str, str]:
    """Files of the ConfigMaps that carry config files (slurm.conf, sshd_config, …)."""
    files: dict[str, str] = {}
    for document in documents:
        labels = document.get("metadata", {}).get("labels", {})
        if document.get("kind") != "ConfigMap" or labels.get(CONFIG_FILES_LABEL) != "true":
            continue
        for name, text in document.get("data", {}).items():
            if name in files and files[name] != text:
                raise RenderError(f"two ConfigMaps carry different files named {name}")
            files[name] = text
    return dict(sorted(files.items()))


def render_stack(
    path: Path,
    out: Path,
    *,
    project: str = "slurm-stack",
    show_secrets: bool = False,
    versions: list[str] | None = None,
) -> RenderResult:
    """Write `out/manifests.yaml`, `out/configs/*` and `out/outputs.json` for stack file
    ``path``; raise RenderError (after writing) if any object fails strict validation."""
    run = run_stack(path, project=project)
    documents = manifests(run.resources)
    checked = tuple(versions) if versions else default_versions()
    # Custom resources (the mariadb-operator MariaDB) have no schema in the OpenAPI bundle.
    problems = validate_manifests(documents, checked, unknown_kinds="skip")

    files = config_files(documents)
    shown = documents if show_secrets else [redact_secrets(d) for d in documents]
    outputs = {
        key: value if show_secrets or key not in run.secret_outputs else REDACTED
        for key, value in sorted(run.outputs.items())
    }
    (out / "configs").mkdir(parents=True, exist_ok=True)
    (out / "manifests.yaml").write_text(dump_yaml(shown))
    for name, text in files.items():
        (out / "configs" / name).write_text(text)
    (out / "outputs.json").write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n")
    if problems:
        raise RenderError(
            f"{len(problems)} schema problem(s) in the rendered objects:\n  "
            + "\n  ".join(problems)
        )
    return RenderResult(documents, files, outputs, checked, run)
