"""Container jobs on real Slurm (`srun --container-image`): an image from a local registry runs
as the job's user on two nodes, sees the jail's homes, is read-only and unprivileged, is pulled
once per node into the pod's cache (the itest stack's `containers.cache: node`), and a missing
image fails the job with a message naming it. The GPU case and the jail's cache are in
test_gpus.py."""

import shlex
from pathlib import Path

import pytest

from slurm_stack import paths
from tests.cluster.conftest import Cluster, wait_for
from tests.cluster.registry import (
    AUTH_REGISTRY_PORT,
    IMAGE_MARKER,
    TEST_IMAGE,
    build_image,
    push,
    registry_for,
)
from tests.cluster.test_security import TASK_BOUNDING_SET

pytestmark = pytest.mark.usefixtures("image_registry")


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
