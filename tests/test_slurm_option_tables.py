"""Slurm's option tables (slurm_stack/spec/data, from scripts/slurm_option_tables.py) and the
parser the spec reads slurm.conf lines, node options and partition options with."""

import glob
import importlib.util
import os
import re
import tomllib
from pathlib import Path

import pytest

from slurm_stack.spec.rules import (
    OWNED_NODE_CONF_KEYS,
    OWNED_PARTITION_KEYS,
    OWNED_SLURM_CONF_KEYS,
)
from slurm_stack.spec.slurm_options import (
    ALIASES,
    DEFUNCT_HANDLER,
    NODE,
    PARTITION,
    SLURM_CONF,
    Option,
    Owned,
    field_issues,
    parse_line,
    table,
    table_versions,
    value_problem,
)
from slurm_stack.spec.versions import SUPPORTED_VERSIONS, VERSIONED_SLURM_CONF_KEYS, at_least

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "slurm_stack" / "spec" / "data"
SLURM_GIT = Path(os.environ.get("SLURM_GIT_DIR", "/work/.mirror/SchedMD+slurm/repo"))


def _usable(version: str, name: str, key: str) -> bool:
    option = table(version, name).get(key)
    return option is not None and not option.removed and option.handler != DEFUNCT_HANDLER


def test_every_supported_version_has_its_tables():
    assert table_versions() == SUPPORTED_VERSIONS
    for version in SUPPORTED_VERSIONS:
        for name in (SLURM_CONF, NODE, PARTITION):
            assert len(table(version, name).options) > 20, (version, name)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize(
    ("name", "key", "kind"),
    [
        (SLURM_CONF, "MaxJobCount", "S_P_UINT32"),
        (SLURM_CONF, "TreeWidth", "S_P_UINT16"),
        (SLURM_CONF, "DefMemPerGPU", "S_P_UINT64"),
        (SLURM_CONF, "UsePAM", "S_P_BOOLEAN"),
        (SLURM_CONF, "Prolog", "S_P_ARRAY"),
        (SLURM_CONF, "SchedulerParameters", "S_P_STRING"),
        (NODE, "CoreSpecCount", "S_P_UINT16"),
        (NODE, "RealMemory", "S_P_UINT64"),
        (NODE, "CPUs", "S_P_UINT16"),
        (PARTITION, "DefMemPerGPU", "S_P_UINT64"),
        (PARTITION, "OverSubscribe", "S_P_STRING"),
        (PARTITION, "PriorityTier", "S_P_UINT16"),
        (PARTITION, "MaxNodes", "S_P_UINT32"),
        (PARTITION, "Hidden", "S_P_BOOLEAN"),
    ],
)
def test_tables_hold_the_keys_we_use(version, name, key, kind):
    option = table(version, name).get(key.lower())
    assert option is not None and option.key == key
    assert option.type == kind


def test_handler_keys_name_the_table_of_their_line():
    for version in SUPPORTED_VERSIONS:
        conf = table(version, SLURM_CONF)
        assert conf.get("NodeName").options == NODE
        assert conf.get("PartitionName").options == PARTITION
        assert conf.get("CoreSpecPlugin").handler == DEFUNCT_HANDLER
        assert "has been removed" in conf.get("SallocDefaultCommand").removed
    assert table("26.05", SLURM_CONF).get("PowerAction").options == "PowerAction"
    assert table("24.11", SLURM_CONF).get("PowerAction") is None


@pytest.mark.parametrize("entry", VERSIONED_SLURM_CONF_KEYS, ids=lambda e: e.key)
def test_versioned_keys_agree_with_the_tables(entry):
    for version in table_versions():
        usable = _usable(version, SLURM_CONF, entry.key)
        known = table(version, SLURM_CONF).get(entry.key) is not None
        if entry.since:
            assert usable == at_least(version, entry.since), (version, entry)
        if entry.removed_in:
            assert usable != at_least(version, entry.removed_in), (version, entry)
        if entry.deprecated_in:
            # Still read (with a warning) from then on: the spec refuses it by choice.
            assert known, (version, entry)
        if entry.replacement and (entry.removed_in or entry.deprecated_in):
            since = entry.removed_in or entry.deprecated_in
            for key in re.split(r" and |, ", entry.replacement):
                assert not at_least(version, since) or _usable(version, SLURM_CONF, key)


@pytest.mark.parametrize(
    ("owned", "name"),
    [
        (OWNED_SLURM_CONF_KEYS, SLURM_CONF),
        (OWNED_NODE_CONF_KEYS, NODE),
        (OWNED_PARTITION_KEYS, PARTITION),
    ],
    ids=[SLURM_CONF, NODE, PARTITION],
)
def test_owned_keys_are_slurm_keys(owned, name):
    """An owned key the tables lack would guard nothing (a typo, or a key Slurm dropped)."""
    for key in owned:
        head = key == name.lower()  # NodeName=, PartitionName= start their line
        assert head or any(table(v, name).get(key) for v in table_versions()), key


def test_aliases_name_keys_of_their_table():
    for name, aliases in ALIASES.items():
        for old, new in aliases.items():
            for version in table_versions():
                assert table(version, name).get(old), (version, old)
                assert table(version, name).get(new), (version, new)


def test_package_data_ships_the_tables():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["slurm_stack"]
    package = ROOT / "slurm_stack"
    shipped = {p for pattern in patterns for p in glob.glob(str(package / pattern))}
    assert {str(path) for path in DATA.glob("slurm-*.json")} <= shipped


@pytest.mark.skipif(not SLURM_GIT.is_dir(), reason="no Slurm git mirror (SLURM_GIT_DIR)")
@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_script_regenerates_the_committed_tables(version):
    spec = importlib.util.spec_from_file_location(
        "slurm_option_tables", ROOT / "scripts" / "slurm_option_tables.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    path = DATA / f"slurm-{version}.json"
    tag = re.search(r'"tag": "([^"]+)"', path.read_text())[1]
    assert script.dump(script.extract(str(SLURM_GIT), tag)) == path.read_text()


# --------------------------------------------------------------------------- what we render

NONE_OWNED = Owned({}, "")


def _golden(pattern: str) -> list[tuple[str, Path]]:
    out = []
    for path in sorted((ROOT / "tests" / "golden").glob(pattern)):
        header = (path.parent / "slurm.conf").read_text().splitlines()[0]
        out.append((re.search(r"\(Slurm (\d+\.\d+)\)", header)[1], path))
    return out


@pytest.mark.parametrize(("version", "path"), _golden("*/slurm.conf"), ids=lambda p: str(p))
def test_rendered_slurm_conf_parses_as_its_version_reads_it(version, path):
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    assert not list(field_issues(("slurm.conf",), lines, SLURM_CONF, version, NONE_OWNED))


@pytest.mark.parametrize(("version", "path"), _golden("*/node-conf.*.txt"), ids=lambda p: str(p))
def test_rendered_node_conf_parses_as_its_version_reads_it(version, path):
    options = path.read_text().split()
    assert not list(field_issues(("node",), options, NODE, version, NONE_OWNED))


# --------------------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ("MaxJobCount=5", [("MaxJobCount", "5")]),
        ('Reason="under repair"', [("Reason", "under repair")]),
        ('Reason=""', [("Reason", "")]),
        ('Reason="a"b', [("Reason", '"a"b')]),  # no space after the quote: one unquoted word
        ("DownNodes=n1 State=DOWN", [("DownNodes", "n1"), ("State", "DOWN")]),
        ("SlurmctldHost=a(b.c)", [("SlurmctldHost", "a(b.c)")]),
        ("Gres=gpu:h100:8", [("Gres", "gpu:h100:8")]),
    ],
)
def test_parse_line_reads_pairs_as_slurm_does(text, pairs):
    assert [(p.key, p.value) for p in parse_line(text)] == pairs


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("MaxJobCount 5", "is not a single 'Key=Value' line"),
        ("MaxJobCount = 5", "without spaces around '='"),
        ("MaxJobCount=", "has no value"),
        ("MaxJobCount+=5", "write 'MaxJobCount=value'"),
        ("include /etc/slurm/site.conf", "Include directive is refused"),
        ("Include=/etc/slurm/site.conf", "Include directive is refused"),
        ("INCLUDE", "Include directive is refused"),
        ("MaxJobCount=5 # many", "starts a comment"),
        ("Prolog=/a\\", "escape and line continuation"),
        ('Reason="a b" c', "'c' after the value is not 'Key=Value'"),
        ("=5", "is not a single 'Key=Value' line"),
    ],
)
def test_parse_line_refuses_what_slurm_reads_otherwise(text, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_line(text)


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        ("S_P_UINT16", "65535", True),
        ("S_P_UINT16", "65536", False),
        ("S_P_UINT16", "0x10", True),  # strtoul, base 0
        ("S_P_UINT16", "010", True),  # octal 8, as strtoul reads it
        ("S_P_UINT16", "08", False),  # not octal: strtoul stops at the 8
        ("S_P_UINT16", "+5", True),
        ("S_P_UINT16", "-0", False),  # s_p_handle_uint16 refuses any leading '-'
        ("S_P_UINT16", "5k", False),  # the K suffix is for 32 and 64 bits only
        ("S_P_UINT16", "UNLIMITED", True),
        ("S_P_UINT16", "infinite", True),
        ("S_P_UINT16", "", False),
        ("S_P_UINT16", "5.0", False),
        ("S_P_UINT32", "4k", True),
        ("S_P_UINT32", "4194304K", False),  # 2^32 after the K
        ("S_P_UINT32", "4294967295", True),
        ("S_P_UINT64", "18446744073709551615", True),
        ("S_P_UINT64", "18446744073709551616", False),
        ("S_P_UINT64", "-1", False),
        ("S_P_LONG", "-5", True),
        ("S_P_LONG", "9223372036854775808", False),
        ("S_P_BOOLEAN", "YES", True),
        ("S_P_BOOLEAN", "down", True),
        ("S_P_BOOLEAN", "True", True),
        ("S_P_BOOLEAN", "0", True),
        ("S_P_BOOLEAN", "on", False),
        ("S_P_BOOLEAN", "y", False),
        ("S_P_STRING", "anything at all", True),
    ],
)
def test_values_are_read_as_their_s_p_type_reads_them(kind, value, ok):
    assert (value_problem(Option("Key", kind), value) is None) == ok
