"""What the sandbox keeps of a stack between applies: its Secrets, as Pulumi state would, and
the last render, while nothing it follows from changes."""

import base64
import json
from pathlib import Path

import pytest

from slurm_stack.sandbox import render_cache
from slurm_stack.sandbox.stack import cluster_name, keep_secrets, render_for_sandbox
from slurm_stack.sandbox.state import SandboxState

ROOT = Path(__file__).resolve().parent.parent


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


def test_a_generated_secret_dropped_and_declared_again_is_new(tmp_path: Path) -> None:
    """As `pulumi up` deletes a random resource the program no longer declares and creates a
    new one when it comes back (the REST API's key, turned off and on)."""
    state = tmp_path / "secrets.json"
    keep_secrets([secret("c-munge-key", "auth", "k1"), secret("c-jwt", "rest", "j1")], state)
    without = keep_secrets([secret("c-munge-key", "auth", "k2")], state)
    assert data(without, "c-munge-key") == "k1"
    back = keep_secrets([secret("c-munge-key", "auth", "k3"), secret("c-jwt", "rest", "j3")], state)
    assert (data(back, "c-munge-key"), data(back, "c-jwt")) == ("k1", "j3")


def test_the_cluster_name_follows_the_stack_file_as_it_is_edited(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.dev.yaml"
    for name in ("alpha", "bravo", "alpha"):  # the same length: only the content tells them
        stack_file.write_text(f"config:\n  slurm-stack:cluster:\n    name: {name}\n")
        assert cluster_name(stack_file, "slurm-stack") == name
    stack_file.write_text("config: {}\n")
    assert cluster_name(stack_file, "slurm-stack") is None
    stack_file.unlink()
    assert cluster_name(stack_file, "slurm-stack") is None


def config_map(documents: list[dict], part: str) -> dict:  # type: ignore[type-arg]
    return next(d for d in documents if d["kind"] == "ConfigMap" and part in d["metadata"]["name"])


def test_an_up_that_changes_nothing_takes_the_last_render_and_any_change_renders_again(
    tmp_path: Path,
) -> None:
    state = SandboxState(tmp_path / "state")
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text((ROOT / "Pulumi.dev.yaml").read_text())
    first = render_for_sandbox(stack_file, "slurm-stack", state)
    assert state.render_file.stat().st_mode & 0o777 == 0o600  # it holds Secret values

    def rendered_anew() -> bool:
        """Mark the kept render, then render: only a render that takes the kept one (and runs
        no program) has the mark."""
        kept = json.loads(state.render_file.read_text())
        config_map(kept["manifests"], "-slurm-config-")["data"]["marked"] = "kept"
        state.render_file.write_text(json.dumps(kept))
        stack = render_for_sandbox(stack_file, "slurm-stack", state)
        return "marked" not in config_map(stack.manifests, "-slurm-config-")["data"]

    assert not rendered_anew()
    assert render_for_sandbox(stack_file, "slurm-stack", state).outputs == first.outputs
    # What the objects follow from, changed one at a time: each runs the program again.
    stack_file.write_text(stack_file.read_text().replace("name: dev", "name: devtwo"))
    assert rendered_anew()
    state.save_outputs({**first.outputs, "slurmVersion": "24.11"})
    assert rendered_anew()
    state.ssh_key.unlink()  # the sandbox user's key is part of the stack's users
    state.ssh_key.with_suffix(".pub").unlink(missing_ok=True)
    assert rendered_anew()
    assert not rendered_anew()  # nothing changed since the last


def test_the_program_digest_follows_every_file_of_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "package"
    (package / "templates").mkdir(parents=True)
    template = package / "templates" / "slurm.conf.j2"
    template.write_text("ClusterName={{ name }}\n")
    monkeypatch.setattr(render_cache, "PACKAGE_DIR", package)

    def digest() -> str:
        render_cache.program_digest.cache_clear()
        return render_cache.program_digest()

    before = digest()
    assert digest() == before
    template.write_text("ClusterName={{ name }}\nTreeWidth=16\n")
    assert digest() != before
    (package / "__pycache__").mkdir()
    after = digest()
    (package / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert digest() == after  # compiled files follow from the sources
    render_cache.program_digest.cache_clear()


def test_an_external_databases_password_follows_the_config_a_generated_one_is_kept(
    tmp_path: Path,
) -> None:
    """Pulumi rewrites a Secret rendered from `accountingDbPassword` when the config changes;
    the embedded database's random password stays as it was first generated."""
    from slurm_stack.sandbox.stack import config_rendered_secrets
    from slurm_stack.spec import load_spec

    base = {
        "name": "c",
        "workerPools": [{"name": "cpu", "replicas": 1}],
        "jail": {"storageClass": "standard", "size": "5Gi"},
    }
    cluster = {**base, "accounting": {"mode": "external", "external": {"host": "db"}}}
    external = load_spec(cluster, db_password_provided=True)
    assert config_rendered_secrets(external) == {"c-db-password", "c-registry-auth"}
    referenced = {
        "mode": "external",
        "external": {"host": "db", "passwordSecret": {"name": "s", "key": "k"}},
    }
    assert "c-db-password" not in config_rendered_secrets(
        load_spec({**cluster, "accounting": referenced})
    )
    embedded = load_spec(base)
    assert config_rendered_secrets(embedded) == {"c-registry-auth"}

    state = tmp_path / "secrets.json"
    rendered = config_rendered_secrets(external)
    keep_secrets([secret("c-db-password", "accounting", "one")], state, rendered)
    again = keep_secrets([secret("c-db-password", "accounting", "two")], state, rendered)
    assert data(again, "c-db-password") == "two"
    # Generated (the embedded database's): the first value stays.
    generated = tmp_path / "generated.json"
    keep_secrets([secret("c-db-password", "accounting", "one")], generated)
    kept = keep_secrets([secret("c-db-password", "accounting", "two")], generated)
    assert data(kept, "c-db-password") == "one"


def test_a_sandbox_draws_its_own_random_values_and_keeps_them_while_declared(
    tmp_path: Path,
) -> None:
    """As the random provider does: each deployment's values are its own, and a value stays
    while the program declares its resource; a resource no longer declared loses its salt."""
    import json

    import yaml

    from slurm_stack.offline.engine import run_program
    from slurm_stack.program import run
    from slurm_stack.sandbox.stack import RandomSalts
    from tests.conftest import DEV_STACK

    config = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]

    def random_values(salts: RandomSalts) -> dict[str, object]:
        result = run_program(
            run, config={"slurm-stack:cluster": json.dumps(config)}, random_salt=salts
        )
        salts.save()
        return {r.urn: r.outputs for r in result.resources if r.type.startswith("random:")}

    first = random_values(RandomSalts(tmp_path / "one.json"))
    assert first and random_values(RandomSalts(tmp_path / "one.json")) == first
    other = random_values(RandomSalts(tmp_path / "two.json"))
    assert other.keys() == first.keys()
    assert all(other[urn] != first[urn] for urn in first)

    kept = tmp_path / "one.json"
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "urn:gone": "x"}))
    random_values(RandomSalts(kept))
    assert set(json.loads(kept.read_text())) == set(first)
