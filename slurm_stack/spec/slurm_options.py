"""Slurm's own option tables, and one parser for the lines the spec hands to Slurm.

controller.slurmConfExtra (slurm.conf lines), workerPools[].nodeConfExtra (a dynamic node's
`slurmd --conf` options, parsed as a NodeName line) and partitions[].options (options of a
PartitionName line) are read here as the daemons read them (src/common/parse_config.c and
parse_value.c): `Key=Value` pairs matched by parse_config.c's keyvalue_pattern, keys looked up
case-insensitively in the option tables of read_config.c, values converted by the key's s_p
type. The tables are data: slurm_stack/spec/data/slurm-<major>.json, generated from Slurm's
source by scripts/slurm_option_tables.py.
"""

import difflib
import json
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from slurm_stack.spec.errors import SpecIssue, join_path
from slurm_stack.spec.text import text_problem

DATA_DIR = Path(__file__).parent / "data"

SLURM_CONF = "slurm.conf"
NODE = "NodeName"
PARTITION = "PartitionName"
# What each table is, in messages.
TABLE_NAMES = {
    SLURM_CONF: "a slurm.conf option",
    NODE: "a node option (NodeName line)",
    PARTITION: "a partition option (PartitionName line)",
}

# Old spellings Slurm still reads for another key (read_config.c falls back to them when the
# key itself is unset, or logs that it ignores them): one spelling per setting.
ALIASES: dict[str, dict[str, str]] = {
    SLURM_CONF: {
        "controlmachine": "SlurmctldHost",
        "controladdr": "SlurmctldHost",
        "backupcontroller": "SlurmctldHost",
        "backupaddr": "SlurmctldHost",
        "cryptotype": "CredType",
    },
    NODE: {"procs": "CPUs", "features": "Feature"},
    PARTITION: {"shared": "OverSubscribe"},
}

INTEGER_MAX = {
    "S_P_UINT16": 0xFFFF,
    "S_P_UINT32": 0xFFFFFFFF,
    "S_P_UINT64": 0xFFFFFFFFFFFFFFFF,
    "S_P_LONG": 0x7FFFFFFFFFFFFFFF,
}
# s_p_handle_boolean: these words, in any case.
BOOLEAN_WORDS = {"yes": True, "up": True, "true": True, "1": True}
BOOLEAN_WORDS |= {"no": False, "down": False, "false": False, "0": False}
DEFUNCT_HANDLER = "_defunct_option"


@dataclass(frozen=True)
class Option:
    """One entry of an s_p_options_t table."""

    key: str
    type: str
    handler: str | None = None
    options: str | None = None  # the table the handler parses the rest of the line with
    removed: str | None = None  # the daemon's fatal() when the key is set


@dataclass(frozen=True)
class Table:
    """The options of one kind of line in one Slurm major."""

    name: str
    version: str
    options: dict[str, Option]  # by lower-case key

    def get(self, key: str) -> Option | None:
        return self.options.get(key.lower())

    def suggestion(self, key: str, leave_out: Collection[str] = frozenset()) -> str | None:
        """The usable key closest to ``key`` (difflib), if one is close."""
        usable = [
            lower
            for lower, option in self.options.items()
            if lower not in leave_out and not option.removed and option.handler != DEFUNCT_HANDLER
        ]
        close = difflib.get_close_matches(key.lower(), usable, n=1)
        return self.options[close[0]].key if close else None


@cache
def _data(version: str) -> dict:
    return json.loads((DATA_DIR / f"slurm-{version}.json").read_text())


def table_versions() -> tuple[str, ...]:
    """The majors with a generated table, oldest first."""
    names = (path.stem.removeprefix("slurm-") for path in DATA_DIR.glob("slurm-*.json"))
    return tuple(sorted(names, key=lambda v: tuple(int(p) for p in v.split("."))))


def release(version: str) -> str:
    """The Slurm release (`24.11.7`) the tables of ``version`` were read from."""
    return _data(version)["release"]


@cache
def table(version: str, name: str) -> Table:
    """Slurm ``version``'s table ``name`` (slurm.conf, NodeName, PartitionName, ...)."""
    entries = _data(version)["tables"].get(name, {})
    options = {key.lower(): Option(key, **entry) for key, entry in entries.items()}
    return Table(name, version, options)


# ---------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Pair:
    """One `Key=Value` of a line: the value as the daemon sees it (quotes removed)."""

    key: str
    value: str
    text: str  # as written


_KEY = re.compile(r"[A-Za-z0-9_.]+")  # parse_config.c: ([[:alnum:]_.]+)
_OPERATOR = re.compile(r"[-*+/]?=")
_INCLUDE = re.compile(r"include(\s|=|$)", re.IGNORECASE)
EXAMPLE = "(example: 'MaxJobCount=50000')"


def parse_line(text: str) -> list[Pair]:
    """The `Key=Value` pairs of one item, as parse_config.c's keyvalue_pattern reads them
    (a value is `"quoted, with spaces"` or runs to the next whitespace); ValueError for what
    the daemon would refuse or read otherwise than it looks."""
    line = text.strip()
    if _INCLUDE.match(line):
        raise ValueError(
            f"{text!r}: the Include directive is refused: an included file is not part of the "
            "stack config; give its lines here instead"
        )
    if "#" in line:
        raise ValueError(
            f"{text!r} contains '#', which starts a comment in slurm.conf: Slurm would drop the "
            "rest of the line"
        )
    if "\\" in line:
        raise ValueError(
            f"{text!r} contains '\\', slurm.conf's escape and line continuation character"
        )
    pairs: list[Pair] = []
    position = 0
    while position < len(line):
        key = _KEY.match(line, position)
        operator = key and _OPERATOR.match(line, key.end())
        if not key or not operator:
            rest = line[position:]
            if not pairs:
                hint = (
                    ": write it without spaces around '='"
                    if re.match(r"[A-Za-z0-9_.]+\s+[-*+/]?=", rest)
                    else ""
                )
                raise ValueError(f"{text!r} is not a single 'Key=Value' line {EXAMPLE}{hint}")
            raise ValueError(f"{text!r}: {rest.split()[0]!r} after the value is not 'Key=Value'")
        if operator.group() != "=":
            raise ValueError(
                f"{text!r}: write '{key.group()}=value': Slurm reads "
                f"'{key.group()}{operator.group()}' here as plain '='"
            )
        start = operator.end()
        value, end = _value(line, start)
        if value is None:
            empty = f'{key.group()}=""'
            raise ValueError(f"{text!r}: {key.group()} has no value (an empty one is {empty})")
        pairs.append(Pair(key.group(), value, line[key.start() : end]))
        position = end
        while position < len(line) and line[position].isspace():
            position += 1
    if not pairs:
        raise ValueError(f"{text!r} is not a single 'Key=Value' line {EXAMPLE}")
    return pairs


def _value(line: str, start: int) -> tuple[str | None, int]:
    """The value at ``start`` and where it ends: the longer of `"[^"]*"` and `\\S+`, each
    followed by whitespace or the end (POSIX regexec takes the longest match)."""
    unquoted = re.compile(r"\S+").match(line, start)
    quoted = re.compile(r'"([^"]*)"(?=\s|$)').match(line, start)
    if quoted and (not unquoted or quoted.end() >= unquoted.end()):
        return quoted[1], quoted.end()
    if unquoted:
        return unquoted.group(), unquoted.end()
    return None, start


# ---------------------------------------------------------------------------- values


def value_problem(option: Option, value: str) -> str | None:
    """Why the daemon would refuse ``value`` for ``option`` (its s_p type), or None."""
    if option.type == "S_P_BOOLEAN":
        if value.lower() not in BOOLEAN_WORDS:
            return (
                f"{option.key} takes YES or NO (Slurm also reads TRUE/FALSE, UP/DOWN, 1/0), "
                f"got {value!r}"
            )
    elif option.type in INTEGER_MAX:
        return _integer_problem(option, value)
    return None


def _integer_problem(option: Option, value: str) -> str | None:
    """s_p_handle_uint16/32/64 and s_p_handle_long: strtoul/strtol in base 0 (decimal, 0x
    hexadecimal, 0 octal), a K suffix (x1024) for 32 and 64 bits, or UNLIMITED/INFINITE."""
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return None
    signed = option.type == "S_P_LONG"
    maximum = INTEGER_MAX[option.type]
    lowest = -maximum - 1 if signed else 0
    suffix = "[kK]?" if option.type in ("S_P_UINT32", "S_P_UINT64") else ""
    match = re.fullmatch(
        rf"(?P<sign>[-+]?)(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<oct>0[0-7]*)|(?P<dec>[1-9][0-9]*))"
        rf"(?P<k>{suffix})",
        value,
    )
    what = (
        f"{option.key} takes a whole number from {lowest} to {maximum}"
        + (", K for x1024" if suffix else "")
        + " or UNLIMITED"
    )
    if not match:
        return f"{what}, got {value!r}"
    if match["hex"]:
        number = int(match["hex"], 16)
    elif match["oct"]:
        number = int(match["oct"], 8)
    else:
        number = int(match["dec"])
    number *= 1024 if match["k"] else 1
    if match["sign"] == "-" and not signed:
        return f"{what}, got {value!r}: Slurm refuses a '-' here"
    number *= -1 if match["sign"] == "-" else 1
    if number < lowest:
        return f"{what}, got {value!r}: it is less than {lowest}"
    if number > maximum:
        return f"{what}, got {value!r}: it is greater than {maximum}"
    return None


# ---------------------------------------------------------------------------- one field


@dataclass(frozen=True)
class Owned:
    """The keys slurm-stack sets on a kind of line, and how to say so."""

    where: dict[str, str]  # lower-case key -> what sets it
    message: str  # with {key} (as written) and {where}

    def problem(self, key: str, table_name: str) -> str | None:
        canonical = ALIASES.get(table_name, {}).get(key.lower())
        if canonical and canonical.lower() in self.where:
            shown = f"{key} (Slurm's old spelling of {canonical})"
            return self.message.format(key=shown, where=self.where[canonical.lower()])
        if key.lower() in self.where:
            return self.message.format(key=key, where=self.where[key.lower()])
        return None


def field_issues(
    path: tuple[str | int, ...],
    items: list,
    table_name: str,
    version: str,
    owned: Owned,
    known: Callable[[str], str | None] = lambda key: None,
) -> Iterator[SpecIssue]:
    """Every problem of a list of lines (controller.slurmConfExtra, a pool's nodeConfExtra, a
    partition's options), each at its item. ``known`` says why a key is refused on
    ``version`` before the table is asked (versions.key_problem's messages). Lines the field's
    own validator (parse_line) or the text rule refuses are left to them."""
    lines = table(version, table_name)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, str) or text_problem(item, multiline=False):
            continue
        try:
            head, *rest = parse_line(item)
        except ValueError:
            continue
        where = join_path(*path, index)
        problem = known(head.key) or _key_problem(head, lines, owned)
        if problem:
            yield SpecIssue(where, problem)
        option = lines.get(head.key)
        if option and option.options:
            if not problem:
                sub = table(version, option.options)
                for message in _line_problems(head.key, rest, sub):
                    yield SpecIssue(where, message)
        elif rest and not (option is None and _line_key_elsewhere(head.key, lines)):
            yield SpecIssue(
                where,
                f"{item!r} holds a second Key=Value pair, {rest[0].text!r}: give one Key=Value "
                "per item (one item per line)",
            )
            for pair in rest:
                if refused := owned.problem(pair.key, table_name):
                    yield SpecIssue(where, refused)
        if table_name == NODE:
            for pair in (head, *rest):
                if "nodename=" in pair.value.lower():
                    yield SpecIssue(
                        where,
                        f"{pair.text!r}: slurmd stops when its --conf contains 'NodeName=' "
                        "anywhere",
                    )
        if problem or option is None or option.type == "S_P_ARRAY":
            continue
        earlier = first.setdefault(_canonical(option.key, table_name), index)
        if earlier != index:
            yield SpecIssue(
                where,
                f"{head.key} is also set by {join_path(*path, earlier)}: Slurm keeps only the "
                "last one; set it once",
            )


def _line_key_elsewhere(key: str, lines: Table) -> bool:
    """Whether another Slurm version's table takes ``key`` with options on its line."""
    return any(
        (option := table(version, lines.name).get(key)) is not None and option.options
        for version in table_versions()
    )


def _canonical(key: str, table_name: str) -> str:
    return ALIASES.get(table_name, {}).get(key.lower(), key).lower()


def _key_problem(pair: Pair, lines: Table, owned: Owned) -> str | None:
    """Why the first pair of a line cannot be used, or None."""
    option = lines.get(pair.key)
    what = TABLE_NAMES.get(lines.name, f"an option of a {lines.name} line")
    if message := owned.problem(pair.key, lines.name):
        return message  # NodeName and PartitionName, which start their lines, included
    if option is None:
        return _unknown(pair.key, lines, what, set(owned.where))
    if option.removed:
        return f"{pair.key}: Slurm {lines.version} stops at start with {option.removed!r}"
    if option.handler == DEFUNCT_HANDLER:
        return (
            f"{pair.key} is defunct in Slurm {lines.version}: the daemons ignore it and log an "
            "error; remove it"
        )
    canonical = ALIASES.get(lines.name, {}).get(pair.key.lower())
    if canonical:
        return f"{pair.key} is Slurm's old spelling of {canonical}: write {canonical}= instead"
    return value_problem(option, pair.value)


def _unknown(key: str, lines: Table, what: str, leave_out: set[str]) -> str:
    message = f"{key!r} is not {what} Slurm {lines.version} knows"
    others = [
        version
        for version in table_versions()
        if version != lines.version and table(version, lines.name).get(key) is not None
    ]
    if others:
        return f"{message}; Slurm {' and '.join(others)} knows it (slurmVersion is {lines.version})"
    if close := lines.suggestion(key, leave_out):
        message += f"; did you mean {close}?"
    return message


def _line_problems(head: str, rest: list[Pair], sub: Table) -> Iterator[str]:
    """The options after `head=...` on a line whose handler parses them with ``sub``."""
    seen: set[str] = set()
    for pair in rest:
        option = sub.get(pair.key)
        if option is None:
            yield _unknown(pair.key, sub, f"an option of a {head} line", set())
            continue
        if option.key.lower() in seen:
            yield f"{pair.key} is set twice on this line: Slurm keeps only the last one"
        seen.add(option.key.lower())
        if message := value_problem(option, pair.value):
            yield message
