"""Every bad config of the spec's table, as a user meets it: `render` on a stack file.

`tests/test_spec.py`'s INVALID table holds one row per defect (grouped by class: Kubernetes'
own rules, submount paths, accounting values, relations between keys, slurm.conf and sshd
lines, per-field rules). Here each row becomes a stack file, and to prove that no check waits
for the others to pass, every object of that file also carries an unknown key. The render
must exit 2, write nothing, and name the row's exact key together with every unknown key:
no more problems, no fewer.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_stack.cli import main
from slurm_stack.spec import SpecError, load_spec
from slurm_stack.spec.errors import join_path
from slurm_stack.spec.models import ClusterSpec
from slurm_stack.spec.walk import fields_by_key, item_annotation, model_for
from tests.test_spec import BASE, INVALID, KEY, mutate

STRAY = "strayKey"


def with_stray_keys(raw: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """A copy of ``raw`` with STRAY added to every object the spec reads as a model, and
    the paths of the added keys."""
    raw = copy.deepcopy(raw)
    added: set[str] = set()

    def visit(value: Any, annotation: Any, path: tuple[str | int, ...]) -> None:
        model = model_for(annotation, value)
        if model is not None and isinstance(value, dict):
            fields = fields_by_key(model)
            for key, item in value.items():
                if key in fields:
                    visit(item, fields[key][1].annotation, (*path, key))
            value[STRAY] = 1
            added.add(join_path(*path, STRAY))
        elif isinstance(value, list | dict):
            items = enumerate(value) if isinstance(value, list) else value.items()
            for key, item in items:
                visit(item, item_annotation(annotation), (*path, key))

    visit(raw, ClusterSpec, ())
    return raw, added


def test_every_object_of_the_base_gets_a_stray_key() -> None:
    _, added = with_stray_keys(BASE)
    assert {"strayKey", "jail.strayKey", "workerPools[1].strayKey"} <= added
    assert "partitions[1].strayKey" in added


@pytest.mark.parametrize(("changes", "path", "fragment", "count"), INVALID)
def test_bad_config_is_refused_with_its_key_among_all_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes, path, fragment, count
) -> None:
    raw, stray = with_stray_keys(mutate(BASE, changes))
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(yaml.safe_dump({"config": {"slurm-stack:cluster": raw}}))
    out = tmp_path / "out"

    assert main(["render", "--config", str(stack), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert not out.exists()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == f"error: {stack}: invalid stack config ({count + len(stray)} errors):"
    assert any(line.startswith(f"  {KEY}.{path}: ") and fragment in line for line in lines), (
        captured.err
    )
    for key in stray:
        assert f"  {KEY}.{key}: unknown key; valid keys here: " in captured.err

    # The same problems, and only those, when the spec is loaded directly.
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    paths = [issue.path for issue in info.value.issues]
    assert path in paths
    assert len(paths) == count + len(stray), str(info.value)
