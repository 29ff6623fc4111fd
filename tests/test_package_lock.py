"""The setup scripts' apt-get (scripts/apt-lock.sh's `apt_get`) waits for a package lock that
another apt or dpkg run holds, says which lock and which process, and fails naming both once its
wait is over; before, `bash scripts/setup.sh` on a machine busy installing failed at once with
"Could not get lock /var/lib/dpkg/lock-frontend" (exit 100).

The locks are taken as apt and dpkg take them: an fcntl write lock on the whole file
(apt-pkg/contrib/fileutl.cc GetLock: F_SETLK, F_WRLCK), here by this test's own process. apt
runs for real, as root, doing nothing: `apt-get install -y` of no package, and `apt-get update`
of no sources into a lists directory of the test's own."""

import fcntl
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELPER = ROOT / "scripts" / "apt-lock.sh"
FRONTEND = Path("/var/lib/dpkg/lock-frontend")
ARCHIVES = Path("/var/cache/apt/archives/lock")
HOLD_SECONDS = 1.0

needs_apt_as_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("apt-get") is None or not FRONTEND.exists(),
    reason=f"takes the real dpkg and apt locks: needs root and a Debian apt (apt-get, {FRONTEND})",
)


@contextmanager
def held(path: Path) -> Iterator[Callable[[], None]]:
    """Hold ``path``'s lock as dpkg and apt do; yields the function that lets go of it
    (letting go at the latest on leaving)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        pytest.skip(f"{path} is held already: another package install is running here")
    try:
        yield lambda: fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)  # closing lets go of the process's locks on the file


def start_apt_get(*args: str, timeout: int = 60) -> subprocess.Popen[str]:
    """``apt_get ARGS`` as the setup scripts run it, its stderr a pipe."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    env["SLURM_STACK_APT_LOCK_TIMEOUT"] = str(timeout)
    return subprocess.Popen(
        ["bash", "-c", f'set -euo pipefail; source "{HELPER}"; apt_get "$@"', "apt_get", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def waits_then_goes_on(lock: Path, *args: str) -> None:
    """With ``lock`` held, ``apt_get ARGS`` says it waits for it (naming this process) and
    still runs HOLD_SECONDS later; let go, it succeeds."""
    with held(lock) as release:
        apt = start_apt_get(*args)
        watchdog = threading.Timer(120, apt.kill)
        watchdog.start()
        try:
            assert apt.stderr is not None
            line = apt.stderr.readline()  # the helper's first word: it waits
            expected = (
                rf"^apt_get: waiting up to \d+ s for the package lock {re.escape(str(lock))}, "
                rf"held by process {os.getpid()} \(.+\)$"
            )
            assert re.match(expected, line), line + apt.stderr.read()
            time.sleep(HOLD_SECONDS)
            assert apt.poll() is None, f"apt_get did not wait: {apt.stderr.read()}"
            release()
            rest = apt.stderr.read()
            assert apt.wait() == 0, rest
        finally:
            watchdog.cancel()
            apt.kill()
            apt.wait()
    assert "E: " not in rest and "waiting" not in rest, rest


@needs_apt_as_root
@pytest.mark.parametrize("lock", [FRONTEND, ARCHIVES], ids=["dpkg-frontend", "apt-archives"])
def test_install_waits_for_the_lock_and_goes_on_once_it_is_released(lock: Path) -> None:
    """dpkg's frontend lock is what apt's DPkg::Lock::Timeout waits for; the archives lock
    (which `apt-get install` takes even with nothing to install) apt does not wait for."""
    waits_then_goes_on(lock, "install", "-y", "-qq", "--no-install-recommends")


@needs_apt_as_root
def test_update_waits_for_the_lists_lock_that_apts_own_timeout_does_not_cover(
    tmp_path: Path,
) -> None:
    """apt 2.6's DPkg::Lock::Timeout does not cover `apt-get update`'s lists lock. No sources
    and no cache files, so the update touches nothing of the machine's."""
    lists = tmp_path / "lists"
    (lists / "partial").mkdir(parents=True)
    (tmp_path / "sources.list.d").mkdir()
    private = [
        f"-oDir::State::Lists={lists}",
        "-oDir::Etc::SourceList=/dev/null",
        f"-oDir::Etc::SourceParts={tmp_path / 'sources.list.d'}",
        "-oDir::Cache::pkgcache=",
        "-oDir::Cache::srcpkgcache=",
    ]
    waits_then_goes_on(lists / "lock", "update", "-qq", *private)


@needs_apt_as_root
def test_past_its_timeout_it_fails_naming_the_lock_and_its_holder() -> None:
    with held(FRONTEND):
        apt = start_apt_get("install", "-y", "-qq", timeout=1)
        try:
            _, stderr = apt.communicate(timeout=60)
        finally:
            apt.kill()
    assert apt.returncode == 100, stderr
    assert (
        f"apt_get: gave up after 1 s waiting for the package lock {FRONTEND}, held by process "
        f"{os.getpid()} (" in stderr
    ), stderr
    assert "SLURM_STACK_APT_LOCK_TIMEOUT" in stderr


def test_the_setup_scripts_run_apt_get_only_through_the_wrapper() -> None:
    """Each script that installs packages sources the helper and calls no bare apt-get."""
    installers = []
    for script in sorted((ROOT / "scripts").glob("*.sh")):
        if script == HELPER:
            continue
        text = script.read_text()
        code = [line.split("#", 1)[0] for line in text.splitlines()]
        bare = [
            line.strip()
            for line in code
            if re.search(r"(^|[;&|(]\s*)(\w+=\S*\s+)*apt-get\b", line.strip())
        ]
        assert not bare, f"{script.name} runs apt-get without waiting for its locks: {bare}"
        if re.search(r"\bapt_get\b", "\n".join(code)):
            installers.append(script.name)
            assert re.search(r"^source .*apt-lock\.sh", text, re.M), script.name
    assert {"setup.sh", "setup-podman.sh"} <= set(installers), installers
