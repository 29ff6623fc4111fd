"""A broken stack file is refused by `python -m slurm_stack render` before anything runs.

Each case runs the real CLI on a small file and expects exit status 2, no traceback, nothing
written, and every problem named by `path:line:column` and its key path. Bad files fail before
the program is imported, so these runs take a fraction of a second each.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurm_stack.spec import SpecError
from slurm_stack.stackfile import StackFileError, load_stack_config
from tests.conftest import DEV_STACK, ROOT

# (id, stack file text, fragments the error must contain; {path} is the stack file's path)
CASES: list[tuple[str, str, list[str]]] = [
    # 1. YAML syntax errors: the file's own path, 1-based line and column.
    (
        "unclosed-brace",
        "config:\n  slurm-stack:cluster: {name: dev\n",
        [
            "{path}:3:1: YAML syntax error: expected ',' or '}'",
            "while parsing a flow mapping at line 2, column 24",
        ],
    ),
    (
        "tab-indentation",
        "config:\n  slurm-stack:cluster:\n    name: dev\n\tnamespace: x\n",
        ["{path}:4:1: YAML syntax error: found character '\\t'", "indent with spaces"],
    ),
    (
        "bad-indentation",
        "config:\n  slurm-stack:cluster:\n    name: dev\n   namespace: x\n",
        ["{path}:4:4: YAML syntax error: expected <block end>", "at line 2, column 3"],
    ),
    (
        "over-indented-key",
        "config:\n  slurm-stack:cluster:\n    name: dev\n      namespace: x\n",
        ["{path}:4:16: YAML syntax error: mapping values are not allowed here"],
    ),
    (
        "two-documents",
        "config: {}\n---\nconfig: {}\n",
        ["{path}:2:1: YAML syntax error: expected a single document in the stream"],
    ),
    (
        "control-character",
        'config:\n  other:bell: "\x07"\n',
        ["{path}:2:16: YAML syntax error: character #x0007 not allowed"],
    ),
    # 2. The wrong shape: one line naming the key and what is expected.
    (
        "document-is-a-list",
        "- config\n",
        ["{path}:1:1: expected a mapping with a 'config' key at the top, got a list"],
    ),
    (
        "document-is-a-string",
        "slurm-stack:cluster\n",
        ["{path}:1:1: expected a mapping with a 'config' key at the top, got a string"],
    ),
    (
        "config-is-a-list",
        "config:\n  - slurm-stack:cluster\n",
        ["{path}:2:3: config: expected a mapping of config keys (such as slurm-stack:cluster)"],
    ),
    (
        "config-is-a-string",
        "config: slurm-stack:cluster\n",
        ["{path}:1:9: config: expected a mapping of config keys", "got a string"],
    ),
    (
        "cluster-is-a-string",
        "config:\n  slurm-stack:cluster: dev\n",
        [
            "{path}:2:24: slurm-stack:cluster: expected a mapping (the cluster definition), "
            "got a string ('dev')"
        ],
    ),
    (
        "cluster-is-a-list",
        "config:\n  slurm-stack:cluster:\n    - name: dev\n",
        [
            "{path}:3:5: slurm-stack:cluster: expected a mapping (the cluster definition), "
            "got a list"
        ],
    ),
    (
        "cluster-is-empty",
        "config:\n  cluster:\n",
        ["slurm-stack:cluster: expected a mapping (the cluster definition), got no value"],
    ),
    (
        "password-is-a-mapping",
        "config:\n  slurm-stack:accountingDbPassword: {value: x}\n",
        [
            "{path}:2:37: slurm-stack:accountingDbPassword: expected a string or a `secure:` value",
            "got a mapping",
        ],
    ),
    (
        "config-key-is-a-number",
        "config:\n  1: x\n",
        ["{path}:2:3: config: config key 1 is a number; expected a string (namespace:name"],
    ),
    # 3. Unknown keys of our own namespace, with a did-you-mean.
    (
        "unknown-clusters",
        "config:\n  slurm-stack:clusters: {name: dev}\n",
        [
            "{path}:2:3: slurm-stack:clusters: unknown config key of project slurm-stack; "
            "did you mean slurm-stack:cluster?"
        ],
    ),
    (
        "unknown-password",
        "config:\n  slurm-stack:accountingDbPasword: x\n",
        [
            "{path}:2:3: slurm-stack:accountingDbPasword: unknown config key of project "
            "slurm-stack; did you mean slurm-stack:accountingDbPassword?"
        ],
    ),
    (
        "unknown-unprefixed",
        "config:\n  other:thing: 1\n  ldapBindPasswd: x\n",
        [
            "{path}:3:3: slurm-stack:ldapBindPasswd: unknown config key of project slurm-stack; "
            "did you mean slurm-stack:ldapBindPassword?"
        ],
    ),
    (
        "unknown-no-suggestion",
        "config:\n  slurm-stack:zzz: 1\n",
        [
            "{path}:2:3: slurm-stack:zzz: unknown config key of project slurm-stack (known: "
            "slurm-stack:cluster, slurm-stack:accountingDbPassword, slurm-stack:ldapBindPassword, "
            "slurm-stack:containerRegistryAuth)"
        ],
    ),
    # 4. A key twice in one mapping, at any depth.
    (
        "duplicate-workerPools",
        "config:\n  slurm-stack:cluster:\n    workerPools: []\n    name: dev\n"
        "    workerPools: [{name: cpu}]\n",
        [
            "{path}:5:5: slurm-stack:cluster.workerPools: duplicate key (first at line 3)",
        ],
    ),
    (
        "duplicate-pool-name",
        "config:\n  slurm-stack:cluster:\n    workerPools:\n      - name: cpu\n"
        "      - name: gpu\n        replicas: 1\n        name: gpu2\n",
        ["{path}:7:9: slurm-stack:cluster.workerPools[1].name: duplicate key (first at line 5)"],
    ),
    (
        "duplicate-in-flow-mapping",
        "config:\n  slurm-stack:cluster:\n    workerPools:\n"
        "      - {name: cpu, replicas: 1, replicas: 2}\n",
        [
            "{path}:4:34: slurm-stack:cluster.workerPools[0].replicas: duplicate key "
            "(first at line 4, column 21)"
        ],
    ),
    (
        "duplicate-config-key",
        "config:\n  slurm-stack:cluster: {name: a}\n  slurm-stack:cluster: {name: b}\n",
        ["{path}:3:3: slurm-stack:cluster: duplicate key (first at line 2)"],
    ),
    (
        "duplicate-config",
        "config: {}\nconfig:\n  slurm-stack:cluster: {name: a}\n",
        ["{path}:2:1: config: duplicate key (first at line 1)"],
    ),
    (
        "cluster-with-and-without-namespace",
        "config:\n  slurm-stack:cluster: {name: a}\n  cluster: {name: b}\n",
        [
            "{path}:3:3: slurm-stack:cluster: given twice, as slurm-stack:cluster (line 2) "
            "and as cluster"
        ],
    ),
    # Everything that can be found together is reported together, in file order.
    (
        "all-at-once",
        "config:\n  slurm-stack:clusters: {}\n  slurm-stack:cluster:\n    name: dev\n"
        "    workerPools:\n      - name: cpu\n        name: gpu\n    name: dev2\n"
        "  slurm-stack:ldapBindPassword: [x]\n",
        [
            "{path}: 4 problems in the stack file:\n"
            "  {path}:2:3: slurm-stack:clusters: unknown config key of project slurm-stack; "
            "did you mean slurm-stack:cluster?\n"
            "  {path}:7:9: slurm-stack:cluster.workerPools[0].name: duplicate key "
            "(first at line 6); YAML would silently keep only the last one\n"
            "  {path}:8:5: slurm-stack:cluster.name: duplicate key (first at line 4); "
            "YAML would silently keep only the last one\n"
            "  {path}:9:33: slurm-stack:ldapBindPassword: expected a string or a `secure:` value "
        ],
    ),
]


def run_cli(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m slurm_stack ARGS`, after ``prelude`` (Python run first) if given."""
    code = f"{prelude}\nimport sys\nfrom slurm_stack.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def assert_refused(run: subprocess.CompletedProcess[str], out: Path) -> str:
    """Exit status 2, an error and no traceback, nothing written; returns stderr."""
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert "<unicode string>" not in run.stderr
    assert run.stderr.startswith("error: ")
    assert not out.exists()
    return run.stderr


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_stack_file_is_refused(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    error = assert_refused(run_cli("render", "--config", str(path), "--out", str(out)), out)
    for fragment in expected:
        assert fragment.replace("{path}", str(path)) in error, error


def test_broken_stack_by_name_and_broken_project_file(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  slurm-stack:cluster: [dev]\n")
    out = tmp_path / "out"
    args = ("render", "--stack", "bad", "--project-dir", str(tmp_path), "--out", str(out))
    error = assert_refused(run_cli(*args), out)
    assert f"{tmp_path / 'Pulumi.bad.yaml'}:2:24: slurm-stack:cluster: expected a mapping" in error

    (tmp_path / "Pulumi.yaml").write_text("name: slurm-stack\nname: other\n")
    error = assert_refused(run_cli(*args), out)
    assert f"{tmp_path / 'Pulumi.yaml'}:2:1: name: duplicate key (first at line 1)" in error


def test_project_name_is_the_namespace(tmp_path: Path) -> None:
    """Under project `mine`, `mine:` keys are checked and `slurm-stack:` ones are another's."""
    (tmp_path / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    (tmp_path / "Pulumi.x.yaml").write_text(
        "config:\n  slurm-stack:clusters: 1\n  mine:clusterr: {}\n"
    )
    out = tmp_path / "out"
    error = assert_refused(
        run_cli("render", "--stack", "x", "--project-dir", str(tmp_path), "--out", str(out)), out
    )
    assert "mine:clusterr: unknown config key of project mine; did you mean mine:cluster?" in error
    assert "slurm-stack:clusters" not in error


@pytest.mark.parametrize("module", ["kubernetes_validate", "cryptography"])
def test_render_without_the_render_extra(tmp_path: Path, module: str) -> None:
    out = tmp_path / "out"
    run = run_cli(
        "render",
        "--config",
        str(DEV_STACK),
        "--out",
        str(out),
        prelude=f"import sys\nsys.modules[{module!r}] = None  # as if not installed",
    )
    error = assert_refused(run, out)
    assert "the optional 'render' extra" in error
    assert f"no module {module!r}" in error
    assert "pip install '.[render]'" in error


def test_the_sandbox_refuses_a_broken_file_first(tmp_path: Path, monkeypatch, capsys) -> None:
    """The sandbox loads stack files the same way: same error, exit 2, before podman or root."""
    from slurm_stack.cli import main
    from slurm_stack.sandbox import session

    def no_sandbox(*args: object, **kwargs: object) -> None:
        raise AssertionError("the sandbox must not start on a broken stack file")

    monkeypatch.setattr(session, "Sandbox", no_sandbox)
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text("config:\n  slurm-stack:clusters: {}\n")
    assert main(["sandbox", "status", "--config", str(path)]) == 2
    assert f"{path}:2:3: slurm-stack:clusters: unknown config key" in capsys.readouterr().err

    # Where it loads the file itself (render_for_sandbox), the error is a SpecError, which
    # `sandbox` reports as such (exit 2) rather than crashing.
    with pytest.raises(StackFileError) as caught:
        load_stack_config(path, "slurm-stack")
    assert isinstance(caught.value, SpecError)
    assert [p.key for p in caught.value.problems] == ["slurm-stack:clusters"]


UNUSUAL = """\
# Comments, other namespaces, Pulumi's own top-level keys, an unprefixed key, anchors and
# merge keys that override (which is not a duplicate).
secretsprovider: passphrase
encryptionsalt: v1:abc
config:
  kubernetes:context: kind-dev      # another namespace's keys are left alone
  other:thing: [1, {a: b}]
  slurm-stack:accountingDbPassword:
    secure: AAABAEncrypted
  cluster:                          # no namespace: the project's
    name: odd
    namespace: slurm-odd
    images: {registry: localhost/slurm-stack}
    workerPools:
      - &pool
        name: cpu
        replicas: 1
        resources: &resources
          requests: {cpu: "1", memory: 1Gi}
          limits: {cpu: "2", memory: 2Gi}
      - <<: *pool
        name: big
        resources:
          <<: *resources
          limits: {cpu: "4", memory: 4Gi}
    partitions:
      - {name: main, default: true}
    jail: {storageClass: standard, size: 20Gi}
"""


def test_unusual_valid_file_still_loads_and_renders(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.odd.yaml"
    path.write_text(UNUSUAL)
    stack = load_stack_config(path, "slurm-stack")
    assert stack.config["kubernetes:context"] == "kind-dev"
    assert stack.config["other:thing"] == '[1, {"a": "b"}]'
    assert stack.secret_keys == ["slurm-stack:accountingDbPassword"]
    pools = yaml.safe_load(stack.config["slurm-stack:cluster"])["workerPools"]
    assert [(p["name"], p["resources"]["limits"]["cpu"]) for p in pools] == [
        ("cpu", "2"),
        ("big", "4"),
    ]

    out = tmp_path / "out"
    run = run_cli("render", "--config", str(path), "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert "NodeSet=big Feature=big" in (out / "configs" / "slurm.conf").read_text()
