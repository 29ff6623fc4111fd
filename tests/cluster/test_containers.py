"""Container jobs on real Slurm (`srun --container-image`): an image from a local registry runs
as the job's user on two nodes, sees the jail's homes, is read-only and unprivileged, is pulled
once per node into the pod's cache (the itest stack's `containers.cache: node`), and a missing
image fails the job with a message naming it. A registry that never answers fails the job at
the pull deadline; a fetch killed midway leaves no entry in the cache, and an unsafe entry is
pulled again. The GPU case and the jail's cache are in test_gpus.py."""

import importlib.machinery
import importlib.util
import re
import secrets
import shlex
import time
from pathlib import Path

import pytest

from slurm_stack import paths
from tests.cluster.conftest import Cluster, wait_for
from tests.cluster.registry import (
    AUTH_REGISTRY_PORT,
    IMAGE_MARKER,
    TEST_IMAGE,
    Stall,
    build_image,
    manifest_digest,
    push,
    registry_for,
    stalled,
)
from tests.cluster.test_security import TASK_BOUNDING_SET

pytestmark = pytest.mark.usefixtures("image_registry")

ROOT = Path(__file__).resolve().parents[2]
CACHE = paths.CONTAINER_CACHE_NODE_DIR
# srun waits this long for a step's tasks to start (slurm_step_launch_wait_start in Slurm's
# src/api/step_launch.c): the image's pull is part of that start.
SRUN_START_SECONDS = 600


def _fetch_program_constant(name: str) -> int:
    """A constant of the worker image's fetch program, images/worker/container-fetch."""
    loader = importlib.machinery.SourceFileLoader(
        "container_fetch", str(ROOT / "images" / "worker" / "container-fetch")
    )
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return int(getattr(module, name))


def _plugin_constant(name: str) -> int:
    header = (ROOT / "chroot_plugin" / "container_image.h").read_text()
    match = re.search(rf"^#define {name} (\d+)$", header, re.MULTILINE)
    assert match, f"{name} is not in chroot_plugin/container_image.h"
    return int(match.group(1))


# The fetch program ends a pull that is not done by then, with a message (DEADLINE_SECONDS);
# the plugin kills it, with skopeo and umoci, at CONTAINER_FETCH_TIMEOUT.
PULL_DEADLINE = _fetch_program_constant("DEADLINE_SECONDS")
FETCH_KILLED_AT = _plugin_constant("CONTAINER_FETCH_TIMEOUT")


def image(name: str = TEST_IMAGE) -> str:
    return f"{registry_for('itest')}/{name}"


def sacct_state(cluster: Cluster, job: str) -> str:
    def record() -> str:
        out = cluster.ctl(f"sacct -n -X -P -j {job} -o State").stdout.strip()
        return out if out and out not in ("RUNNING", "PENDING") else ""

    return wait_for(f"job {job} in sacct", record, timeout=60)


def test_a_container_job_runs_on_two_nodes_as_the_user(cluster: Cluster) -> None:
    script = (
        'echo "$(hostname) $(id -u):$(id -g) $(id -un) $(cat /etc/image-marker)"; '
        'echo "from $(hostname)" > "$HOME/container-$SLURM_PROCID"'
    )
    out = cluster.ok(
        cluster.login(
            f"rm -f ~/container-*; srun -N2 --ntasks-per-node=1 -p main "
            f"--container-image={image()} sh -c {shlex.quote(script)}; "
            "echo; id -u; id -g; cat ~/container-0 ~/container-1"
        )
    )
    task_lines, _, login_lines = out.partition("\n\n")
    uid, gid, *written = login_lines.split("\n")
    lines = sorted(task_lines.splitlines())
    assert len(lines) == 2, out
    hosts = {line.split()[0] for line in lines}
    assert len(hosts) == 2, out  # one container per node
    for line in lines:
        assert line.split(" ", 1)[1] == f"{uid}:{gid} sandbox {IMAGE_MARKER}", out
    # What each container wrote to $HOME is in the user's home on the login node.
    assert sorted(w.split()[1] for w in written if w) == sorted(hosts), out


def test_the_image_is_read_only_and_gives_no_privilege(cluster: Cluster) -> None:
    script = (
        "touch /etc/new 2>&1; mount | grep ' / '; "
        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; touch /tmp/ok && echo tmp-writable"
    )
    out = cluster.ok(
        cluster.login(f"srun -p main --container-image={image()} sh -c {shlex.quote(script)}")
    )
    assert "Read-only file system" in out, out
    root_mount = next(line for line in out.splitlines() if " on / " in line)
    for flag in ("ro", "nosuid", "nodev"):
        assert flag in root_mount.split("(")[1].rstrip(")").split(","), root_mount
    assert "CapEff:\t0000000000000000" in out, out
    assert "NoNewPrivs:\t1" in out, out
    assert "tmp-writable" in out, out
    # The pool's submounts (cpu: /scratch, /opt/site) and the jail's (/datasets) come along.
    mounted = cluster.ok(
        cluster.login(
            f"srun -p main -w itest-cpu-0 --container-image={image()} "
            "sh -c 'ls -d /scratch /opt/site /datasets'"
        )
    )
    assert mounted.split() == ["/datasets", "/opt/site", "/scratch"], mounted


def test_root_in_a_container_has_the_jails_limits_and_setuid_raises_nobody(
    cluster: Cluster,
) -> None:
    script = (
        "id -u; grep CapBnd /proc/self/status; mount -t proc proc /tmp 2>&1 || echo no-mount; "
        "touch /bin/new 2>&1"
    )
    out = cluster.sandbox.exec(
        "itest-login-0",
        ["sh", "-c", f"srun -p main --container-image={image()} sh -c {shlex.quote(script)} 2>&1"],
    ).stdout
    lines = out.splitlines()
    assert "0" in lines and f"CapBnd:\t{TASK_BOUNDING_SET}" in lines, out
    assert "no-mount" in lines and "permission denied" in out.lower(), out
    assert "touch: /bin/new: Read-only file system" in lines, out
    # As a user, the image's setuid-root busybox runs as the user (nosuid, no_new_privs).
    uid = cluster.ok(cluster.login("id -u")).strip()
    assert (
        cluster.ok(
            cluster.login(f"srun -p main --container-image={image()} /opt/suid/busybox id -u")
        ).strip()
        == uid
    )


def test_a_tag_that_moves_to_another_image_is_pulled_anew(cluster: Cluster, tmp_path: Path) -> None:
    moving = image("test/moving:1")
    run = f"srun -p main -w itest-cpu-0 --container-image={moving} cat /etc/image-marker"
    push(build_image(tmp_path / "first", "first build"), "test/moving:1")
    assert cluster.ok(cluster.login(run)).strip() == "first build"
    push(build_image(tmp_path / "second", "second build"), "test/moving:1")
    assert cluster.ok(cluster.login(run)).strip() == "second build"


def test_registries_not_listed_as_insecure_are_reached_over_https(cluster: Cluster) -> None:
    # An address the itest stack does not list in containers.insecureRegistries: whatever
    # answers there (or nothing), the pull speaks HTTPS to it.
    registry = registry_for("gpus")
    run = cluster.login(f"srun -p main --container-image={registry}/{TEST_IMAGE} true")
    assert run.returncode != 0
    assert f'Get "https://{registry}/v2/"' in run.stderr, run.stderr
    # A listed one is asked over plain HTTP (the open registry's log would show it too).
    assert cluster.ok(cluster.login(f"srun -p main --container-image={image()} true")) == ""


def test_an_image_is_pulled_once_per_node_into_a_root_only_cache(cluster: Cluster) -> None:
    node, run = "itest-cpu-0", f"srun -p main -w itest-cpu-0 --container-image={image()} true"
    cache = paths.CONTAINER_CACHE_NODE_DIR
    cluster.ok(cluster.login(run))
    assert cluster.ok(cluster.node(node, f"stat -c '%a %u' {cache}")).strip() == "700 0"
    listing = f"ls -i {cache} | grep sha256-"
    before = cluster.ok(cluster.node(node, listing))
    cluster.ok(cluster.login(run))
    assert cluster.ok(cluster.node(node, listing)) == before  # the same copy, not a new one
    # The image's setuid-root busybox is kept without its setuid bit.
    mode = cluster.node(node, f"stat -c '%a %u' {cache}/sha256-*/rootfs/opt/suid/busybox")
    assert set(cluster.ok(mode).split("\n")) - {""} == {"755 0"}, mode  # every image in it
    # The cache is the pod's, not the jail's: a login session has no such directory.
    missing = cluster.login(f"ls {cache}")
    assert missing.returncode != 0 and "No such file" in missing.stderr, missing


def test_only_the_tasks_enter_the_image_slurmstepd_stays_in_the_jail(cluster: Cluster) -> None:
    # slurmstepd runs as root: what it opens by path later (plugins, name service modules)
    # must come from the jail, never from an image a user chose. (That the tasks see the
    # image, the other tests show.)
    node = "itest-cpu-1"
    job = cluster.ok(
        cluster.login(
            f"sbatch --parsable -w {node} -o /dev/null --container-image={image()} "
            "--wrap 'sleep 60'"
        )
    ).strip()
    try:
        wait_for("the job running", lambda: cluster.job_state(job) == "RUNNING")
        stepd = f"$(pgrep -f 'slurmstepd: .{job}.batch.' | head -1)"
        probe = (
            f'pid={stepd}; test -n "$pid" || exit 1; '
            "test -e /proc/$pid/root/etc/image-marker && echo image; "
            "test -e /proc/$pid/root/.slurm-stack-populated && echo jail; true"
        )
        root = wait_for("slurmstepd's root", lambda: cluster.node(node, probe).stdout.split())
        assert root == ["jail"], root
    finally:
        cluster.login(f"scancel {job}")


def test_a_batch_job_runs_its_script_in_the_image(cluster: Cluster) -> None:
    job = cluster.ok(
        cluster.login(
            f"sbatch --parsable -p main -o container-batch.out --container-image={image()} "
            "--wrap 'cat /etc/image-marker; id -un; pwd'"
        )
    ).strip()
    assert sacct_state(cluster, job) == "COMPLETED"
    home = cluster.ok(cluster.login("pwd")).strip()
    # Its output file is opened in the image's view, where /home is the jail's.
    assert cluster.ok(cluster.login("cat container-batch.out")).splitlines() == [
        IMAGE_MARKER,
        "sandbox",
        home,
    ]


def test_a_missing_image_fails_the_job_naming_it(cluster: Cluster) -> None:
    missing = image("test/missing:1")
    run = cluster.login(f"srun -p main --container-image={missing} true; echo rc=$?")
    assert "rc=0" not in run.stdout, run
    assert f"container image '{missing}': cannot pull image" in run.stderr, run
    assert "manifest unknown" in run.stderr, run
    job = cluster.ok(
        cluster.login(f"sbatch --parsable -p main --container-image={missing} --wrap true")
    ).strip()
    assert sacct_state(cluster, job) == "FAILED"


def test_a_registry_that_wants_credentials_the_cluster_lacks_says_so(cluster: Cluster) -> None:
    # The itest stack has no containerRegistryAuth (test_gpus.py sets and removes some).
    locked = f"{registry_for('itest', AUTH_REGISTRY_PORT)}/{TEST_IMAGE}"
    run = cluster.login(f"srun -p main --container-image={locked} true")
    assert run.returncode != 0
    assert f"container image '{locked}': cannot pull image" in run.stderr, run.stderr
    assert "authentication required" in run.stderr, run.stderr


def test_a_malformed_reference_is_refused_by_srun(cluster: Cluster) -> None:
    run = cluster.login("srun -p main --container-image=--authfile=/etc/shadow true")
    assert run.returncode != 0
    assert "is not an image reference" in run.stderr, run


def test_a_malformed_reference_is_refused_by_sbatch_too(cluster: Cluster) -> None:
    # As an option and as a directive in the script, refused before anything is submitted,
    # with srun's words.
    malformed = "--authfile=/etc/shadow"
    refusal = f"error: --container-image: '{malformed}' is not an image reference"
    by_srun = cluster.login(f"srun -p main --container-image={malformed} true")
    assert by_srun.returncode != 0 and f"srun: {refusal}" in by_srun.stderr, by_srun
    name = f"malformed-ref-{secrets.token_hex(4)}"
    script = f"#!/bin/sh\n#SBATCH --container-image={malformed}\ntrue\n"
    for submit in (
        f"sbatch -J {name} -p main --container-image={malformed} --wrap true",
        f"printf {shlex.quote(script)} | sbatch -J {name} -p main",
    ):
        run = cluster.login(submit)
        assert run.returncode != 0, run
        assert f"sbatch: {refusal}" in run.stderr, run
        assert "Submitted" not in run.stdout, run
    submitted = cluster.ok(cluster.ctl(f"sacct -n -X -P -a --name={name} -S now-1hour -o JobID"))
    assert submitted.strip() == "", submitted


def _cache_entry(cluster: Cluster, node: str, name: str) -> str:
    """`file type, owner, mode` of ``name`` in the node's cache, or `missing`."""
    probe = f"stat -c '%F %u %a' {CACHE}/{name} 2>/dev/null || echo missing"
    return cluster.ok(cluster.node(node, probe)).strip()


def _temporaries(cluster: Cluster, node: str) -> set[str]:
    """The fetch program's temporary directories in the node's cache."""
    listing = cluster.ok(cluster.node(node, f"ls -A {CACHE}"))
    return {name for name in listing.split() if name.startswith(".fetch-")}


# Where the worker image installs the fetch program (images/worker/Containerfile).
FETCH_PROGRAM = "/usr/lib/slurm-stack/container-fetch"
# The deadline of the fetch program's copy that the deadline test runs: the real one would
# hold the suite for nine minutes.
SHORT_DEADLINE = 20


def test_a_registry_that_never_answers_fails_the_fetch_at_its_deadline(cluster: Cluster) -> None:
    """The registry takes the connection and the request for the manifest and never answers:
    the fetch program gives up at its deadline and says why, in the last line the plugin
    shows the job. It runs here as the plugin runs it (root in the slurmd container, the
    node's cache, the registry plain HTTP), from a copy whose deadline is 20 s instead of
    540 s; the real deadline ends the pull, with its message, before the plugin kills the
    program and before srun stops waiting for the step."""
    assert PULL_DEADLINE < FETCH_KILLED_AT < SRUN_START_SECONDS
    node, ref = "itest-cpu-0", image("test/stalled:1")
    copy = f"/tmp/container-fetch-{secrets.token_hex(4)}"
    shorten = f"s/^DEADLINE_SECONDS = {PULL_DEADLINE}$/DEADLINE_SECONDS = {SHORT_DEADLINE}/"
    cluster.ok(cluster.node(node, f"sed '{shorten}' {FETCH_PROGRAM} > {copy} && chmod 700 {copy}"))
    assert f"DEADLINE_SECONDS = {SHORT_DEADLINE}" in cluster.ok(cluster.node(node, f"cat {copy}"))
    before = _temporaries(cluster, node)
    fetch = f"{copy} --cache {CACHE} --insecure {registry_for('itest')} -- {ref}"
    try:
        with stalled("test/stalled") as stall:
            started = time.monotonic()
            ran = cluster.node(node, fetch)
            took = time.monotonic() - started
            assert any("/manifests/" in request for request in stall.held), stall.held
    finally:
        cluster.node(node, f"rm -f {copy}")
    assert ran.returncode == 1, ran
    last = ran.stdout.strip().splitlines()[-1]
    assert last.startswith(f"cannot pull image '{ref}' in {SHORT_DEADLINE} s"), ran.stdout
    assert SHORT_DEADLINE <= took < SHORT_DEADLINE + 10, took
    assert _temporaries(cluster, node) == before  # nothing left in the cache


def _fresh_image(
    cluster: Cluster, tmp_path: Path, node: str, name: str, marker: str
) -> tuple[str, str]:
    """A test's own image ``name`` (its marker file says ``marker``) pushed, and not in
    ``node``'s cache: its reference and its cache entry's name."""
    push(build_image(tmp_path / "image", marker), name)
    entry = f"sha256-{manifest_digest(name)}"
    cluster.ok(cluster.node(node, f"rm -rf {CACHE}/{entry}"))
    return image(name), entry


def _batch_job_pulling(cluster: Cluster, stall: Stall, node: str, ref: str, output: str) -> str:
    """A batch job of image ``ref`` on ``node``, once its pull waits on the stalled layers."""
    job = cluster.ok(
        cluster.login(
            f"sbatch --parsable -p main -w {node} -o {output} "
            f"--container-image={ref} --wrap 'cat /etc/image-marker'"
        )
    ).strip()
    wait_for("the pull asking for the image's layers", lambda: stall.held, timeout=120)
    return job


def test_a_fetch_killed_midway_leaves_no_entry_and_the_next_job_pulls_the_image(
    cluster: Cluster, tmp_path: Path
) -> None:
    node, name, marker = "itest-cpu-1", "test/killed-fetch:1", "pulled after a killed fetch"
    ref, entry = _fresh_image(cluster, tmp_path, node, name, marker)
    output = f"killed-fetch-{secrets.token_hex(4)}.out"
    before = _temporaries(cluster, node)
    try:
        with stalled("test/killed-fetch", blobs_only=True) as stall:
            job = _batch_job_pulling(cluster, stall, node, ref, output)
            # Killed as the OOM killer or a crash kills it: nothing of it runs after.
            fetch = f"pgrep -o -f 'container-fetch .*-- {ref}$'"
            cluster.ok(cluster.node(node, f'pid=$({fetch}) && pkill -KILL -g "$pid"'))
            assert sacct_state(cluster, job) == "FAILED"
        assert f"container image '{ref}'" in cluster.ok(cluster.login(f"cat {output}"))
        # (No pattern matches its own shell's command line.)
        assert cluster.node(node, "pgrep -f '[c]ontainer-fetch|[s]kopeo|[u]moci'").stdout == ""
        # Its unpacked files never became the image's entry: only a temporary directory is
        # left, which the next fetches leave alone (it could be another step's pull).
        assert _cache_entry(cluster, node, entry) == "missing"
        left = _temporaries(cluster, node) - before
        assert len(left) == 1, left
        # The next job of the image pulls it whole and runs.
        run = f"srun -p main -w {node} --container-image={ref} cat /etc/image-marker"
        assert cluster.ok(cluster.login(run)).strip() == marker
        assert _cache_entry(cluster, node, entry) == "directory 0 700"
        assert _cache_entry(cluster, node, f"{entry}/rootfs") == "directory 0 755"
        assert left <= _temporaries(cluster, node)
        # Once older than two deadlines it can be no pull in progress: a fetch removes it.
        (temporary,) = left
        aged = f"@{int(time.time()) - 2 * PULL_DEADLINE - 60}"
        cluster.ok(cluster.node(node, f"touch -d {aged} {CACHE}/{temporary}"))
        assert cluster.ok(cluster.login(run)).strip() == marker
        assert not left & _temporaries(cluster, node)
    finally:
        cluster.login(f"rm -f {output}")
        removed = (entry, *(_temporaries(cluster, node) - before))
        cluster.ok(cluster.node(node, "rm -rf " + " ".join(f"{CACHE}/{n}" for n in removed)))


def test_a_job_cancelled_while_its_image_is_pulled_leaves_no_entry_behind(
    cluster: Cluster, tmp_path: Path
) -> None:
    node, name, marker = "itest-cpu-0", "test/cancelled-pull:1", "pulled after a cancelled job"
    ref, entry = _fresh_image(cluster, tmp_path, node, name, marker)
    before = _temporaries(cluster, node)
    fetching = f"pgrep -f '[c]ontainer-fetch .*-- {ref}$'"
    try:
        with stalled("test/cancelled-pull", blobs_only=True) as stall:
            job = _batch_job_pulling(cluster, stall, node, ref, "/dev/null")
            cluster.ok(cluster.login(f"scancel {job}"))
            assert sacct_state(cluster, job).startswith("CANCELLED")
            # The cancel does not end the pull (slurmstepd waits for the fetch program); the
            # registry refusing the layers does, and the pull removes what it had fetched.
            stall.refuse()
            wait_for("the pull's end", lambda: cluster.node(node, fetching).stdout == "")
        assert _cache_entry(cluster, node, entry) == "missing"
        assert _temporaries(cluster, node) == before
        run = f"srun -p main -w {node} --container-image={ref} cat /etc/image-marker"
        assert cluster.ok(cluster.login(run)).strip() == marker
        assert _cache_entry(cluster, node, entry) == "directory 0 700"
        assert _cache_entry(cluster, node, f"{entry}/rootfs") == "directory 0 755"
    finally:
        removed = (entry, *(_temporaries(cluster, node) - before))
        cluster.ok(cluster.node(node, "rm -rf " + " ".join(f"{CACHE}/{n}" for n in removed)))


UNSAFE_ENTRIES = {
    # What a user could have made, or changed, of an entry: each with a planted marker.
    "owned-by-a-user": "chown -R 2000:2000 {entry}",
    "writable-by-others": "chmod 0777 {entry}/rootfs",
    "a-symlink": "mv {entry} {planted} && ln -s {planted} {entry}",
}


@pytest.mark.parametrize("unsafe", sorted(UNSAFE_ENTRIES))
def test_an_unsafe_cache_entry_is_removed_and_pulled_again(
    cluster: Cluster, tmp_path: Path, unsafe: str
) -> None:
    node, name, marker = "itest-cpu-0", "test/unsafe-entry:1", "pulled anew over an unsafe entry"
    ref = image(name)
    push(build_image(tmp_path / "image", marker), name)
    entry = f"{CACHE}/sha256-{manifest_digest(name)}"
    planted = f"/var/tmp/planted-{secrets.token_hex(4)}"  # where a symlink leads
    run = f"srun -p main -w {node} --container-image={ref} cat /etc/image-marker"
    tamper = UNSAFE_ENTRIES[unsafe].format(entry=entry, planted=planted)
    try:
        assert cluster.ok(cluster.login(run)).strip() == marker  # pulled, or already there
        cluster.ok(cluster.node(node, f"echo planted > {entry}/rootfs/etc/image-marker"))
        cluster.ok(cluster.node(node, tamper))
        # The next job gets the image as the registry has it (not the planted marker), in a
        # new entry of root's.
        assert cluster.ok(cluster.login(run)).strip() == marker
        safe = cluster.ok(cluster.node(node, f"stat -c '%F %u %a' {entry} {entry}/rootfs"))
        assert safe.splitlines() == ["directory 0 700", "directory 0 755"], safe
        if unsafe == "a-symlink":  # the link was removed, not what it led to
            kept = cluster.node(node, f"cat {planted}/rootfs/etc/image-marker")
            assert cluster.ok(kept).strip() == "planted"
    finally:
        cluster.ok(cluster.node(node, f"rm -rf {entry} {planted}"))
