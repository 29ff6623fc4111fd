"""GPUs on real Slurm with fake devices: each node registers the GPUs its pod really has, at
the host's minors; a job step sees only the GPUs Slurm gave it; a pod short of its pool's GPUs
is drained with a reason naming both counts; the NCCL benchmark's job drains a node that fails
DCGM's level-3 diagnostic."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from slurm_stack import naming, paths
from slurm_stack.spec import REGISTRY_AUTH_CONFIG_KEY
from tests.cluster.conftest import Cluster, boot_stack, tear_down, wait_for
from tests.cluster.registry import (
    AUTH_REGISTRY_PORT,
    IMAGE_MARKER,
    PULL_PASSWORD,
    TEST_IMAGE,
    docker_config,
    registry_for,
)
from tests.cluster.secret_scan import leaks, stack_secrets

STACK = Path(__file__).parent / "Pulumi.gpus.yaml"
FAKE_GPU_TOOLS = Path(__file__).parents[2] / "images" / "fake-gpu"
QUAD, SHORT = "gpus-quad-0", "gpus-short-0"


@pytest.fixture(scope="module")
def gpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    def device_plugin(sandbox: object) -> None:
        # An 8-GPU host whose GPUs 0-3 are taken gives quad's pod 4-7; short's host lacks one.
        sandbox.state.save_gpu_devices({QUAD: [4, 5, 6, 7], SHORT: [0]})  # type: ignore[attr-defined]

    def settled(cluster: Cluster) -> bool:
        states = cluster.node_states()
        return states.get(QUAD) == "idle" and SHORT in states

    document = yaml.safe_load(STACK.read_text())
    document["config"][REGISTRY_AUTH_CONFIG_KEY] = docker_config(
        registry_for("gpus", AUTH_REGISTRY_PORT)
    )
    cluster = boot_stack(
        document,
        tmp_path_factory.mktemp("gpus"),
        2,
        before_up=device_plugin,
        settled=settled,
    )
    yield cluster
    tear_down(cluster)


def test_a_node_registers_the_gpus_its_pod_has_at_the_hosts_minors(gpus: Cluster) -> None:
    assert "gpu:h100:4" in gpus.node_field(QUAD, "Gres")
    # Its GPUs' files are the pod's devices 4-7 (`slurmd -G` cannot show a dynamic node's):
    # a step with all four lists exactly those, numbered from 0 as CUDA would see them.
    out = gpus.ok(
        gpus.login(
            "srun -p main --gres=gpu:4 sh -c "
            "'ls /dev/nvidia[0-9]*; echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L'"
        )
    ).splitlines()
    assert out[:5] == [*(f"/dev/nvidia{minor}" for minor in range(4, 8)), "0,1,2,3"], out
    uuids = [line.rsplit("-", 1)[1].rstrip(")") for line in out[5:]]
    assert uuids == [f"{minor:012x}" for minor in range(4, 8)], out


def test_two_one_gpu_jobs_on_one_node_each_see_one_distinct_gpu(gpus: Cluster) -> None:
    seen = "ls /dev/nvidia[0-9]*; echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES; nvidia-smi -L"
    first = gpus.ok(
        gpus.login(
            f"sbatch --parsable -p main --gres=gpu:1 -o gpu-a.out --wrap '{seen}; sleep 300'"
        )
    ).strip()
    try:
        # The first job holds its GPU while the second runs on the same node.
        wait_for(
            "the first job's view", lambda: gpus.login("cat gpu-a.out").stdout.count("\n") >= 3
        )
        second = gpus.ok(gpus.login(f"srun -p main --gres=gpu:1 sh -c '{seen}'")).splitlines()
        first_view = gpus.ok(gpus.login("cat gpu-a.out")).splitlines()
    finally:
        gpus.login(f"scancel {first}")
    for view in (first_view, second):
        assert len(view) == 3 and view[1] == "0 0" and view[2].startswith("GPU 0: "), view
    assert first_view[0] != second[0], (first_view, second)
    assert {first_view[0], second[0]} <= {f"/dev/nvidia{minor}" for minor in range(4, 8)}
    assert first_view[2] != second[2]  # the fake tool's UUID follows the device's minor


def test_a_job_without_gres_sees_no_gpu(gpus: Cluster) -> None:
    out = gpus.login(
        "srun -p main sh -c 'ls /dev/nvidia[0-9]* 2>&1; "
        'echo "cuda=${CUDA_VISIBLE_DEVICES-unset} nvidia=$NVIDIA_VISIBLE_DEVICES"; '
        "ls /dev/nvidiactl; nvidia-smi -L'"
    )
    lines = out.stdout.splitlines()
    assert "No such file or directory" in lines[0], out
    assert lines[1:] == ["cuda=unset nvidia=void", "/dev/nvidiactl", "No devices were found"], out
    # Nor can the user make a device node, or reach the pod's /dev through slurmd's root.
    tries = gpus.login(
        "srun -p main sh -c 'mknod /tmp/gpu c 195 4 2>&1; ls /proc/1/root/dev/nvidia4 2>&1'"
    )
    assert "Operation not permitted" in tries.stdout, tries
    assert "Permission denied" in tries.stdout, tries


def test_tasks_number_the_gpus_they_see_from_zero(gpus: Cluster) -> None:
    # Slurm gives each task node indexes; in the task's own /dev they are 0 and 1.
    out = gpus.ok(
        gpus.login(
            "srun -p main -n2 --gres=gpu:2 --gpu-bind=single:1 sh -c "
            "'echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $(ls /dev/nvidia[0-9]* | wc -l)'"
        )
    )
    assert sorted(out.splitlines()) == ["0 0 2", "1 1 2"], out


@pytest.mark.usefixtures("image_registry")
def test_a_container_job_sees_its_gpus_and_the_nodes_driver_files(gpus: Cluster) -> None:
    image = f"{registry_for('gpus')}/{TEST_IMAGE}"
    seen = (
        "ls /dev/nvidia[0-9]* 2>&1; echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L; "
        "cat /etc/image-marker"
    )
    out = gpus.ok(
        gpus.login(f"srun -p main --gres=gpu:4 --container-image={image} sh -c '{seen}'")
    ).splitlines()
    # As a step in the jail sees them: the pod's devices 4-7, numbered from 0, the node's tool.
    assert out[:5] == [*(f"/dev/nvidia{minor}" for minor in range(4, 8)), "0,1,2,3"], out
    assert [line.rsplit("-", 1)[1].rstrip(")") for line in out[5:9]] == [
        f"{minor:012x}" for minor in range(4, 8)
    ], out
    assert out[9:] == [IMAGE_MARKER], out
    one = gpus.ok(
        gpus.login(f"srun -p main --gres=gpu:1 --container-image={image} sh -c '{seen}'")
    ).splitlines()
    assert len(one) == 4 and one[1] == "0" and one[2].startswith("GPU 0: "), one
    paths_seen = gpus.ok(
        gpus.login(
            f"srun -p main --gres=gpu:1 --container-image={image} "
            "sh -c 'echo $PATH; echo $LD_LIBRARY_PATH'"
        )
    ).splitlines()
    assert [p.split(":")[0] for p in paths_seen] == [
        f"{paths.GPU_DRIVER_DIR}/bin",
        f"{paths.GPU_DRIVER_DIR}/lib",
    ], paths_seen
    none = gpus.login(f"srun -p main --container-image={image} sh -c '{seen}'").stdout
    assert "No such file or directory" in none and "No devices were found" in none, none
    # containers.cache is `jail` here: one root-only copy on the jail's volume, none in the pod.
    cache = gpus.jail / "var" / "cache" / "slurm-stack" / "containers"
    assert (cache.stat().st_mode & 0o777, cache.stat().st_uid) == (0o700, 0)
    copies = {p.name: p.stat().st_ino for p in cache.glob("sha256-*")}
    assert len(copies) == 1, copies
    gpus.ok(gpus.login(f"srun -p main --container-image={image} true"))
    assert {p.name: p.stat().st_ino for p in cache.glob("sha256-*")} == copies
    assert gpus.node(QUAD, f"test -e {paths.CONTAINER_CACHE_NODE_DIR}").returncode != 0
    denied = gpus.login(f"ls {paths.CONTAINER_CACHE_JAIL_DIR.removeprefix(paths.JAIL_DIR)}")
    assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied


@pytest.mark.usefixtures("image_registry")
def test_registry_credentials_come_and_go_without_restarting_a_worker(gpus: Cluster) -> None:
    image = f"{registry_for('gpus', AUTH_REGISTRY_PORT)}/{TEST_IMAGE}"
    pull = f"srun -p main --container-image={image} cat /etc/image-marker"
    assert gpus.ok(gpus.login(pull)).strip() == IMAGE_MARKER
    workers = {name: started for name, started in gpus.daemons().items() if "slurmd" in name}
    assert workers

    def set_credentials(value: str | None) -> None:
        document = yaml.safe_load(gpus.stack_file.read_text())
        document["config"].pop(REGISTRY_AUTH_CONFIG_KEY, None)
        if value is not None:
            document["config"][REGISTRY_AUTH_CONFIG_KEY] = value
        gpus.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        report = gpus.sandbox.up(build=False)
        assert not [pod for pod in report.created if pod in (QUAD, SHORT)], report

    set_credentials(None)
    refused = gpus.login(pull)
    assert refused.returncode != 0, refused
    assert f"container image '{image}': cannot pull image" in refused.stderr, refused
    assert "authentication required" in refused.stderr, refused.stderr
    assert PULL_PASSWORD not in refused.stderr
    set_credentials(docker_config(registry_for("gpus", AUTH_REGISTRY_PORT)))
    assert gpus.ok(gpus.login(pull)).strip() == IMAGE_MARKER
    # The pods read the new files in place: no worker restarted for either change.
    assert {n: s for n, s in gpus.daemons().items() if "slurmd" in n} == workers


def test_a_pod_short_of_its_pools_gpus_is_drained_naming_both_counts(gpus: Cluster) -> None:
    reason = gpus.node_reason(SHORT)
    assert "gres/gpu count reported lower than configured (1 < 2)" in reason, reason
    assert "DRAIN" in gpus.node_field(SHORT, "State")
    # No job lands there: a job that asks for the partition waits.
    pending = gpus.login("timeout 5 srun -p short --immediate=3 true")
    assert pending.returncode != 0


def _finished_benchmark(cluster: Cluster) -> str | None:
    """The controller's one-line record of a failed benchmark job, once there is one."""
    jobs = cluster.ctl("scontrol --oneliner show jobs").stdout.splitlines()
    failed = [line for line in jobs if "JobName=nccl-benchmark" in line and "=FAILED " in line]
    return failed[0] if failed else None


def test_the_benchmark_job_drains_a_node_that_fails_the_level_3_diagnostic(gpus: Cluster) -> None:
    # What a GPU jail image with DCGM and nccl-tests provides, here the stand-ins: both answer
    # per node from files in the jail. The bandwidth passes; DCGM's memory test fails.
    for tool in ("dcgmi", "all_reduce_perf"):
        target = gpus.jail / "usr" / "local" / "bin" / tool
        shutil.copy(FAKE_GPU_TOOLS / tool, target)
        target.chmod(0o755)
    answers = gpus.jail / "etc" / "fake-gpu"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / f"busbw-{QUAD}").write_text("410\n")
    (answers / f"dcgm-{QUAD}").write_text("fail Memory Bandwidth\n")
    wait_for(f"{QUAD} idle", lambda: gpus.node_states().get(QUAD) == "idle", timeout=60)

    gpus.sandbox.run_cron_job("gpus-nccl-benchmark")

    try:
        reason = wait_for(
            f"{QUAD} drained by the benchmark job",
            lambda: (r := gpus.node_reason(QUAD)).startswith("healthcheck: nccl") and r,
            timeout=90,
        )
        assert reason == "healthcheck: nccl dcgm fail Memory Bandwidth"
        # The controller's record of the job: it failed, its comment is the verdict, and its
        # time limit is the benchmark's 30 minutes plus the diagnostic's 2.
        job = wait_for("the benchmark job's record", lambda: _finished_benchmark(gpus), timeout=60)
        assert f"NodeList={QUAD} " in job and "TimeLimit=00:32:00" in job, job
        assert 'dcgm="fail Memory Bandwidth"' in job and "busbw=410.00" in job, job
        # The short node, drained by Slurm for its missing GPU, got no benchmark job.
        assert f"NodeList={SHORT} " not in gpus.ctl("scontrol --oneliner show jobs").stdout
    finally:
        gpus.ok(gpus.ctl(f"scontrol update NodeName={QUAD} State=RESUME"))


def test_no_registry_credential_is_in_any_log(gpus: Cluster) -> None:
    """The registry credentials (`containerRegistryAuth`), used by a pull that needs them,
    are in no log (tests/cluster/secret_scan.py)."""
    document = yaml.safe_load(gpus.stack_file.read_text())
    document["config"][REGISTRY_AUTH_CONFIG_KEY] = docker_config(
        registry_for("gpus", AUTH_REGISTRY_PORT)
    )
    gpus.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    gpus.sandbox.up(build=False)  # as it was booted, whatever another test left
    secrets = stack_secrets(gpus)
    assert any(naming.registry_auth_secret_name(gpus.name) in where for where in secrets)
    secrets["the registry's password"] = PULL_PASSWORD.encode()
    image = f"{registry_for('gpus', AUTH_REGISTRY_PORT)}/{TEST_IMAGE}"
    pulled = gpus.login(f"srun -p main --container-image={image} cat /etc/image-marker")
    assert gpus.ok(pulled).strip() == IMAGE_MARKER
    found, _ = leaks(gpus, secrets)
    assert not found, "\n".join(found)
