"""``nccl-submit``: the environment, which nodes get a benchmark job, the exact sbatch command,
and the job script run for real against the stand-in all_reduce_perf and scontrol."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from slurm_stack_healthchecks.cli import main
from slurm_stack_healthchecks.nccl_submit import (
    SQUEUE_ARGV,
    Skip,
    SubmitConfig,
    SubmitConfigError,
    Target,
    job_script,
    load_submit_config,
    nccl_submit,
    parse_size,
    plan,
    sbatch_argv,
)
from slurm_stack_healthchecks.runner import CommandResult
from slurm_stack_healthchecks.sinfo import SINFO_ARGV, parse_sinfo

from tests.healthchecks.hc_helpers import HEALTHCHECKS_DIR, FakeRunner, done, fixture

FAKE_GPU_DIR = Path(__file__).resolve().parents[2] / "images" / "fake-gpu"
ENV = {
    "NCCL_GPU_POOLS": json.dumps({"gpu": "h100", "small-gpu": "a100", "l40": ""}),
    "NCCL_THRESHOLDS_GBPS": json.dumps({"h100": 350, "a100": 180, "l40s": 100}),
    "NCCL_MIN_BYTES": "512M",
    "NCCL_MAX_BYTES": "8G",
}
SKIPPED = {
    "gpu-1": "state drained",
    "gpu-2": "state allocated",
    "gpu-3": "state mixed",
    "gpu-4": "state idle*",
    "gpu-5": "state idle~",
    "gpu-6": "state draining",
    "gpu-7": "state down*",
    "cpu-0": "not in a GPU pool",
    "cpu-1": "not in a GPU pool",
}


def _config(**env: str) -> SubmitConfig:
    return load_submit_config({**ENV, **env})


def _sbatch(job_ids: list[str]) -> Callable[[tuple[str, ...], str | None], CommandResult]:
    """sbatch answering ``--parsable`` job ids in turn, checking a script came on stdin."""

    def answer(argv: tuple[str, ...], stdin: str | None) -> CommandResult:
        assert stdin is not None and stdin.startswith("#!/bin/bash\n")
        return CommandResult(argv, 0, f"{job_ids.pop(0)}\n", "")

    return answer


def _runner(squeue: str = "") -> FakeRunner:
    return FakeRunner(
        {
            ("sinfo",): done(fixture("sinfo-nodes.txt")),
            ("squeue",): done(squeue),
            ("sbatch",): _sbatch(["101", "102;cluster", "103"]),
        }
    )


def _lines(log: io.StringIO) -> list[str]:
    return log.getvalue().splitlines()


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512M", 512 * 2**20),
        ("8G", 8 * 2**30),
        ("8Gi", 8 * 2**30),
        ("64k", 64 * 1024),
        ("1T", 2**40),
        ("1048576", 1048576),
    ],
)
def test_sizes_are_powers_of_1024_like_all_reduce_perf(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_environment_and_defaults() -> None:
    config = _config()
    assert config.pools == {"gpu": "h100", "small-gpu": "a100", "l40": ""}
    assert config.thresholds == {"h100": 350.0, "a100": 180.0, "l40s": 100.0}
    assert (config.min_bytes, config.max_bytes) == (536870912, 8589934592)
    assert (config.all_reduce_perf, config.output_dir, config.time_limit_minutes) == (
        "all_reduce_perf",
        "/tmp",  # each job makes its own private directory in it
        30,
    )
    custom = _config(
        NCCL_ALL_REDUCE_PERF="/opt/nccl-tests/bin/all_reduce_perf",
        NCCL_OUTPUT_DIR="/shared/nccl/",
        NCCL_TIME_LIMIT_MINUTES="45",
    )
    assert (custom.all_reduce_perf, custom.output_dir, custom.time_limit_minutes) == (
        "/opt/nccl-tests/bin/all_reduce_perf",
        "/shared/nccl",
        45,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NCCL_GPU_POOLS": ""}, "NCCL_GPU_POOLS is not set; expected e.g."),
        ({"NCCL_GPU_POOLS": "gpu=h100"}, "NCCL_GPU_POOLS is not valid JSON"),
        ({"NCCL_GPU_POOLS": "{}"}, "NCCL_GPU_POOLS must be a non-empty JSON object"),
        ({"NCCL_GPU_POOLS": '["gpu"]'}, "NCCL_GPU_POOLS must be a non-empty JSON object"),
        ({"NCCL_GPU_POOLS": '{"gpu": 8}'}, "NCCL_GPU_POOLS: pool 'gpu' needs"),
        ({"NCCL_THRESHOLDS_GBPS": "{h100: 350}"}, "NCCL_THRESHOLDS_GBPS: thresholds are not"),
        ({"NCCL_THRESHOLDS_GBPS": '{"h100": -1}'}, "NCCL_THRESHOLDS_GBPS: threshold for 'h100'"),
        (
            {"NCCL_THRESHOLDS_GBPS": '{"h100": 350, "l40s": 100}'},
            "NCCL_THRESHOLDS_GBPS has no threshold for GPU type 'a100' of pool 'small-gpu' "
            "(it has: h100, l40s)",
        ),
        ({"NCCL_MIN_BYTES": "lots"}, "NCCL_MIN_BYTES: 'lots' is not a size like 512M"),
        ({"NCCL_MAX_BYTES": "8.5G"}, "NCCL_MAX_BYTES: '8.5G' is not a size"),
        ({"NCCL_MAX_BYTES": "0"}, "NCCL_MAX_BYTES: '0' is not a size"),
        ({"NCCL_MIN_BYTES": "16G"}, "NCCL_MIN_BYTES (17179869184 bytes) must not exceed"),
        ({"NCCL_OUTPUT_DIR": "nccl"}, "NCCL_OUTPUT_DIR must be an absolute path"),
        ({"NCCL_OUTPUT_DIR": '/a"b'}, "NCCL_OUTPUT_DIR must be an absolute path without"),
        ({"NCCL_TIME_LIMIT_MINUTES": "1"}, "NCCL_TIME_LIMIT_MINUTES must be whole minutes"),
        ({"NCCL_TIME_LIMIT_MINUTES": "1h"}, "NCCL_TIME_LIMIT_MINUTES must be whole minutes"),
        ({"NCCL_DCGM_TIMEOUT_SECONDS": "59"}, "NCCL_DCGM_TIMEOUT_SECONDS must be whole seconds"),
        ({"NCCL_DCGM_TIMEOUT_SECONDS": "1h"}, "NCCL_DCGM_TIMEOUT_SECONDS must be whole seconds"),
    ],
)
def test_bad_environment_names_the_variable_and_submits_nothing(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(SubmitConfigError) as info:
        _config(**env)
    assert str(info.value).startswith(message), str(info.value)
    runner, log = _runner(), io.StringIO()
    assert nccl_submit({**ENV, **env}, runner, log) == 2
    assert runner.calls == []
    [line] = _lines(log)
    assert line.startswith("nccl-submit result=error error=") and message.split()[0] in line


def test_only_idle_gpu_nodes_of_configured_pools_get_a_job() -> None:
    decisions = plan(_config(), parse_sinfo(fixture("sinfo-nodes.txt")), {})
    targets = [d for d in decisions if isinstance(d, Target)]
    assert targets == [
        Target("gpu-0", "gpu", "h100", 8, "batch", 350.0),
        Target("small-0", "small-gpu", "a100", 2, "debug", 180.0),  # untyped Gres
        Target("l40-0", "l40", "l40s", 4, "debug", 100.0),  # type from the Gres
    ]
    skips = {d.node: d.why for d in decisions if isinstance(d, Skip)}
    assert skips == SKIPPED


def test_pool_membership_is_an_exact_feature() -> None:
    config = _config(NCCL_GPU_POOLS='{"gpu": "h100"}')
    [decision] = plan(config, parse_sinfo("s-0|idle|batch*|small-gpu,gpu-less|gpu:h100:8\n"), {})
    assert decision == Skip("s-0", "not in a GPU pool")


def test_nodes_that_cannot_be_benchmarked_are_skipped_with_a_reason() -> None:
    sinfo = (
        "a|idle|batch*|gpu|(null)\n"
        "b|idle|batch*|gpu|gpu:h100:x\n"
        "c|idle|batch*|l40|gpu:4\n"
        "d|idle|batch*|l40|gpu:b200:4\n"
        "e|idle|n/a|gpu|gpu:h100:8\n"
        "f|idle|batch*|gpu|gpu:h100:8\n"
        "g|idle|batch*|gpu|gpu:h100:1\n"
    )
    decisions = plan(_config(), parse_sinfo(sinfo), {"f": "99"})
    assert [d.why for d in decisions if isinstance(d, Skip)] == [
        "no GPUs in Gres '(null)'",
        "unparsable gpu count in Gres 'gpu:h100:x'",
        "no GPU type: set the pool's gpuType",
        "no NCCL busbw threshold for GPU type 'b200' (known: a100, h100, l40s)",
        "in no partition",
        "benchmark job 99 already queued",
        "one GPU: no peer to all-reduce with",
    ]


def test_the_exact_sbatch_command() -> None:
    target = Target("gpu-0", "gpu", "h100", 8, "batch", 350.0)
    assert sbatch_argv(_config(NCCL_TIME_LIMIT_MINUTES="20"), target) == [
        "sbatch",
        "--parsable",
        "--job-name=nccl-benchmark",
        "--partition=batch",
        "--nodelist=gpu-0",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        "--gres=gpu:8",
        "--nice=10000",
        "--time=20",
        "--no-requeue",
        "--chdir=/tmp",
        "--output=/dev/null",  # never a file at a predictable path in a shared directory
        "--comment=slurm-stack nccl benchmark: pool gpu, 8x h100, threshold 350 GB/s",
    ]


def test_the_dcgm_diagnostic_lengthens_the_job_by_its_timeout_rounded_up() -> None:
    target = Target("gpu-0", "gpu", "h100", 8, "batch", 350.0)
    assert _config().dcgm_timeout_seconds is None
    config = _config(NCCL_TIME_LIMIT_MINUTES="20", NCCL_DCGM_TIMEOUT_SECONDS="3601")
    assert config.job_minutes == 20 + 61
    assert "--time=81" in sbatch_argv(config, target)
    script = job_script(config, target)
    assert "timeout --kill-after=30 3601 dcgmi diag -r 3 >&4 2>&1 3>&- 4>&-\n" in script
    assert '--dcgm-output "$dcgm" --dcgm-exit "$dcgm_rc")' in script
    assert "NCCL_DCGM_TIMEOUT_SECONDS" in script.split("unset ", 1)[1].split("\n", 1)[0]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "dcgmi" not in job_script(_config(), target)


def test_the_job_script_quotes_every_value() -> None:
    config = _config(
        NCCL_ALL_REDUCE_PERF="/opt/nccl tests/all_reduce_perf",
        NCCL_OUTPUT_DIR="/shared/it's here",
    )
    script = job_script(config, Target("gpu-0", "gpu", "h100", 8, "batch", 350.0))
    assert "\nnode=gpu-0\nbase='/shared/it'\"'\"'s here'\n" in script
    assert (
        "timeout --kill-after=30 1710 '/opt/nccl tests/all_reduce_perf' -b 536870912 "
        "-e 8589934592 -f 2 -g 8 >&3 2>&1 3>&-\n"
    ) in script
    assert "set -u -o noclobber\numask 077\n" in script
    assert (
        'verdict=$(/usr/lib/slurm-stack/healthcheck nccl-verdict --output "$result" '
        '--node "$node" \\\n  --gpu-type h100 --thresholds \'{"h100": 350.0}\')\n'
    ) in script
    assert "unset NCCL_GPU_POOLS NCCL_THRESHOLDS_GBPS NCCL_MIN_BYTES" in script
    assert 'Comment="$1"' in script
    assert script.endswith('finish "$verdict" "$status"\n')
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_submits_and_logs_one_line_per_node() -> None:
    runner, log = _runner(), io.StringIO()
    assert nccl_submit(ENV, runner, log) == 0
    assert runner.argvs()[:2] == [SINFO_ARGV, SQUEUE_ARGV]
    sbatches = [(argv, stdin) for argv, stdin in runner.calls if argv[0] == "sbatch"]
    assert [argv[4] for argv, _ in sbatches] == [
        "--nodelist=gpu-0",
        "--nodelist=small-0",
        "--nodelist=l40-0",
    ]
    assert all("\nnode=" + argv[4].split("=")[1] + "\n" in stdin for argv, stdin in sbatches)
    lines = _lines(log)
    assert len(lines) == 13  # 12 nodes and the summary
    assert lines[0] == (
        "nccl-submit node=gpu-0 action=submit pool=gpu gpu_type=h100 gpus=8 partition=batch "
        "threshold=350 job=101"
    )
    assert lines[1] == 'nccl-submit node=gpu-1 action=skip pool=gpu why="state drained"'
    assert "node=small-0 action=submit pool=small-gpu gpu_type=a100 gpus=2" in lines[8]
    assert lines[8].endswith("job=102")  # "102;cluster" from a federation
    assert lines[11] == 'nccl-submit node=cpu-1 action=skip why="not in a GPU pool"'
    assert lines[12] == "nccl-submit result=ok submitted=3 skipped=9 failed=0"


def test_a_failed_sbatch_is_reported_and_the_rest_still_submitted() -> None:
    answers = iter(
        [
            CommandResult(
                (),
                1,
                "",
                "sbatch: error: Batch job submission failed: Invalid node name specified\n",
            ),
            CommandResult((), 0, "202\n", ""),
            CommandResult((), 0, "203\n", ""),
        ]
    )
    runner = _runner()
    runner.script[("sbatch",)] = lambda argv, stdin: next(answers)
    log = io.StringIO()
    assert nccl_submit(ENV, runner, log) == 1
    lines = _lines(log)
    assert lines[0] == (
        "nccl-submit node=gpu-0 action=error pool=gpu gpu_type=h100 gpus=8 partition=batch "
        'threshold=350 error="sbatch exited 1: sbatch: error: Batch job submission failed: '
        'Invalid node name specified"'
    )
    assert lines[-1] == "nccl-submit result=error submitted=2 skipped=9 failed=1"


def test_an_already_queued_benchmark_is_not_submitted_twice() -> None:
    runner, log = _runner(squeue="88|gpu-0|\n89|small-0|small-0\n"), io.StringIO()
    assert nccl_submit(ENV, runner, log) == 0
    assert [argv[4] for argv in runner.argvs("sbatch")] == ["--nodelist=l40-0"]
    assert _lines(log)[0] == (
        'nccl-submit node=gpu-0 action=skip pool=gpu why="benchmark job 88 already queued"'
    )


def test_slurm_unreachable_submits_nothing() -> None:
    runner = _runner()
    runner.script[("sinfo",)] = done(
        stderr="sinfo: error: Unable to contact slurm controller", returncode=1
    )
    log = io.StringIO()
    assert nccl_submit(ENV, runner, log) == 1
    assert runner.argvs("sbatch") == []
    assert _lines(log) == [
        'nccl-submit result=error error="sinfo exited 1: sinfo: error: Unable to contact slurm '
        'controller"'
    ]
    squeue_down = _runner(squeue="")
    squeue_down.script[("squeue",)] = done(stderr="squeue: error: Invalid user", returncode=1)
    assert nccl_submit(ENV, squeue_down, io.StringIO()) == 1
    assert squeue_down.argvs("sbatch") == []


def test_dry_run_submits_nothing_through_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    runner = _runner()
    monkeypatch.setattr("slurm_stack_healthchecks.cli.run_command", runner)
    assert main(["nccl-submit", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert runner.argvs("sbatch") == []
    assert err.splitlines()[0].endswith("threshold=350 dry_run=yes")
    assert err.splitlines()[-1] == (
        "nccl-submit result=ok submitted=3 skipped=9 failed=0 dry_run=yes"
    )
    monkeypatch.setenv("NCCL_MIN_BYTES", "")
    assert main(["nccl-submit"]) == 2
    assert "NCCL_MIN_BYTES is not set" in capsys.readouterr().err


# The job script for real: bash, the stand-in all_reduce_perf (images/fake-gpu), the real
# nccl-verdict through the healthcheck wrapper, and a stand-in scontrol that records its calls.
FAKE_SCONTROL = """#!/bin/sh
for arg in "$@"; do printf '%s\\t' "$arg"; done >> "{root}/scontrol-calls"
echo >> "{root}/scontrol-calls"
if [ "$1" = --oneliner ]; then exec cat "{root}/node"; fi
"""
# mktemp -d answering a directory chosen by the test: one somebody got into before the job.
FAKE_MKTEMP = '#!/bin/sh\necho "{directory}"\n'
PRIVATE_GLOB = "nccl-benchmark-gpu-0-4242.????????"


def _run_job(
    tmp_path: Path,
    busbw: str,
    output_dir: Path,
    *,
    node: str = "scontrol-node-idle.txt",
    mktemp_answers: Path | None = None,
    dcgm: str | None = None,
    dcgm_timeout_seconds: int = 60,
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    bin_dir, fake_gpu = tmp_path / "bin", tmp_path / "fake-gpu"
    bin_dir.mkdir(exist_ok=True)
    fake_gpu.mkdir(exist_ok=True)
    stand_ins = {"scontrol": FAKE_SCONTROL.format(root=tmp_path)}
    if mktemp_answers is not None:
        stand_ins["mktemp"] = FAKE_MKTEMP.format(directory=mktemp_answers)
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "node").write_text(fixture(node))
    (fake_gpu / "busbw-gpu-0").write_text(busbw)
    (fake_gpu / "busbw").write_text("999")  # another node's file is not used
    config = _config(NCCL_OUTPUT_DIR=str(output_dir))
    if dcgm is not None:  # what the stand-in dcgmi answers on this node
        (fake_gpu / "dcgm-gpu-0").write_text(dcgm)
        config = dataclasses.replace(config, dcgm_timeout_seconds=dcgm_timeout_seconds)
    target = Target("gpu-0", "gpu", "h100", 8, "batch", 350.0)
    script = job_script(config, target, healthcheck=str(HEALTHCHECKS_DIR / "healthcheck"))
    env = {
        "PATH": f"{bin_dir}:{FAKE_GPU_DIR}:/usr/bin:/bin",
        "FAKE_GPU_DIR": str(fake_gpu),
        "SLURM_JOB_ID": "4242",
        "SLURMD_NODENAME": "gpu-0",
        "NCCL_GPU_POOLS": "{}",  # from the submitter's environment: dropped
        "FAKE_GPU_HANG_SECONDS": "30",
    }
    proc = subprocess.run(
        ["bash", "-s"],
        input=script,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls_file = tmp_path / "scontrol-calls"
    calls = [line.rstrip("\t").split("\t") for line in calls_file.read_text().splitlines()]
    return proc, calls


def _private_dir(output_dir: Path) -> Path:
    """The one directory the job made for itself in ``output_dir``: ours, mode 0700."""
    [private] = output_dir.iterdir()
    assert private.match(PRIVATE_GLOB), private
    info = private.lstat()
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
    assert stat.S_IMODE(info.st_mode) == 0o700
    return private


needs_python3 = pytest.mark.skipif(
    not os.access("/usr/bin/python3", os.X_OK),
    reason="the wrapper's shebang needs /usr/bin/python3",
)


@needs_python3
def test_job_script_drains_a_slow_node_and_keeps_the_results_in_its_own_directory(
    tmp_path: Path,
) -> None:
    output_dir = tmp_path / "jail-tmp"
    output_dir.mkdir(mode=0o1777)
    proc, calls = _run_job(tmp_path, "200.5", output_dir)
    assert proc.returncode == 1, proc.stderr
    assert (proc.stdout, proc.stderr) == ("", "")  # all in the job's log
    private = _private_dir(output_dir)
    assert sorted(f.name for f in private.iterdir()) == [
        "gpu-0-4242.log",
        "gpu-0-4242.out",
        "gpu-0-4242.verdict",
    ]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in private.iterdir())
    verdict = (private / "gpu-0-4242.verdict").read_text().strip()
    assert re.fullmatch(
        rf"nccl-verdict result=fail gpu_type=h100 output={private}/gpu-0-4242.out busbw=200.50 "
        r'threshold=350 reason="healthcheck: nccl busbw 200.5<350 GB/s" node=gpu-0 '
        r'action=drain why="checks failed"',
        verdict,
    ), verdict
    assert (private / "gpu-0-4242.log").read_text() == verdict + "\n"
    assert "# Avg bus bandwidth    : 200.500" in (private / "gpu-0-4242.out").read_text()
    assert calls == [
        ["--oneliner", "show", "node", "gpu-0"],
        [
            "update",
            "NodeName=gpu-0",
            "State=DRAIN",
            "Reason=healthcheck: nccl busbw 200.5<350 GB/s",
        ],
        ["update", "JobId=4242", f"Comment={verdict}"],
    ]


@needs_python3
def test_job_script_resumes_the_node_it_drained_when_it_passes_again(tmp_path: Path) -> None:
    output_dir = tmp_path / "jail-tmp"
    output_dir.mkdir()
    proc, calls = _run_job(tmp_path, "380", output_dir, node="scontrol-node-drained-nccl.txt")
    assert proc.returncode == 0, proc.stderr
    verdict = (_private_dir(output_dir) / "gpu-0-4242.verdict").read_text().strip()
    assert verdict.startswith("nccl-verdict result=pass gpu_type=h100 output=")
    assert calls == [
        ["--oneliner", "show", "node", "gpu-0"],
        ["update", "NodeName=gpu-0", "State=RESUME"],
        ["update", "JobId=4242", f"Comment={verdict}"],
    ]


@needs_python3
def test_job_script_without_a_usable_output_directory_has_no_verdict_and_no_fallback(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    before = set(Path("/tmp").glob("*gpu-0-4242*"))
    proc, calls = _run_job(tmp_path, "200.5", blocker / "nccl")
    assert proc.returncode == 2
    assert proc.stdout == (
        f'nccl-verdict result=error node=gpu-0 error="cannot create a private directory in '
        f'{blocker}/nccl; no fallback"\n'
    )
    assert proc.stderr.endswith(
        f"nccl-benchmark: cannot create a private directory in {blocker}/nccl; no fallback\n"
    )
    assert calls == [["update", "JobId=4242", f"Comment={proc.stdout.strip()}"]]  # node untouched
    assert set(Path("/tmp").glob("*gpu-0-4242*")) == before  # nothing went to the shared /tmp


def _plant(private: Path, how: str) -> Path:
    """What somebody put in the job's directory before it ran, as the job's output file; a
    passing result, so that using it would return the drained node to service."""
    private.mkdir(mode=0o700)
    planted, passing = private / "gpu-0-4242.out", fixture("all_reduce_perf-8xh100-pass.txt")
    if how == "file":
        planted.write_text(passing)
    elif how == "symlink":
        (private.parent / "forged.txt").write_text(passing)
        planted.symlink_to(private.parent / "forged.txt")
    elif how == "dangling-symlink":
        planted.symlink_to(private.parent / "created-through-the-link")
    elif how == "symlink-to-dev-null":  # bash's noclobber alone would open this one
        planted.symlink_to("/dev/null")
    else:  # "fifo"
        os.mkfifo(planted)
    return planted


@needs_python3
@pytest.mark.parametrize(
    "how", ["file", "symlink", "dangling-symlink", "symlink-to-dev-null", "fifo"]
)
def test_job_script_never_writes_or_reads_an_output_file_that_exists(
    tmp_path: Path, how: str
) -> None:
    output_dir = tmp_path / "jail-tmp"
    output_dir.mkdir()
    private = output_dir / "nccl-benchmark-gpu-0-4242.AAAAAAAA"
    planted = _plant(private, how)
    before = os.readlink(planted) if planted.is_symlink() else None
    proc, calls = _run_job(
        tmp_path, "200.5", output_dir, node="scontrol-node-drained-nccl.txt", mktemp_answers=private
    )
    assert proc.returncode == 2, proc.stderr
    assert (proc.stdout, proc.stderr) == ("", "")  # in the job's log
    line = (private / "gpu-0-4242.verdict").read_text().strip()
    assert line == (
        f'nccl-verdict result=error node=gpu-0 error="{planted} exists already: not reusing it"'
    )
    assert calls == [["update", "JobId=4242", f"Comment={line}"]]  # neither drained nor resumed
    if how == "file":
        assert planted.read_text() == fixture("all_reduce_perf-8xh100-pass.txt")
    if before is not None:
        assert os.readlink(planted) == before
    assert not (private.parent / "created-through-the-link").exists()
    if how == "symlink":
        assert (private.parent / "forged.txt").read_text() == fixture(
            "all_reduce_perf-8xh100-pass.txt"
        )


@needs_python3
@pytest.mark.parametrize(
    ("busbw", "dcgm", "timeout", "reason"),
    [
        ("380", "fail Memory Bandwidth", 60, "healthcheck: nccl dcgm fail Memory Bandwidth"),
        (
            "200.5",
            "fail Targeted Power",
            60,
            "healthcheck: nccl busbw 200.5<350 GB/s, dcgm fail Targeted Power",
        ),
        ("380", "hang", 1, "healthcheck: nccl dcgm timeout"),
        ("crash", "fail PCIe", 60, "healthcheck: nccl dcgm fail PCIe"),
    ],
)
def test_job_script_drains_a_node_that_fails_the_level_3_diagnostic(
    tmp_path: Path, busbw: str, dcgm: str, timeout: int, reason: str
) -> None:
    output_dir = tmp_path / "jail-tmp"
    output_dir.mkdir()
    proc, calls = _run_job(tmp_path, busbw, output_dir, dcgm=dcgm, dcgm_timeout_seconds=timeout)
    assert proc.returncode == 1, proc.stderr
    private = _private_dir(output_dir)
    assert sorted(f.name for f in private.iterdir()) == [
        "gpu-0-4242.dcgm",
        "gpu-0-4242.log",
        "gpu-0-4242.out",
        "gpu-0-4242.verdict",
    ]
    assert stat.S_IMODE((private / "gpu-0-4242.dcgm").stat().st_mode) == 0o600
    verdict = (private / "gpu-0-4242.verdict").read_text().strip()
    assert f'reason="{reason}"' in verdict and "action=drain" in verdict, verdict
    assert calls[1] == ["update", "NodeName=gpu-0", "State=DRAIN", f"Reason={reason}"]


@needs_python3
def test_job_script_with_a_passing_diagnostic_resumes_the_node(tmp_path: Path) -> None:
    output_dir = tmp_path / "jail-tmp"
    output_dir.mkdir()
    proc, calls = _run_job(
        tmp_path, "380", output_dir, node="scontrol-node-drained-nccl.txt", dcgm="pass"
    )
    assert proc.returncode == 0, proc.stderr
    private = _private_dir(output_dir)
    assert "| Memory Bandwidth" in (private / "gpu-0-4242.dcgm").read_text()
    verdict = (private / "gpu-0-4242.verdict").read_text().strip()
    assert " dcgm=pass " in verdict and "action=resume" in verdict, verdict
    assert calls[1] == ["update", "NodeName=gpu-0", "State=RESUME"]


@needs_python3
def test_a_planted_dcgm_output_is_never_reused(tmp_path: Path) -> None:
    output_dir = tmp_path / "jail-tmp"
    output_dir.mkdir()
    private = output_dir / "nccl-benchmark-gpu-0-4242.AAAAAAAA"
    private.mkdir(mode=0o700)
    (private / "gpu-0-4242.dcgm").symlink_to("/dev/null")
    proc, calls = _run_job(
        tmp_path,
        "380",
        output_dir,
        mktemp_answers=private,
        dcgm="fail PCIe",
        node="scontrol-node-drained-nccl.txt",
    )
    assert proc.returncode == 2, proc.stderr
    line = (private / "gpu-0-4242.verdict").read_text().strip()
    assert line.endswith(f'error="{private}/gpu-0-4242.dcgm exists already: not reusing it"')
    assert calls == [["update", "JobId=4242", f"Comment={line}"]]  # neither drained nor resumed
