"""What the sandbox keeps of a stack's Secrets between applies, as Pulumi state would."""

import base64
from pathlib import Path

from slurm_stack.sandbox.stack import cluster_name, keep_secrets


def secret(name: str, component: str, value: str) -> dict:  # type: ignore[type-arg]
    return {
        "kind": "Secret",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
        "stringData": {"file": value},
    }


def data(documents: list[dict], name: str) -> str:  # type: ignore[type-arg]
    document = next(d for d in documents if d["metadata"]["name"] == name)
    return base64.b64decode(document["data"]["file"]).decode()


def test_generated_secrets_keep_their_first_value_rendered_ones_follow_the_config(
    tmp_path: Path,
) -> None:
    state = tmp_path / "secrets.json"
    first = keep_secrets(
        [secret("c-munge-key", "auth", "k1"), secret("c-sssd", "directory", "a")], state
    )
    assert data(first, "c-munge-key") == "k1" and data(first, "c-sssd") == "a"
    again = keep_secrets(
        [secret("c-munge-key", "auth", "k2"), secret("c-sssd", "directory", "b")], state
    )
    assert data(again, "c-munge-key") == "k1"  # a random value: Pulumi keeps it
    assert data(again, "c-sssd") == "b"  # rendered from the stack config: it follows
    assert state.stat().st_mode & 0o777 == 0o600


def test_the_cluster_name_follows_the_stack_file_as_it_is_edited(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.dev.yaml"
    for name in ("alpha", "bravo", "alpha"):  # the same length: only the content tells them
        stack_file.write_text(f"config:\n  slurm-stack:cluster:\n    name: {name}\n")
        assert cluster_name(stack_file, "slurm-stack") == name
    stack_file.write_text("config: {}\n")
    assert cluster_name(stack_file, "slurm-stack") is None
    stack_file.unlink()
    assert cluster_name(stack_file, "slurm-stack") is None
