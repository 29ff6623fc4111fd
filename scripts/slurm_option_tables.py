#!/usr/bin/env python3
"""Extract Slurm's own configuration option tables into slurm_stack/spec/data/.

    scripts/slurm_option_tables.py <slurm git dir> <tag> [<tag> ...]

e.g. `scripts/slurm_option_tables.py /work/.mirror/SchedMD+slurm/repo slurm-24-11-7-1
slurm-26-05-3-1`. For each tag it reads src/common/read_config.c from the repository (no work
tree needed: `git show <tag>:<path>`) and writes slurm_stack/spec/data/slurm-<major>.json:

- "slurm.conf": `slurm_conf_options[]`, the keys slurmctld and slurmd take on a slurm.conf line;
- one table per key of it whose handler parses the rest of its line with an option table of its
  own (NodeName, PartitionName, NodeSet, DownNodes, SlurmctldHost, ...), named by that key: the
  options a `NodeName=` line (and so a dynamic node's `slurmd --conf`) or a `PartitionName=`
  line takes.

Each key maps to {"type": "S_P_..."} plus, where the table gives one, "handler" (the C function
that parses the value; `_defunct_option` only logs that the key is defunct) and "options" (the
table the handler parses the rest of the line with). A slurm.conf key that read_config.c still
lists only to stop the daemon (`fatal("The X option has been removed...")`) gets "removed" with
that message. Entries are written as Slurm writes them, positional (`{"Key", S_P_UINT16,
handler}`) or designated (`{.key = "Key", .type = S_P_ARRAY, .handler = ...}`).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

READ_CONFIG = "src/common/read_config.c"
OUT_DIR = Path(__file__).resolve().parent.parent / "slurm_stack" / "spec" / "data"

_TAG = re.compile(r"^slurm-(?P<year>\d+)-(?P<month>\d+)-(?P<patch>\d+)-(?P<release>\d+)$")
_ARRAY = re.compile(r"\bs_p_options_t\s+(?P<name>\w+)\s*\[\s*\]\s*=\s*\{")
_REMOVED = re.compile(
    r'\bfatal\s*\(\s*"(?P<message>(?:The )?(?P<key>\w+)(?: option)? has been removed[^"]*)"'
)


def strip_comments(source: str) -> str:
    """C source without comments; string and character literals are kept as they are."""
    out = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in "\"'":
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            out.append(source[i : j + 1])
            i = j + 1
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(source: str, start: int) -> int:
    """The index of the `}` closing the `{` at ``start`` (literals hold no braces here)."""
    depth = 0
    for i in range(start, len(source)):
        if source[i] == "{":
            depth += 1
        elif source[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced braces from offset {start}")


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside braces and parentheses."""
    parts, depth, current = [], 0, []
    for c in text:
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(c)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def parse_entry(body: str) -> dict[str, str] | None:
    """One `{...}` initializer of an s_p_options_t array, or None for the `{NULL}` end."""
    fields = split_top(body)
    if not fields or fields[0] == "NULL":
        return None
    if fields[0].startswith("."):
        named = {}
        for field in fields:
            name, _, value = field.partition("=")
            named[name.strip().lstrip(".")] = value.strip()
    else:
        named = dict(zip(("key", "type", "handler", "destroy"), fields, strict=False))
    key = named["key"]
    if not (key.startswith('"') and key.endswith('"')):
        raise ValueError(f"unexpected key {key!r} in {body!r}")
    entry = {"key": key[1:-1], "type": named["type"]}
    if named.get("handler") and named["handler"] != "NULL":
        entry["handler"] = named["handler"]
    return entry


def option_arrays(source: str, start: int = 0, end: int | None = None):
    """(name, entries) of each s_p_options_t array defined in source[start:end]."""
    end = len(source) if end is None else end
    for match in _ARRAY.finditer(source, start, end):
        close = matching_brace(source, match.end() - 1)
        body = source[match.end() : close]
        entries = []
        i = 0
        while (open_ := body.find("{", i)) >= 0:
            stop = matching_brace(body, open_)
            if (entry := parse_entry(body[open_ + 1 : stop])) is not None:
                entries.append(entry)
            i = stop + 1
        yield match["name"], entries


def function_body(source: str, name: str) -> tuple[int, int] | None:
    """Where the definition of function ``name`` has its body (not a prototype)."""
    for match in re.finditer(rf"\b{re.escape(name)}\s*\(", source):
        close = source.find(")", match.end())
        after = source[close + 1 :].lstrip()
        declared = _line_of(source, match.start())
        if after.startswith("{") and re.search(r"\b(static|extern|int|void)\b", declared):
            open_ = source.index("{", close)
            return open_, matching_brace(source, open_)
    return None


def _line_of(source: str, index: int) -> str:
    return source[source.rfind("\n", 0, index) + 1 : index]


def tables(source: str) -> dict[str, dict[str, dict[str, str]]]:
    """The slurm.conf table and the tables its line handlers parse with, by key."""
    source = strip_comments(source)
    arrays = dict(option_arrays(source))
    if "slurm_conf_options" not in arrays:
        raise ValueError("no slurm_conf_options[] in read_config.c")
    removed: dict[str, str] = {}
    for match in _REMOVED.finditer(source):
        removed.setdefault(match["key"], match["message"])  # the first one the daemon meets
    out: dict[str, dict[str, dict[str, str]]] = {"slurm.conf": {}}
    for entry in arrays["slurm_conf_options"]:
        key = entry.pop("key")
        handler = entry.get("handler")
        if handler and (body := function_body(source, handler)):
            inner = list(option_arrays(source, *body))
            if inner:
                if len(inner) > 1:
                    raise ValueError(f"{handler} defines more than one option table")
                entry["options"] = key
                out[key] = {e.pop("key"): e for e in inner[0][1]}
        if key in removed:
            entry["removed"] = removed[key]
        out["slurm.conf"][key] = entry
    return out


def extract(git_dir: str, tag: str) -> dict:
    match = _TAG.fullmatch(tag)
    if not match:
        raise SystemExit(f"{tag!r} is not a release tag like slurm-24-11-7-1")
    source = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{tag}:{READ_CONFIG}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    year, month, patch = match["year"], match["month"], int(match["patch"])
    return {
        "version": f"{year}.{month}",
        "release": f"{year}.{month}.{patch}",
        "tag": tag,
        "source": READ_CONFIG,
        "generatedBy": "scripts/slurm_option_tables.py",
        "tables": tables(source),
    }


def dump(data: dict) -> str:
    """JSON with one line per option, so a new Slurm release diffs as one line per change."""
    head = {name: value for name, value in data.items() if name != "tables"}
    lines = ["{"] + [f"  {json.dumps(name)}: {json.dumps(value)}," for name, value in head.items()]
    lines.append('  "tables": {')
    for t, (name, options) in enumerate(data["tables"].items()):
        lines.append(f"    {json.dumps(name)}: {{")
        for i, (key, entry) in enumerate(options.items()):
            comma = "," if i < len(options) - 1 else ""
            lines.append(f"      {json.dumps(key)}: {json.dumps(entry)}{comma}")
        lines.append("    }" + ("," if t < len(data["tables"]) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    git_dir, tags = argv[0], argv[1:]
    git_dir = str(Path(git_dir) / ".git") if (Path(git_dir) / ".git").is_dir() else git_dir
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for tag in tags:
        data = extract(git_dir, tag)
        path = OUT_DIR / f"slurm-{data['version']}.json"
        path.write_text(dump(data))
        sizes = ", ".join(f"{name} {len(keys)}" for name, keys in data["tables"].items())
        print(f"{path}: {tag} ({sizes})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
