"""The last render of a sandbox's stack, kept so that an `up` that changes nothing runs no
program.

The program's objects follow from the stack config, the outputs of the last `up`, the
program's own files and the libraries it runs on, and from nothing else. A render is kept
under a digest of all of them; an `up` whose digest matches takes the objects as they were
(they passed the schema check when they were rendered). Generated Secret values still come
from the values the state keeps (`stack.keep_secrets`), as after any render.
"""

import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import slurm_stack

Manifest = dict[str, Any]
PACKAGE_DIR = Path(slurm_stack.__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def program_digest() -> str:
    """A digest of what the program is: every file of the package (its code, templates and
    data), the installed distributions (name and version, from their metadata directories)
    and the Python that runs it. Taken once per process."""
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    for entry in sys.path:
        if os.path.isdir(entry):
            for name in sorted(os.listdir(entry)):
                if name.endswith((".dist-info", ".egg-info")):
                    digest.update(name.encode() + b"\0")
    return digest.hexdigest()


def render_key(
    *,
    project: str,
    stack: str,
    config: dict[str, str],
    secret_keys: list[str],
    previous_outputs: dict[str, Any],
) -> str:
    """The digest a render is kept under: everything the program's objects follow from."""
    inputs = {
        "program": program_digest(),
        "project": project,
        "stack": stack,
        "config": config,
        "secretKeys": sorted(secret_keys),
        "previousOutputs": previous_outputs,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def load_render(path: Path, key: str) -> tuple[list[Manifest], dict[str, Any]] | None:
    """The objects and outputs kept under ``key``; None if the kept render is another's, or
    there is none (or it cannot be read)."""
    try:
        kept = json.loads(path.read_text())
        if kept["key"] != key:
            return None
        return list(kept["manifests"]), dict(kept["outputs"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_render(path: Path, key: str, documents: list[Manifest], outputs: dict[str, Any]) -> None:
    """Keep one render (the last), readable by root alone: its Secrets hold values."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"key": key, "manifests": documents, "outputs": outputs}, handle)
    partial.replace(path)
