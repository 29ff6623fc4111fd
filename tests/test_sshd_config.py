"""The login pods' sshd_config as the login image's sshd reads it.

Without podman: the committed keyword list (slurm_stack/spec/data/sshd-<version>.json) covers
every keyword slurm-stack writes and every one it refuses in login.sshdExtra. With podman and
the local login image (images/build.sh): `sshd -t` accepts what we render, sshdExtra lines
included, root's session stays root's whatever those lines say, and the committed list is the
one scripts/sshd_keywords.py reads from that image today. Those skip, saying why, where
podman or the image is missing.
"""

import copy
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_stack import paths
from slurm_stack.render import login_config_files
from slurm_stack.sandbox.images import CACHE_DIR
from slurm_stack.spec import load_spec
from slurm_stack.spec.sshd import (
    DATA_DIR,
    OWNED_SSHD_KEYWORDS,
    REFUSED_SSHD_KEYWORDS,
    keyword_data,
    keyword_versions,
)
from slurm_stack.spec.versions import SUPPORTED_VERSIONS
from tests.conftest import DEV_STACK, ROOT

# Lines the spec takes and sshd accepts, some of them unusual: lower case, a default replaced,
# patterns, a quoted value, a Match-only keyword's global form.
VALID_EXTRA = [
    "MaxSessions 20",
    "x11forwarding yes",
    "AllowTcpForwarding local",
    "ClientAliveInterval 60",
    "ClientAliveCountMax 2",
    "AcceptEnv LANG LC_* COLORTERM",
    "Ciphers aes256-gcm@openssh.com,chacha20-poly1305@openssh.com",
    "LogLevel VERBOSE",
    "PerSourcePenalties authfail:30s noauth:5s",
    "ChannelTimeout session=8h",
    "Banner /etc/issue.net",
    'VersionAddendum "slurm login"',
    "PermitUserRC no",
]


def dev_raw(slurm_version: str) -> dict[str, Any]:
    raw = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    return {**copy.deepcopy(raw), "slurmVersion": slurm_version}


def rendered(slurm_version: str, extra: list[str]) -> tuple[str, str]:
    """The login image and the sshd_config of the dev stack with ``extra`` as sshdExtra."""
    raw = dev_raw(slurm_version)
    raw["login"]["sshdExtra"] = extra
    spec = load_spec(raw)
    return spec.image("login"), login_config_files(spec)["sshd_config"]


def login_image(slurm_version: str) -> str:
    """The dev stack's login image for ``slurm_version``; skips without podman or it."""
    image = load_spec(dev_raw(slurm_version)).image("login")
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: sshd runs in the login image")
    exists = subprocess.run(["podman", "image", "exists", image], check=False)
    if exists.returncode != 0:
        pytest.skip(f"{image} is not built here (images/build.sh)")
    return image


def run_sshd(
    image: str, sshd_config: str, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess:
    """`sshd -t` on ``sshd_config`` in ``image`` (host keys made where it looks for them), then
    `sshd <args>` when given."""
    (tmp_path / "sshd_config").write_text(sshd_config)
    keys = tmp_path / "host-keys"
    keys.mkdir(exist_ok=True)
    script = (
        "set -e; mkdir -p /run/sshd; "
        "for t in ed25519 ecdsa rsa; do f=$KEYS/ssh_host_${t}_key; "
        '[ -f "$f" ] || ssh-keygen -q -N "" -t "$t" -f "$f"; done; '
        'sshd -t -f "$CONFIG"; [ $# -eq 0 ] || sshd -f "$CONFIG" "$@"'
    )
    return subprocess.run(
        [
            *("podman", "run", "--rm", "--network=none", "--entrypoint", "sh"),
            *("-v", f"{tmp_path}:{tmp_path}:ro", "-v", f"{keys}:{paths.SSH_HOST_KEY_DIR}"),
            *("-e", f"KEYS={paths.SSH_HOST_KEY_DIR}", "-e", f"CONFIG={tmp_path}/sshd_config"),
            *(image, "-c", script, "sshd-test", *args),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _settings(dump: str) -> dict[str, str]:
    pairs = (line.split(" ", 1) for line in dump.splitlines() if " " in line)
    return {key.lower(): value for key, value in pairs}


# --------------------------------------------------------------------------- the committed list


def test_every_keyword_slurm_stack_writes_is_one_the_image_knows():
    _, text = rendered("26.05", [])
    written = {line.split()[0].lower() for line in text.splitlines() if line and line[0] != "#"}
    for version in keyword_versions():
        known = {name.lower() for name in keyword_data(version)["keywords"]}
        assert written - known == set(), version


def test_every_refused_keyword_is_one_sshd_has():
    """No typo among the refused: each is a keyword of some image (GSSAPI ones only where
    Debian builds them in: trixie's, not forky's)."""
    everywhere = set()
    for version in keyword_versions():
        data = keyword_data(version)
        names = {n.lower() for kind in ("keywords", "unsupported") for n in data[kind]}
        assert set(OWNED_SSHD_KEYWORDS) - names == set(), version
        everywhere |= names
        # Old names resolve to a keyword of the list, so the spec checks them as that keyword.
        assert {t.lower() for t in data["aliases"].values()} <= names, version
    assert set(REFUSED_SSHD_KEYWORDS) - everywhere == set()


def test_the_list_names_its_source():
    for version in keyword_versions():
        data = json.loads((DATA_DIR / f"sshd-{version}.json").read_text())
        assert data["slurm_version"] == version
        assert data["openssh"].startswith("OpenSSH_")
        assert "/login" in data["image"]


# --------------------------------------------------------------------------- sshd in the image


@pytest.mark.parametrize("slurm_version", SUPPORTED_VERSIONS)
def test_sshd_accepts_the_rendered_config_with_extra_lines(slurm_version, tmp_path):
    image = login_image(slurm_version)
    for extra in ([], VALID_EXTRA):
        _, text = rendered(slurm_version, extra)
        run = run_sshd(image, text, tmp_path)
        assert run.returncode == 0, f"sshdExtra {extra}:\n{run.stderr}"


@pytest.mark.parametrize("slurm_version", SUPPORTED_VERSIONS)
def test_extra_lines_leave_root_in_its_session_and_keys_to_slurm_stack(slurm_version, tmp_path):
    image = login_image(slurm_version)
    _, text = rendered(slurm_version, [*VALID_EXTRA, "ForceCommand /usr/bin/true"])
    connection = "-C", "user={},host=client.example,addr=192.0.2.10"
    root = run_sshd(image, text, tmp_path, "-T", connection[0], connection[1].format("root"))
    assert root.returncode == 0, root.stderr
    settings = _settings(root.stdout)
    # A global ForceCommand is alice's; root's Match block, after every extra line, wins.
    assert settings["forcecommand"] == f"{paths.ROOT_SESSION} {paths.JAIL_DIR}"
    # sshd does not chroot root: root-session does, after dropping SYS_CHROOT.
    assert settings["chrootdirectory"] == "none"
    assert settings["authorizedkeyscommand"] == f"{paths.AUTHORIZED_KEYS_COMMAND} %u"
    alice = run_sshd(image, text, tmp_path, "-T", connection[0], connection[1].format("alice"))
    assert _settings(alice.stdout)["forcecommand"] == "/usr/bin/true"
    assert _settings(alice.stdout)["chrootdirectory"] == paths.JAIL_DIR
    assert _settings(alice.stdout)["x11forwarding"] == "yes"


def test_sshd_checks_the_values_the_spec_passes_through(tmp_path):
    """The spec checks the values of the keywords in its table (spec/sshd.py); any other
    keyword's value is sshd's to judge, and sshd -t names the line."""
    image = login_image("26.05")
    _, text = rendered("26.05", ["Ciphers lots"])
    run = run_sshd(image, text, tmp_path)
    assert run.returncode != 0
    assert "Bad SSH2 cipher spec 'lots'" in run.stderr


@pytest.mark.parametrize("slurm_version", SUPPORTED_VERSIONS)
def test_committed_keyword_list_is_the_images(slurm_version):
    image = login_image(slurm_version)
    if slurm_version not in keyword_versions():
        pytest.skip(
            f"no keyword list for {slurm_version} (the spec uses {keyword_versions()[-1]}'s): "
            f"run scripts/sshd_keywords.py {slurm_version}"
        )
    spec = importlib.util.spec_from_file_location(
        "sshd_keywords", ROOT / "scripts" / "sshd_keywords.py"
    )
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = keyword_data(slurm_version)
    found = script.keywords(image, cache=CACHE_DIR / "sshd-keywords")
    assert {"slurm_version": slurm_version, **found} == committed, (
        f"the login image's OpenSSH changed: run scripts/sshd_keywords.py {slurm_version}"
    )
