"""The lists in README.md that name parts of the code, compared with the code, so that they
cannot drift: the components, the top-level stack keys of the Configure table, the outputs,
and the Pod Security table."""

import inspect
import re
from pathlib import Path

import pulumi

import slurm_stack.components as components_package
from slurm_stack.spec.models import ClusterSpec

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def component_classes() -> set[str]:
    found = set()
    for path in Path(components_package.__file__).parent.glob("*.py"):
        module = __import__(f"slurm_stack.components.{path.stem}", fromlist=["_"])
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, pulumi.ComponentResource)
                and value.__module__ == module.__name__
            ):
                found.add(name)
    return found


def test_the_component_list_names_every_component() -> None:
    paragraph = README[README.index("Components (type tokens") :].split("\n\n", 1)[0]
    listed = set(re.findall(r"`([A-Z][A-Za-z]+)`", paragraph))
    assert listed == component_classes()


def test_the_configure_table_has_a_row_per_top_level_key() -> None:
    rows = re.findall(r"^\| `([a-zA-Z]+)[.`[]", README, flags=re.MULTILINE)
    aliases = {field.alias or name for name, field in ClusterSpec.model_fields.items()}
    missing = {key for key in aliases if key not in rows}
    # Keys the table covers in prose rows of their own sections.
    assert missing <= {"name", "namespace", "slurmVersion", "auth", "labels", "annotations"}, (
        missing
    )
    assert "externalNodes" in rows


def test_the_outputs_row_names_every_export() -> None:
    program = (Path(__file__).resolve().parents[1] / "slurm_stack" / "program.py").read_text()
    exported = set(re.findall(r'pulumi\.export\("([A-Za-z]+)"', program))
    row = next(line for line in README.splitlines() if line.startswith("| `outputs.json` |"))
    words = {
        "namespace": "namespace",
        "loginEndpoint": "login endpoint",
        "sshCommand": "`ssh` command",
        "configHash": "config hash",
        "slurmVersion": "Slurm version",
        "restApiUrl": "REST API URL",
    }
    for name in exported:
        assert words.get(name, f"`{name}`") in row, name
    assert exported >= {"outsideControllers", "outsideNodesAuthKey", "restApiUrl"}


# How the Pod Security table names each component of tests/test_pod_security.py's EXPECTED.
POD_SECURITY_NAMES = {
    "database": "MariaDB",
    "rest": "slurmrestd",
    "controller": "slurmctld",
    "accounting": "slurmdbd",
    "exporter": "the metrics exporter",
    "node-state": "the node-state controller",
    "reconfigure": "reconfigure",
    "pool-update": "pool-update",
    "nccl-benchmark": "NCCL Jobs",
    "users": "users Job",
    "jail": "populate-jail Job",
    "worker": "workers (slurmd)",
    "login": "login (sshd)",
}


def test_the_pod_security_table_has_every_component_at_its_level() -> None:
    from tests.test_pod_security import EXPECTED

    assert set(POD_SECURITY_NAMES) == set(EXPECTED)
    table = README[README.index("| pods | level | why not stricter |") :].split("\n\n", 1)[0]
    rows = table.splitlines()[2:]
    for component, name in POD_SECURITY_NAMES.items():
        (row,) = [r for r in rows if name in r.split("|")[1]]
        assert "| " + EXPECTED[component][0] in row, (component, row)


def test_the_tests_paragraph_names_each_share_of_the_real_slurm_tier() -> None:
    from tests.conftest import BESIDE_THE_TIER, VERSION_MATRIX_SHARE

    paragraph = README[README.index("`bash scripts/test.sh` builds the images") :]
    paragraph = " ".join(paragraph.split("\n\n", 1)[0].split())
    beside, matrix = paragraph.split("the version matrix", 1)
    assert set(re.findall(r"`(test_\w+\.py)`", beside)) == set(BESIDE_THE_TIER)
    assert set(re.findall(r"`(test_\w+\.py)`", matrix)) == set(VERSION_MATRIX_SHARE)
    script = (Path(__file__).resolve().parents[1] / "scripts" / "test.sh").read_text()
    [workers] = re.findall(r"set -- -n (\d)", script)
    assert f"pytest in {['', 'one', 'two', 'three', 'four'][int(workers)]} workers" in paragraph
