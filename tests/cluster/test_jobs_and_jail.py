"""Jobs, logins and the jail on the real cluster."""

import os
import re
import subprocess

from slurm_stack.sandbox.stack import SANDBOX_UID
from tests.cluster.conftest import Cluster, wait_for

MARKER = "/.slurm-stack-populated"


def test_every_worker_registers_idle_with_its_pool_as_feature(cluster: Cluster) -> None:
    wait_for("every worker idle", lambda: cluster.all_idle(4), timeout=60)
    out = cluster.ok(cluster.ctl("sinfo -N -h -o '%N %t %f %P'"))
    rows = sorted(line.split() for line in out.splitlines())
    nodes = {row[0]: row for row in rows}
    assert set(nodes) == {"itest-cpu-0", "itest-cpu-1", "itest-gpu-0", "itest-gpu-1"}
    assert all(row[1] == "idle" for row in rows)
    assert {row[2] for row in rows if row[0].startswith("itest-cpu")} == {"cpu"}
    assert {row[2] for row in rows if row[0].startswith("itest-gpu")} == {"gpu"}
    partitions = cluster.ok(cluster.ctl("scontrol show partition -o"))
    main = next(line for line in partitions.splitlines() if "PartitionName=main" in line)
    gpu = next(line for line in partitions.splitlines() if "PartitionName=gpu" in line)
    # NodeSets by feature: the partitions hold exactly their pools' nodes.
    assert "TotalNodes=4" in main and "Default=YES" in main
    assert "TotalNodes=2" in gpu and "Default=NO" in gpu
    assert "itest-gpu-[0-1]" in gpu and "itest-cpu" not in gpu
    gres = cluster.node_field("itest-gpu-0", "Gres")
    assert gres.startswith("gpu:h100:2")


def test_srun_across_pools_from_the_login_node(cluster: Cluster) -> None:
    out = cluster.ok(cluster.login("srun -N3 --ntasks-per-node=1 hostname"))
    hosts = set(out.split())
    assert len(hosts) == 3 and all(h.startswith("itest-") for h in hosts)


def test_two_small_jobs_without_mem_share_a_node(cluster: Cluster) -> None:
    # The partition's DefMemPerCPU gives each its CPU's share of the node's memory, not all.
    submit = "sbatch --parsable -p main -w itest-cpu-0 -n1 --wrap 'sleep 30'"
    first, second = (cluster.ok(cluster.login(submit)).strip() for _ in range(2))
    both = lambda: cluster.job_state(first) == cluster.job_state(second) == "RUNNING"  # noqa: E731
    wait_for("both jobs running on itest-cpu-0 at once", both, timeout=60)
    memory = cluster.ok(cluster.ctl(f"squeue -h -j {first},{second} -o %m")).split()
    assert memory == ["300M", "300M"], memory  # the cpu pool's defMemPerCpu, below the gpu's
    cluster.ok(cluster.ctl(f"scancel {first} {second}"))
    # The gpu partition has only the gpu pool: (972 - 64) MiB / 2 CPUs.
    gpu = cluster.ok(cluster.ctl("scontrol show partition gpu"))
    assert "DefMemPerCPU=454" in gpu, gpu


def test_login_session_sees_the_jail(cluster: Cluster) -> None:
    out = cluster.ok(cluster.login(f"id -un; ls /; head -n1 {MARKER}"))
    assert out.startswith("sandbox\n")
    assert "home" in out.split() and "version=localhost/slurm-stack/jail" in out


def test_batch_job_with_inner_srun_writes_to_home_on_the_jail(cluster: Cluster) -> None:
    script = (
        "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -o batch-%j.out\n"
        f"srun hostname | sort\nhead -n1 {MARKER}\n"
    )
    cluster.ok(cluster.login(f"cat > batch.sh <<'EOF'\n{script}EOF"))
    job = cluster.ok(cluster.login("sbatch --parsable batch.sh")).strip()
    assert cluster.wait_job(job) == "COMPLETED"
    out = cluster.ok(cluster.login(f"cat ~/batch-{job}.out"))
    hosts = [line for line in out.splitlines() if line.startswith("itest-")]
    assert len(hosts) == 2
    assert "version=localhost/slurm-stack/jail" in out
    # The same file, straight from the shared volume: the job wrote it into the jail.
    assert (cluster.jail / "home" / "sandbox" / f"batch-{job}.out").read_text() == out


def test_jobs_run_inside_the_jail_on_every_pool(cluster: Cluster) -> None:
    for partition, nodes in (("main", "itest-cpu-[0-1]"), ("gpu", "itest-gpu-[0-1]")):
        # The marker's first line (a later population adds lines: test_lifecycle.py).
        out = cluster.ok(cluster.login(f"srun -p {partition} -w {nodes} -N2 head -1 {MARKER}"))
        assert out.count("version=localhost/slurm-stack/jail") == 2


def test_a_job_cannot_read_the_pods_own_files(cluster: Cluster) -> None:
    cluster.ok(cluster.node("itest-cpu-0", "echo pod-secret > /pod-only && chmod 644 /pod-only"))
    result = cluster.login("srun -w itest-cpu-0 cat /pod-only")
    assert result.returncode != 0 and "pod-secret" not in result.stdout
    # No path back to the pod's root through /proc either.
    back = cluster.login(
        "srun -w itest-cpu-0 sh -c 'ls /proc/1/root/ || cat /proc/1/root/pod-only'"
    )
    assert "pod-secret" not in back.stdout and back.returncode != 0


def test_proc_in_a_job_shows_the_node_not_the_host(cluster: Cluster) -> None:
    out = cluster.ok(cluster.login("srun -w itest-cpu-0 sh -c 'ls /proc | grep -c \"^[0-9]\"'"))
    # The pod's processes only (slurmd, the step and the task), never the host's hundreds.
    assert 0 < int(out.strip()) < 40


def test_files_a_job_writes_are_seen_by_login_and_other_workers(cluster: Cluster) -> None:
    cluster.ok(cluster.login("srun -w itest-cpu-0 sh -c 'echo from-cpu-0 > ~/shared.txt'"))
    assert cluster.ok(cluster.login("cat ~/shared.txt")).strip() == "from-cpu-0"
    out = cluster.ok(cluster.login("srun -w itest-gpu-1 cat /home/sandbox/shared.txt"))
    assert out.strip() == "from-cpu-0"


def test_scratch_submount_is_node_local(cluster: Cluster) -> None:
    cluster.ok(cluster.login("srun -w itest-cpu-0 sh -c 'echo a > /scratch/only-on-cpu-0'"))
    assert cluster.ok(cluster.login("srun -w itest-cpu-0 cat /scratch/only-on-cpu-0")) == "a\n"
    other = cluster.login("srun -w itest-cpu-1 ls /scratch/only-on-cpu-0")
    assert other.returncode != 0
    # And not on the shared jail volume.
    assert not (cluster.jail / "scratch" / "only-on-cpu-0").exists()


def test_read_only_host_directory_submount(cluster: Cluster) -> None:
    # The sandbox's stand-in for the Kubernetes node's /srv/itest-site, filled by its admin.
    site = cluster.sandbox.state.root / "hostpath" / "srv" / "itest-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "modules.txt").write_text("gcc/14\n")
    os.chown(site, SANDBOX_UID, -1)  # writable by the user but for the read-only mount
    assert cluster.ok(cluster.login("srun -w itest-cpu-1 cat /opt/site/modules.txt")) == "gcc/14\n"
    result = cluster.login("srun -w itest-cpu-1 touch /opt/site/mine")
    assert result.returncode != 0 and "Read-only file system" in result.stderr
    assert not (site / "mine").exists()


def test_in_memory_submount_is_a_sized_tmpfs_on_its_pools_nodes(cluster: Cluster) -> None:
    out = cluster.ok(
        cluster.login(
            "srun -w itest-gpu-0 sh -c 'stat -f -c %T /ramdisk; df -k --output=size /ramdisk'"
        )
    )
    kind, _, size = out.split()
    assert (kind, size) == ("tmpfs", str(64 * 1024))  # sizeLimit: 64Mi
    # A pool without it sees only the empty mount point in the shared jail.
    other = cluster.ok(cluster.login("srun -w itest-cpu-0 stat -f -c %T /ramdisk")).strip()
    assert other != "tmpfs"


def give_to_sandbox_user(cluster: Cluster, node: str, staged: str) -> None:
    """What an admin does on a fresh volume (root-owned, as most provisioners make them)."""
    cluster.ok(cluster.node(node, f"install -d -o sandbox {staged}/sandbox"))


def test_per_node_volume_submount_is_each_nodes_own_claim(cluster: Cluster) -> None:
    give_to_sandbox_user(cluster, "itest-gpu-0", "/mnt/submounts/var/cache/models")
    cluster.ok(
        cluster.login("srun -w itest-gpu-0 sh -c 'echo weights > /var/cache/models/sandbox/m0'")
    )
    assert cluster.login("srun -w itest-gpu-1 ls /var/cache/models/sandbox").returncode != 0
    # Written to gpu-0's own claim (which outlives the pod), not to the jail or the pod.
    claims = cluster.sandbox.state.root / "claims"
    assert (claims / "sm-cache-itest-gpu-0" / "sandbox" / "m0").read_text() == "weights\n"
    assert not (cluster.jail / "var" / "cache" / "models" / "sandbox").exists()


def test_a_jail_wide_submount_is_shared_by_logins_and_every_pool(cluster: Cluster) -> None:
    give_to_sandbox_user(cluster, "itest-cpu-1", "/mnt/submounts/datasets")
    cluster.ok(cluster.login("srun -w itest-cpu-1 sh -c 'echo data > /datasets/sandbox/f'"))
    assert cluster.ok(cluster.login("cat /datasets/sandbox/f")) == "data\n"
    assert cluster.ok(cluster.login("srun -w itest-gpu-1 cat /datasets/sandbox/f")) == "data\n"
    claim = cluster.sandbox.state.root / "claims" / "itest-datasets"
    assert (claim / "sandbox" / "f").exists()
    assert not (cluster.jail / "datasets" / "sandbox").exists()


def test_nvidia_smi_in_a_job_lists_the_gpus_of_its_node(cluster: Cluster) -> None:
    # The sandbox's stand-in lists the /dev/nvidiaN devices the job can see: the itest GPU pool
    # has 2 per node, and a step sees those it asked for (test_gpus.py: fewer, and none).
    out = cluster.ok(cluster.login("srun -p gpu -w itest-gpu-1 --gres=gpu:2 nvidia-smi -L"))
    assert [line.split(":")[0] for line in out.splitlines()] == ["GPU 0", "GPU 1"], out


def test_gpu_jobs_get_their_nodes_driver_files_and_cpu_jobs_do_not(cluster: Cluster) -> None:
    driver = "/run/slurm-stack/gpu-driver"
    script = f"command -v nvidia-smi; echo $LD_LIBRARY_PATH; head -1 {driver}/lib/libcuda.so.1"
    out = cluster.ok(cluster.login(f"srun -p gpu -w itest-gpu-1 sh -c '{script}'"))
    assert out.splitlines() == [
        f"{driver}/bin/nvidia-smi",
        f"{driver}/lib",
        "TEST STAND-IN, not a library: it stands where the NVIDIA container runtime puts",
    ]
    # Read-only for root too: the directory and each file's own bind below it.
    mounts = cluster.ok(cluster.login("srun -p gpu -w itest-gpu-1 cat /proc/self/mountinfo"))
    options = {
        fields[4]: fields[5].split(",")
        for fields in (line.split() for line in mounts.splitlines())
        if fields[4].startswith(driver)
    }
    assert {f"{driver}", f"{driver}/lib/libcuda.so.1"} <= set(options)
    assert all("ro" in opts and "nosuid" in opts for opts in options.values()), options
    # A step started inside the job does not add the directories again.
    nested = cluster.ok(
        cluster.login(
            "srun -p gpu -w itest-gpu-1 sh -c 'srun --overlap sh -c \"echo \\$LD_LIBRARY_PATH\"'"
        )
    )
    assert nested.strip() == f"{driver}/lib"
    out = cluster.ok(
        cluster.login(
            f"srun -w itest-cpu-0 sh -c 'ls {driver} 2>/dev/null | wc -l; "
            "command -v nvidia-smi || echo none'"
        )
    )
    assert out.split() == ["0", "none"]
    # The shared jail itself never gets a driver file.
    assert not list(cluster.jail.glob("usr/lib/*/libcuda.so*"))


def test_opting_out_of_the_jail_is_refused_unless_allowed(cluster: Cluster) -> None:
    result = cluster.login("srun --no-jail hostname")
    assert result.returncode != 0
    assert "no-jail" in result.stderr


def test_a_broken_jail_fails_the_task_instead_of_running_on_the_pod(cluster: Cluster) -> None:
    # Hide the jail on one worker (an unmounted or unpopulated volume looks the same). The
    # population marker stays, so the quick health check (every 10 s here) does not drain the
    # node first: the task itself must meet the broken jail.
    hide = "mount -t tmpfs broken /mnt/jail && echo version=x > /mnt/jail/.slurm-stack-populated"
    cluster.ok(cluster.node("itest-cpu-1", hide))
    try:
        result = cluster.login("srun -w itest-cpu-1 sh -c 'echo ran; cat /pod-only'")
        assert result.returncode != 0
        assert "ran" not in result.stdout
        assert "slurm-stack jail: the jail at /mnt/jail is not usable" in result.stderr
    finally:
        cluster.ok(cluster.node("itest-cpu-1", "umount /mnt/jail"))
    wait_for("itest-cpu-1 idle", lambda: cluster.node_states().get("itest-cpu-1") == "idle")
    assert cluster.ok(cluster.login("srun -w itest-cpu-1 cat /.slurm-stack-populated"))


def test_interactive_ssh_gets_a_terminal(cluster: Cluster) -> None:
    command = [*cluster.sandbox.ssh_command(tty=True), "tty"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert re.match(r"^/dev/pts/\d+\s*$", result.stdout), result.stdout + result.stderr


def test_accounting_records_jobs_with_user_and_account(cluster: Cluster) -> None:
    assert "itest" in cluster.ok(cluster.ctl("sacctmgr -n show cluster format=cluster"))
    job = cluster.ok(cluster.login("sbatch --parsable --wrap 'true'")).strip()
    assert cluster.wait_job(job) == "COMPLETED"

    def record() -> str:
        out = cluster.ctl(f"sacct -n -X -j {job} -P -o JobID,User,Account,State").stdout
        return out if "COMPLETED" in out else ""

    fields = wait_for("the job in sacct", record, timeout=60).strip().split("|")
    # The sandbox user is a declared user without an account: the cluster's default one.
    assert fields == [job, "sandbox", "itest", "COMPLETED"]


def test_populate_jail_rerun_keeps_user_data(cluster: Cluster) -> None:
    cluster.ok(cluster.login("echo mine > ~/keep-me.txt"))
    # An admin installs software into the jail after population.
    tool = cluster.jail / "usr" / "local" / "bin" / "site-tool"
    tool.write_text("#!/bin/sh\necho site tool\n")
    tool.chmod(0o755)
    marker_before = (cluster.jail / MARKER.lstrip("/")).read_text()
    for done in (cluster.sandbox.state.root / "jobs").glob("itest-populate-jail-*.done"):
        done.unlink()  # as if the Job were run again
    report = cluster.sandbox.up(build=False)
    assert any(job.startswith("itest-populate-jail-") for job in report.jobs_run)
    assert cluster.ok(cluster.login("cat ~/keep-me.txt")).strip() == "mine"
    assert cluster.ok(cluster.login("site-tool")).strip() == "site tool"
    assert (cluster.jail / MARKER.lstrip("/")).read_text() == marker_before


def test_the_embedded_database_runs_with_the_settings_slurm_needs(cluster: Cluster) -> None:
    database = cluster.sandbox.node_container("itest-mariadb-0")
    query = (
        'mariadb -uslurm -p"$(cat "$MARIADB_PASSWORD_FILE")" -N -B -e '
        '"select @@innodb_snapshot_isolation, @@innodb_lock_wait_timeout, '
        '@@innodb_buffer_pool_size, @@innodb_log_file_size, @@max_allowed_packet"'
    )
    out = cluster.sandbox.podman.exec(database, ["sh", "-c", query])
    assert out.returncode == 0, out.stderr
    # The itest stack keeps the default 4Gi limit: a 1 GiB buffer pool, a 256 MiB redo log.
    mib = 2**20
    assert out.stdout.split() == ["0", "900", str(1024 * mib), str(256 * mib), str(16 * mib)]
    slurmdbd = cluster.sandbox.node_container(cluster.sandbox.pod_of("accounting"))
    assert "innodb_snapshot_isolation" not in cluster.sandbox.podman.logs(slurmdbd, tail=500)


def test_finished_steps_leave_no_zombie_processes_on_the_node(cluster: Cluster) -> None:
    """Each step's slurmstepd ends as an orphan of the pod's first process; unreaped, every
    step would leave a zombie until the pod's process limit stops every fork."""
    cluster.ok(cluster.login("for i in 1 2 3 4 5; do srun -w itest-cpu-1 true; done"))
    zombies = "ps -eo stat=,pid=,comm= | awk '$1 ~ /^Z/'"
    wait_for(
        "the finished steps' processes reaped on itest-cpu-1",
        lambda: cluster.ok(cluster.node("itest-cpu-1", zombies)).strip() == "",
        timeout=30,
    )
    # Sessions' leftovers on the login node too.
    cluster.ok(cluster.login("sh -c 'sleep 0.2 &'; sleep 1"))
    pod = cluster.sandbox.pod_of("login")
    left = cluster.sandbox.exec(pod, ["sh", "-c", zombies])
    assert left.stdout.strip() == "", left.stdout
