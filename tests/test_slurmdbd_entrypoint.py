"""images/base/entrypoint, role `slurmdbd`: the database password becomes StoragePass only if
slurmdbd.conf can hold it, and is never shown.

Runs the real entrypoint with a fake `munge` and `slurmdbd` first on PATH. The refusals happen
before anything is written; writing /run/slurm/conf needs root and a private mount namespace.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_stack.k8s.accounting import storage_pass_problem

ENTRYPOINT = Path(__file__).resolve().parent.parent / "images" / "base" / "entrypoint"
TEMPLATE = "DbdHost=localhost\nStorageType=accounting_storage/mysql\nStorageUser=slurm\n"

# Bytes a password file may hold; each with whether slurmdbd.conf can hold it. Every bad one
# carries MARK, which the refusal must not show.
MARK = b"Zq7SeCrEt"
GOOD = [b"abcXYZ0189", b"!$%&'()*+,-./:;<=>?@[]^_`{|}~", b"a=b", MARK * 14]
BAD = [
    MARK + b"#tail",  # a comment from '#'
    MARK + b" words",  # the value ends at whitespace
    MARK + b"\there",
    MARK + b"\nline",
    MARK + b"\r",
    MARK + b"\\slash",  # an escape character
    MARK + b"\\",  # a line continuation
    b'"' + MARK + b'"',  # loses its quotes
    MARK + b"\x00byte",
    MARK + b"\x07",
    MARK + b"\x7f",
    MARK + "\u00e9".encode(),
]


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """`munge` that answers, `slurmdbd` that shows the config it was given and its mode."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "munge").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "slurmdbd").write_text(
        '#!/bin/sh\nconf="$(dirname "$SLURM_CONF")/slurmdbd.conf"\n'
        'echo "mode $(stat -c %a "$conf")"\ncat "$conf"\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def run_role(
    tmp_path: Path, fake_bin: Path, password: bytes, *, private_run: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """The role with ``password`` in its Secret file. Without ``private_run`` an `install`
    that fails stops it just before it would write to /run/slurm/conf."""
    (tmp_path / "slurmdbd.conf").write_text(TEMPLATE)
    (tmp_path / "password").write_bytes(password)
    stop = tmp_path / "stop"
    stop.mkdir(exist_ok=True)
    (stop / "install").write_text("#!/bin/sh\necho reached install >&2\nexit 3\n")
    (stop / "install").chmod(0o755)
    path = (
        f"{fake_bin}:{os.environ['PATH']}"
        if private_run
        else f"{stop}:{fake_bin}:{os.environ['PATH']}"
    )
    env = {
        **os.environ,
        "PATH": path,
        "SLURMDBD_CONF_TEMPLATE": str(tmp_path / "slurmdbd.conf"),
        "DB_PASSWORD_FILE": str(tmp_path / "password"),
    }
    command = ["bash", str(ENTRYPOINT), "slurmdbd"]
    if private_run:  # /run/slurm/conf in a tmpfs of this test's own
        script = 'mount -t tmpfs tmpfs /run && exec "$@"'
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
        command += ["bash", str(ENTRYPOINT), "slurmdbd"]
    return subprocess.run(command, env=env, capture_output=True, timeout=60)


@pytest.mark.parametrize("password", BAD, ids=repr)
def test_a_password_slurmdbd_conf_cannot_hold_is_refused_unseen(
    tmp_path: Path, fake_bin: Path, password: bytes
) -> None:
    result = run_role(tmp_path, fake_bin, password)
    assert result.returncode == 1
    assert result.stdout == b""  # slurmdbd never started
    assert b"cannot be written to slurmdbd.conf" in result.stderr
    assert str(tmp_path / "password").encode() in result.stderr  # which file to fix
    assert MARK not in result.stderr, result.stderr  # nor any part of the password
    assert b"reached install" not in result.stderr  # refused before anything is written


def test_an_empty_or_missing_password_is_refused(tmp_path: Path, fake_bin: Path) -> None:
    for password in (b"", b"\n\n"):
        result = run_role(tmp_path, fake_bin, password)
        assert result.returncode == 1 and b"is empty" in result.stderr
    (tmp_path / "bin" / "munge").unlink()
    env = {**os.environ, "SLURMDBD_CONF_TEMPLATE": "/dev/null", "DB_PASSWORD_FILE": "/nonexistent"}
    result = subprocess.run(
        ["bash", str(ENTRYPOINT), "slurmdbd"], env=env, capture_output=True, timeout=60
    )
    assert result.returncode == 1 and b"cannot read the database password file" in result.stderr


@pytest.mark.parametrize("password", GOOD + BAD, ids=repr)
def test_the_entrypoint_and_the_program_agree(
    tmp_path: Path, fake_bin: Path, password: bytes
) -> None:
    """The stack program refuses a configured password by the same rule."""
    stderr = run_role(tmp_path, fake_bin, password).stderr
    refused = b"cannot be written" in stderr
    assert refused != (b"reached install" in stderr)
    text = password.decode("utf-8", errors="surrogateescape")
    assert refused == (storage_pass_problem(text) is not None)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a private /run needs root and unshare(1)",
)
@pytest.mark.parametrize("password", GOOD, ids=repr)
def test_a_good_password_is_written_as_it_is(
    tmp_path: Path, fake_bin: Path, password: bytes
) -> None:
    # A file written with `echo` ends in a newline: dropped, as MariaDB's *_FILE drops it.
    result = run_role(tmp_path, fake_bin, password + b"\n", private_run=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"mode 600\n" + TEMPLATE.encode() + b"StoragePass=" + password + b"\n"
    assert password not in result.stderr
