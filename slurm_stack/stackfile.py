"""Read `Pulumi.yaml` and `Pulumi.<stack>.yaml` the way the Pulumi CLI hands config to a program.

A stack file is checked before anything runs, and every problem found in it is reported at once,
each with its `path:line:column` and key path (`slurm-stack:cluster.workerPools[0].name`):
YAML syntax, a key given twice in one mapping (YAML keeps the last one without a word, Pulumi's
YAML parser refuses it), a document or `config` that is not a mapping, an unknown key of the
project's own namespace (with a did-you-mean) and a known key holding the wrong kind of value.
Keys of other namespaces (`kubernetes:context`) are left alone, as the Pulumi CLI does.
"""

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import yaml

from slurm_stack.spec.errors import CONFIG_KEY, SpecError, join_path
from slurm_stack.spec.rules import (
    DB_PASSWORD_CONFIG_KEY,
    LDAP_PASSWORD_CONFIG_KEY,
    REGISTRY_AUTH_CONFIG_KEY,
    SECRET_PLACEHOLDER,
)

# The config keys the program reads, without their namespace (the project name).
CLUSTER_NAME = CONFIG_KEY.split(":", 1)[1]
PASSWORD_NAMES = tuple(
    key.split(":", 1)[1]
    for key in (DB_PASSWORD_CONFIG_KEY, LDAP_PASSWORD_CONFIG_KEY, REGISTRY_AUTH_CONFIG_KEY)
)
KNOWN_NAMES = (CLUSTER_NAME, *PASSWORD_NAMES)

_MERGE_TAG = "tag:yaml.org,2002:merge"


class SecretsGiven(TypedDict):
    """Which secret config values a stack sets, by `load_spec`'s keywords."""

    db_password_provided: bool
    ldap_password_provided: bool
    registry_auth_provided: bool


@dataclass(frozen=True)
class StackConfig:
    """A stack's config as the program sees it: string values, JSON for objects."""

    project: str
    stack: str
    config: dict[str, str]
    secret_keys: list[str]

    def secrets_given(self) -> SecretsGiven:
        """Which secret config values the stack sets, as `load_spec` takes them."""

        def given(config_key: str) -> bool:
            return f"{self.project}:{config_key.split(':', 1)[1]}" in self.config

        return {
            "db_password_provided": given(DB_PASSWORD_CONFIG_KEY),
            "ldap_password_provided": given(LDAP_PASSWORD_CONFIG_KEY),
            "registry_auth_provided": given(REGISTRY_AUTH_CONFIG_KEY),
        }


@dataclass(frozen=True, order=True)
class StackFileProblem:
    """One problem in a stack file: where (1-based line and column, 0 if unknown), which key."""

    line: int
    column: int
    key: str
    message: str

    def render(self, path: Path) -> str:
        """`Pulumi.dev.yaml:7:9: slurm-stack:cluster.workerPools[0].name: duplicate key …`."""
        where = f"{path}:{self.line}:{self.column}" if self.line else str(path)
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class StackFileError(SpecError):
    """A stack file that cannot be used, with every problem found in it, one per line.

    A SpecError, so that a caller that reports invalid stack config reports this too; its
    problems are in `problems` (`issues`, the cluster definition's, is empty).
    """

    def __init__(self, path: Path, problems: list[StackFileProblem]):
        self.path = path
        self.problems = sorted(set(problems))
        self.issues = []
        self.config_key = CONFIG_KEY
        lines = [problem.render(path) for problem in self.problems]
        if len(lines) == 1:
            text = lines[0]
        else:
            text = f"{path}: {len(lines)} problems in the stack file:\n" + "\n".join(
                f"  {line}" for line in lines
            )
        ValueError.__init__(self, text)


def stack_file(stack: str, project_dir: Path) -> Path:
    """The stack file of ``stack`` beside Pulumi.yaml."""
    return project_dir / f"Pulumi.{stack}.yaml"


def project_name(project_dir: Path, default: str = "slurm-stack") -> str:
    """The `name` in Pulumi.yaml (the config namespace), if there is one."""
    path = project_dir / "Pulumi.yaml"
    if not path.exists():
        return default
    document, root, problems = _parse(path, project=None)
    if root is not None and not isinstance(document, dict):
        problems.append(
            _at(root, "", f"expected a mapping with a 'name' key, got {_kind(document)}")
        )
    if problems:
        raise StackFileError(path, problems)
    return str((document or {}).get("name", default))


def load_stack_config(path: Path, project: str) -> StackConfig:
    """Parse a stack file; `secure:` values become placeholders marked secret.

    Raises StackFileError naming every problem of the file (nothing is read from a broken one).
    """
    document, root, problems = _parse(path, project)
    config: dict[Any, Any] = {}
    if root is not None and not isinstance(document, dict):
        problems.append(
            _at(
                root,
                "",
                f"expected a mapping with a 'config' key at the top, got {_kind(document)}",
            )
        )
    elif isinstance(document, dict) and document.get("config") is not None:
        config_node = _value_node(root, "config")
        if isinstance(document["config"], dict):
            config = document["config"]
            problems += _config_problems(config, config_node, project)
        else:
            problems.append(
                _at(
                    config_node,
                    "config",
                    "expected a mapping of config keys (such as "
                    f"{project}:{CLUSTER_NAME}), got {_kind(document['config'])}",
                )
            )
    if problems:
        raise StackFileError(path, problems)
    stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    values: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        full_key = _full_key(key, project)
        if _is_secure(value):
            values[full_key] = SECRET_PLACEHOLDER
            secret_keys.append(full_key)
        else:
            values[full_key] = _as_config_string(value)
    return StackConfig(project, stack, values, secret_keys)


def _as_config_string(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _full_key(key: str, project: str) -> str:
    """`cluster` -> `slurm-stack:cluster`: a key without a namespace is the project's."""
    return key if ":" in key else f"{project}:{key}"


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


# -- parsing ---------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that records each key given twice in one mapping (YAML would keep the last).

    Keys merged in with `<<:` may be overridden; only a mapping's own keys are compared.
    """

    def __init__(self, stream: str):
        super().__init__(stream)
        # (mapping node, first key node, repeated key node)
        self.duplicates: list[tuple[yaml.MappingNode, yaml.Node, yaml.Node]] = []
        self._checked: set[int] = set()

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self._note_duplicates(node)
        return super().construct_mapping(node, deep=deep)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # A mapping merged into another is flattened (its merged keys added) before it is
        # constructed: compare its own keys first.
        self._note_duplicates(node)
        super().flatten_mapping(node)

    def _note_duplicates(self, node: yaml.Node) -> None:
        if not isinstance(node, yaml.MappingNode) or id(node) in self._checked:
            return
        self._checked.add(id(node))
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: construct_mapping says so
                continue
            if first is not key_node:
                self.duplicates.append((node, first, key_node))


def _parse(path: Path, project: str | None) -> tuple[Any, yaml.Node | None, list[StackFileProblem]]:
    """The document, its root node and the duplicate keys of ``path``; raises StackFileError
    if it cannot be read or is not YAML."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise StackFileError(
            path, [StackFileProblem(0, 0, "", f"cannot read: {error.strerror}")]
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        byte = raw[error.start : error.start + 1].hex()
        raise StackFileError(
            path, [StackFileProblem(line, column, "", f"not UTF-8 text (byte 0x{byte})")]
        ) from None
    loader = None
    try:
        loader = _Loader(text)  # checks for characters YAML does not allow
        root = loader.get_single_node()
        paths = _node_paths(root, project) if root is not None else {}
        document = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as error:
        raise StackFileError(path, [_syntax_problem(error, text)]) from None
    finally:
        if loader is not None:
            loader.dispose()
    problems = [
        _at(
            again,
            _render_path((*paths.get(id(mapping), ()), _key_text(again)), project),
            f"duplicate key (first at {_where(first, again)}); "
            "YAML would silently keep only the last one",
        )
        for mapping, first, again in loader.duplicates
    ]
    return document, root, problems


def _where(first: yaml.Node, again: yaml.Node) -> str:
    line, column = first.start_mark.line, first.start_mark.column
    return f"line {line + 1}" + (f", column {column + 1}" if line == again.start_mark.line else "")


def _syntax_problem(error: yaml.YAMLError, text: str) -> StackFileProblem:
    """A YAML error at its 1-based line and column."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "invalid YAML"
        if error.context and error.problem:
            context = error.context
            if error.context_mark and error.context_mark.line != getattr(mark, "line", None):
                context += f" at line {error.context_mark.line + 1}"
                context += f", column {error.context_mark.column + 1}"
            # "while parsing a flow mapping" explains the problem; "expected a single document"
            # leads to it ("but found another document").
            if context.startswith("while"):
                problem = f"{problem} ({context})"
            else:
                problem = f"{context}, {problem}"
        if "'\\t'" in problem:
            problem += "; indent with spaces, YAML does not allow tabs there"
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        return StackFileProblem(line, column, "", f"YAML syntax error: {problem}")
    if isinstance(error, yaml.reader.ReaderError):
        before = text[: error.position]
        line = before.count("\n") + 1
        column = error.position - (before.rfind("\n") + 1) + 1
        return StackFileProblem(
            line, column, "", f"YAML syntax error: character #x{error.character:04x} not allowed"
        )
    return StackFileProblem(0, 0, "", f"YAML syntax error: {error}")


def _node_paths(root: yaml.Node, project: str | None) -> dict[int, tuple[str | int, ...]]:
    """Where each node of the (not yet constructed) document is: ('config', 'x:y', 0, 'name')."""
    paths: dict[int, tuple[str | int, ...]] = {}

    def walk(node: yaml.Node, where: tuple[str | int, ...]) -> None:
        if id(node) in paths:  # an alias: it is where its anchor is
            return
        paths[id(node)] = where
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:  # `<<:` merges its keys into this mapping
                    merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else []
                    for source in merged or [value_node]:
                        walk(source, where)
                else:
                    walk(value_node, (*where, _key_text(key_node)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*where, index))

    walk(root, ())
    return paths


def _render_path(parts: tuple[str | int, ...], project: str | None) -> str:
    """('config', 'cluster', 'workerPools', 0) -> 'slurm-stack:cluster.workerPools[0]'."""
    if project is not None and len(parts) > 1 and parts[0] == "config":
        head = parts[1]
        parts = (_full_key(head, project) if isinstance(head, str) else head, *parts[2:])
    return join_path(*[part if isinstance(part, int) else str(part) for part in parts])


def _key_text(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return node.value
    return f"<{'mapping' if isinstance(node, yaml.MappingNode) else 'sequence'} key>"


# -- checks ----------------------------------------------------------------------------------


def _config_problems(
    config: dict[Any, Any], node: yaml.Node | None, project: str
) -> list[StackFileProblem]:
    """Unknown keys of the project's namespace, a key given twice, a value of the wrong kind."""
    problems: list[StackFileProblem] = []
    key_nodes = _key_nodes(node)
    given: dict[str, Any] = {}  # full key -> the key as written
    for key, value in config.items():
        key_node = key_nodes.get(key)
        if not isinstance(key, str):
            problems.append(
                _at(
                    key_node,
                    "config",
                    f"config key {key!r} is {_kind(key)}; expected a string "
                    f"(namespace:name, such as {project}:{CLUSTER_NAME})",
                )
            )
            continue
        full_key = _full_key(key, project)
        if full_key in given:
            problems.append(
                _at(
                    key_node,
                    full_key,
                    f"given twice, as {given[full_key]} (line "
                    f"{key_nodes[given[full_key]].start_mark.line + 1}) and as {key}",
                )
            )
        given[full_key] = key
        namespace, name = full_key.split(":", 1)
        if namespace != project:
            continue
        value_node = _value_node(node, key)
        if name not in KNOWN_NAMES:
            problems.append(_at(key_node, full_key, _unknown_key(name, project)))
        elif name == CLUSTER_NAME and not _is_cluster_value(value):
            problems.append(
                _at(
                    value_node,
                    full_key,
                    f"expected a mapping (the cluster definition), got {_kind(value)}",
                )
            )
        elif name in PASSWORD_NAMES and not _is_password_value(value):
            problems.append(
                _at(
                    value_node,
                    full_key,
                    "expected a string or a `secure:` value "
                    f"(pulumi config set --secret {name} <password>), got {_kind(value)}",
                )
            )
    return problems


def _unknown_key(name: str, project: str) -> str:
    message = f"unknown config key of project {project}"
    close = difflib.get_close_matches(name, KNOWN_NAMES, n=1)
    if close:
        return f"{message}; did you mean {project}:{close[0]}?"
    known = ", ".join(f"{project}:{known}" for known in KNOWN_NAMES)
    return f"{message} (known: {known})"


def _is_cluster_value(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, str):  # `pulumi config set cluster '{…}'` stores the JSON as a string
        try:
            return isinstance(json.loads(value), dict)
        except ValueError:
            return False
    return False


def _is_password_value(value: Any) -> bool:
    if _is_secure(value):
        return isinstance(value["secure"], str)
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _key_nodes(node: yaml.Node | None) -> dict[Any, yaml.Node]:
    """Each key's node in a (constructed, so flattened) mapping node; the last one wins, as in
    the constructed dict."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    loader = _Loader("")
    try:
        nodes = {}
        for key_node, _ in node.value:
            try:
                nodes[loader.construct_object(key_node, deep=True)] = key_node
            except TypeError:
                continue
        return nodes
    finally:
        loader.dispose()


def _value_node(node: yaml.Node | None, key: Any) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    key_node = _key_nodes(node).get(key)
    return next((value for k, value in reversed(node.value) if k is key_node), None)


def _at(node: yaml.Node | None, key: str, message: str) -> StackFileProblem:
    if node is None:
        return StackFileProblem(0, 0, key, message)
    return StackFileProblem(node.start_mark.line + 1, node.start_mark.column + 1, key, message)


def _kind(value: Any) -> str:
    if value is None:
        return "no value"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
