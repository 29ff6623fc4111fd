"""images/ops/sync-users against a jail's account files, with the real shadow-utils.

The jail here is a directory with account files copied from this machine; Slurm associations
are exercised on the real cluster (tests/cluster/test_users.py).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SYNC_USERS = Path(__file__).resolve().parents[1] / "images" / "ops" / "sync-users"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="sync-users edits account files with useradd --prefix, which needs root",
)


def user(name: str, uid: int, index: int, groups: tuple[tuple[str, int], ...] = ()) -> dict:
    return {
        "name": name,
        "uid": uid,
        "gid": uid,
        "groups": [{"name": g, "gid": gid} for g, gid in groups],
        "shell": "/bin/bash",
        "home": f"/home/{name}",
        "account": "t",
        "defaultQos": None,
        "configKey": f"slurm-stack:cluster.login.users[{index}]",
    }


@pytest.fixture
def jail(tmp_path: Path) -> Path:
    root = tmp_path / "jail"
    (root / "etc").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "bash").touch()
    for name in ("passwd", "group", "shadow", "gshadow"):
        shutil.copy2(f"/etc/{name}", root / "etc" / name)
    (root / "etc" / "skel").mkdir()
    (root / "etc" / "skel" / ".bashrc").write_text("# skel\n")
    return root


def sync(jail: Path, users: list[dict]) -> subprocess.CompletedProcess[str]:
    document = {"cluster": "t", "accounting": False, "slurmUser": "slurm", "users": users}
    path = jail.parent / "users.json"
    path.write_text(json.dumps(document))
    return subprocess.run(
        [str(SYNC_USERS), "--jail", str(jail), "--users", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def entry(jail: Path, database: str, name: str) -> list[str]:
    for line in (jail / "etc" / database).read_text().splitlines():
        if line.split(":")[0] == name:
            return line.split(":")
    return []


def snapshot(jail: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(jail)): p.read_bytes()
        for p in sorted(jail.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


ALICE = user("alice", 30001, 0, (("ml", 40000),))
BOB = user("bob", 30002, 1)


def test_declared_users_become_accounts_with_homes(jail: Path) -> None:
    result = sync(jail, [ALICE, BOB])
    assert result.returncode == 0, result.stderr
    assert entry(jail, "passwd", "alice")[2:] == ["30001", "30001", "", "/home/alice", "/bin/bash"]
    assert entry(jail, "group", "alice")[2] == "30001"
    assert entry(jail, "group", "ml")[2:] == ["40000", "alice"]
    assert entry(jail, "shadow", "alice")[1] == "*"  # no password, and not locked
    home = jail / "home" / "alice"
    assert (home.stat().st_uid, home.stat().st_gid, home.stat().st_mode & 0o777) == (
        30001,
        30001,
        0o700,
    )
    assert (home / ".bashrc").read_text() == "# skel\n"
    assert (home / ".bashrc").stat().st_uid == 30001


def test_a_second_run_changes_nothing(jail: Path) -> None:
    assert sync(jail, [ALICE, BOB]).returncode == 0
    before = snapshot(jail)
    again = sync(jail, [BOB, ALICE])  # reordered: same accounts
    assert again.returncode == 0 and "nothing to change" in again.stderr
    assert snapshot(jail) == before


def test_homes_are_created_once_and_never_overwritten(jail: Path) -> None:
    assert sync(jail, [ALICE]).returncode == 0
    home = jail / "home" / "alice"
    (home / ".bashrc").write_text("# mine\n")
    (home / "data").write_text("results\n")
    assert sync(jail, [ALICE]).returncode == 0
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert (home / "data").read_text() == "results\n"


def test_a_removed_user_is_locked_and_keeps_the_home(jail: Path) -> None:
    assert sync(jail, [ALICE, BOB]).returncode == 0
    (jail / "home" / "bob" / "work").write_text("keep me\n")
    result = sync(jail, [ALICE])
    assert result.returncode == 0 and "locked bob" in result.stderr
    shadow = entry(jail, "shadow", "bob")
    assert shadow[1].startswith("!") and shadow[7] == "1"  # locked and expired
    assert (jail / "home" / "bob" / "work").read_text() == "keep me\n"
    assert entry(jail, "passwd", "bob")[2] == "30002"  # the uid stays: its files carry it
    back = sync(jail, [ALICE, BOB])
    assert back.returncode == 0
    assert entry(jail, "shadow", "bob")[1] == "*" and entry(jail, "shadow", "bob")[7] == ""


def test_declared_groups_are_exact(jail: Path) -> None:
    assert sync(jail, [ALICE]).returncode == 0
    moved = user("alice", 30001, 0, (("vision", 40001),))
    assert sync(jail, [moved]).returncode == 0
    assert entry(jail, "group", "vision")[3] == "alice"
    assert entry(jail, "group", "ml")[3] == ""  # the group stays, without alice


def test_collisions_with_hand_made_accounts_change_nothing(jail: Path) -> None:
    subprocess.run(
        ["useradd", "--prefix", str(jail), "--uid", "30005", "--no-create-home", "carol"],
        check=True,
        capture_output=True,
    )
    before = snapshot(jail)
    result = sync(jail, [ALICE, user("carol", 30010, 1), user("dave", 30005, 2)])
    assert result.returncode == 1
    assert "slurm-stack:cluster.login.users[1].name: 'carol' already exists in the jail" in (
        result.stderr
    )
    assert "slurm-stack:cluster.login.users[2].uid: uid 30005 already belongs to 'carol'" in (
        result.stderr
    )
    assert snapshot(jail) == before  # alice was valid, yet nothing was applied
    assert not (jail / "home" / "alice").exists()


def test_a_uid_cannot_change_and_a_missing_shell_is_named(jail: Path) -> None:
    assert sync(jail, [ALICE]).returncode == 0
    changed = {**user("alice", 30009, 0), "shell": "/bin/zsh"}
    result = sync(jail, [changed])
    assert result.returncode == 1
    assert "users[0].uid: 'alice' has uid 30001 in the jail; a uid cannot change" in result.stderr
    assert "users[0].shell: /bin/zsh is not in the jail" in result.stderr


def test_a_group_the_jail_already_has_is_used_as_it_is(jail: Path) -> None:
    gid = entry(jail, "group", "users")[2]  # a system group of the jail image
    assert sync(jail, [user("alice", 30001, 0, (("users", 40999),))]).returncode == 0
    assert entry(jail, "group", "users")[2] == gid  # not recreated with the declared gid
    assert "alice" in entry(jail, "group", "users")[3].split(",")
