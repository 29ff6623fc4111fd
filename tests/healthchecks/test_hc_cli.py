"""The health check end to end, as slurmd runs it, with stand-in tools first on PATH.

No Slurm cluster or GPU exists in this test tier, so ``nvidia-smi``, ``scontrol``, ``munge``,
``unmunge`` and ``dmesg`` are small shell scripts here: the ``nvidia-smi`` one prints recorded
real output (``fixtures/``), the ``scontrol`` one prints a recorded ``show node`` line and
records every argument vector it is called with. This is the only place such stand-ins are used;
the real-cluster tests exercise the real tools.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from slurm_stack_healthchecks.cli import main, run_quick
from slurm_stack_healthchecks.context import Context
from slurm_stack_healthchecks.results_file import read_results

from tests.healthchecks.hc_helpers import (
    FIXTURES,
    HEALTHCHECKS_DIR,
    FakeRunner,
    done,
    make_config,
    private_copy,
)

WRAPPER = HEALTHCHECKS_DIR / "healthcheck"
NODE = "dev-gpu-3"
GPU_CHECKS = ["gpu_driver", "gpu_count", "gpu_ecc", "gpu_xid", "jail", "munge", "disk"]
CPU_CHECKS = ["jail", "munge", "disk"]

FAKE_NVIDIA_SMI = """#!/bin/sh
echo "$*" >> "{calls}/nvidia-smi"
case "$1" in
  --query-gpu=index,name,uuid,pci.bus_id) exec cat "{state}/gpus" ;;
  --query-gpu=index,ecc.*) exec cat "{state}/ecc" ;;
esac
exit 2
"""
FAKE_SCONTROL = """#!/bin/sh
for arg in "$@"; do printf '%s\\t' "$arg"; done >> "{calls}/scontrol"
echo >> "{calls}/scontrol"
if [ "$1" = --oneliner ] && [ "$2" = show ]; then exec cat "{state}/node"; fi
"""
FAKE_MUNGE = "#!/bin/sh\necho 'MUNGE:AwQFAAAWmRN3cXCt6sHb0PhPZ2UTp8t6iH1ZfH8zQmK3wU3v0y3y:'\n"
FAKE_UNMUNGE = "#!/bin/sh\ncat >/dev/null\necho 'STATUS:          Success (0)'\n"
FAKE_DMESG = '#!/bin/sh\nexec cat "{state}/dmesg"\n'


@dataclass
class FakeNode:
    """A worker's tools and files in a temporary directory."""

    root: Path
    socket_dir: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def calls(self) -> Path:
        return self.root / "calls"

    @property
    def config(self) -> Path:
        return self.root / "healthcheck.json"

    def write_config(self, checks: list[str], **extra: object) -> None:
        config = {
            "checks": checks,
            "expected_gpus": 8,
            "gpu_type": "h100",
            "jail_marker": str(self.root / "jail" / ".slurm-stack-populated"),
            "munge_socket": str(self.socket_dir / "munge.socket.2"),
            "disk_paths": [str(self.root)],
            "min_free_disk_percent": 0,
            "xid_source": "dmesg",
            **extra,
        }
        self.config.write_text(json.dumps(config))

    def set(
        self,
        node: str = "scontrol-node-idle.txt",
        gpus: str = "nvidia-smi-gpus-8xh100.csv",
        ecc: str = "nvidia-smi-ecc-8xh100-healthy.csv",
        dmesg: str = "kmsg-xid-benign.txt",
    ) -> None:
        for name, source in (("node", node), ("gpus", gpus), ("ecc", ecc), ("dmesg", dmesg)):
            shutil.copyfile(FIXTURES / source, self.state / name)

    def env(self) -> dict[str, str]:
        # What slurmd passes is close to nothing; PATH leads with the stand-ins.
        return {"PATH": f"{self.root / 'bin'}:/usr/bin:/bin", "SLURMD_NODENAME": NODE}

    def scontrol_calls(self) -> list[tuple[str, ...]]:
        path = self.calls / "scontrol"
        if not path.exists():
            return []
        return [tuple(line.rstrip("\t").split("\t")) for line in path.read_text().splitlines()]

    def updates(self) -> list[tuple[str, ...]]:
        return [c for c in self.scontrol_calls() if c[:1] == ("update",)]

    def nvidia_smi_calls(self) -> list[str]:
        path = self.calls / "nvidia-smi"
        return path.read_text().splitlines() if path.exists() else []

    def run(self, *args: str, own_process: bool = True) -> tuple[int, str, float]:
        """Run the health check (through the wrapper in a fresh interpreter, or in this one via
        ``main()`` where start-up time does not matter); returns status, log line, seconds."""
        argv = ["--config", str(self.config), *args]
        started = time.monotonic()
        if own_process:
            proc = subprocess.run(
                [sys.executable, str(WRAPPER), *argv],
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=30,
            )
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        else:
            for key, value in self.env().items():
                self.monkeypatch.setenv(key, value)
            rc = main(argv)
            out, err = self.capsys.readouterr()
        elapsed = time.monotonic() - started
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1, err  # one line per decision
        return rc, lines[0], elapsed


@pytest.fixture
def fake_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[FakeNode]:
    socket_dir = Path(tempfile.mkdtemp(prefix="hc-"))  # short: unix socket paths are limited
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(socket_dir / "munge.socket.2"))
    node = FakeNode(tmp_path, socket_dir, monkeypatch, capsys)
    for directory in ("bin", "state", "calls", "jail"):
        (tmp_path / directory).mkdir()
    (tmp_path / "jail" / ".slurm-stack-populated").touch()
    fmt = {"calls": node.calls, "state": node.state}
    for name, text in (
        ("nvidia-smi", FAKE_NVIDIA_SMI),
        ("scontrol", FAKE_SCONTROL),
        ("munge", FAKE_MUNGE),
        ("unmunge", FAKE_UNMUNGE),
        ("dmesg", FAKE_DMESG),
    ):
        path = tmp_path / "bin" / name
        path.write_text(text.format(**fmt))
        path.chmod(0o755)
    node.set()
    yield node
    server.close()
    shutil.rmtree(socket_dir)


def _field(line: str, key: str) -> str | None:
    match = re.search(rf'(?:^| ){key}=("(?:[^"\\]|\\.)*"|\S+)', line)
    if match is None:
        return None
    value = match.group(1)
    return json.loads(value) if value.startswith('"') else value


def test_missing_gpu_drains_and_restored_gpu_resumes(fake_node: FakeNode) -> None:
    fake_node.write_config(GPU_CHECKS)
    rc, line, elapsed = fake_node.run()
    assert (rc, _field(line, "result"), _field(line, "action")) == (0, "pass", "none")
    assert _field(line, "node") == NODE  # from $SLURMD_NODENAME
    assert fake_node.updates() == []
    assert elapsed < 10

    fake_node.set(gpus="nvidia-smi-gpus-7of8.csv")
    rc, line, _ = fake_node.run()
    assert rc == 1
    assert re.fullmatch(
        r'healthcheck node=dev-gpu-3 result=fail action=drain reason="healthcheck: gpu_count 7/8"'
        r' why="checks failed" checks=gpu_driver:ok,gpu_count:fail,gpu_ecc:ok,gpu_xid:ok,jail:ok,'
        r"munge:ok,disk:ok took=\d+\.\d\ds",
        line,
    ), line
    assert fake_node.updates() == [
        ("update", f"NodeName={NODE}", "State=DRAIN", "Reason=healthcheck: gpu_count 7/8")
    ]

    fake_node.set(node="scontrol-node-drained-ours.txt", gpus="nvidia-smi-gpus-7of8.csv")
    rc, line, _ = fake_node.run()
    assert (rc, _field(line, "action"), _field(line, "why")) == (
        1,
        "none",
        "already drained with this reason",
    )
    assert len(fake_node.updates()) == 1

    fake_node.set(node="scontrol-node-drained-ours.txt")
    rc, line, _ = fake_node.run()
    assert (rc, _field(line, "result"), _field(line, "action")) == (0, "pass", "resume")
    assert fake_node.updates()[-1] == ("update", f"NodeName={NODE}", "State=RESUME")
    assert fake_node.scontrol_calls()[0] == ("--oneliner", "show", "node", NODE)


def test_several_failures_make_one_reason(fake_node: FakeNode) -> None:
    # The fixture's XID is logged 86391 s after boot: with the default one-hour window it
    # would count only on a host up for less than 25 hours, so count every XID since boot.
    fake_node.write_config(GPU_CHECKS, xid_window_seconds=None)
    fake_node.set(ecc="nvidia-smi-ecc-uncorrectable.csv", dmesg="kmsg-xid79.txt")
    (fake_node.root / "jail" / ".slurm-stack-populated").unlink()
    rc, line, _ = fake_node.run("--node", "dev-gpu-7", own_process=False)
    reason = (
        "healthcheck: gpu_ecc gpu4 uncorrectable 2+remap pending; gpu_xid 79@0000:5d:00; "
        "jail marker missing"
    )
    assert (rc, _field(line, "reason"), _field(line, "node")) == (1, reason, "dev-gpu-7")
    assert fake_node.updates() == [
        ("update", "NodeName=dev-gpu-7", "State=DRAIN", f"Reason={reason}")
    ]


def test_an_admin_drain_is_never_touched(fake_node: FakeNode) -> None:
    fake_node.write_config(GPU_CHECKS)
    fake_node.set(node="scontrol-node-drained-admin.txt", gpus="nvidia-smi-gpus-7of8.csv")
    rc, line, _ = fake_node.run(own_process=False)
    assert (rc, _field(line, "action")) == (1, "none")
    assert _field(line, "why") == "held by other reason: replacing PSU, ticket 4711"
    fake_node.set(node="scontrol-node-drained-admin.txt")
    rc, line, _ = fake_node.run(own_process=False)
    assert (rc, _field(line, "result"), _field(line, "action")) == (0, "pass", "none")
    assert fake_node.updates() == []


def test_cpu_node_is_fast_and_never_runs_nvidia_smi(fake_node: FakeNode) -> None:
    fake_node.write_config(CPU_CHECKS, expected_gpus=0, gpu_type=None)
    rc, line, elapsed = fake_node.run()
    assert (rc, _field(line, "checks")) == (0, "jail:ok,munge:ok,disk:ok")
    assert fake_node.nvidia_smi_calls() == []
    assert elapsed < 1.0  # the whole process, interpreter start included
    assert float(_field(line, "took").rstrip("s")) < 0.5


def test_hung_driver_bounds_the_gpu_node_run(fake_node: FakeNode) -> None:
    fake_node.write_config(GPU_CHECKS, nvidia_smi_timeout_seconds=0.2)
    hang = fake_node.root / "bin" / "nvidia-smi"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    rc, line, elapsed = fake_node.run()
    assert rc == 1
    assert _field(line, "reason").startswith(
        "healthcheck: gpu_driver timeout after 0.2s; gpu_count ?/8 (driver timeout); "
        "gpu_ecc driver timeout"
    )
    assert elapsed < 2.0  # one nvidia-smi timeout, not one per GPU check


def test_dry_run_changes_nothing(fake_node: FakeNode) -> None:
    fake_node.write_config(GPU_CHECKS)
    fake_node.set(gpus="nvidia-smi-gpus-7of8.csv")
    rc, line, _ = fake_node.run("--dry-run", own_process=False)
    assert (rc, _field(line, "action"), _field(line, "dry_run")) == (1, "drain", "yes")
    assert fake_node.updates() == []


def test_a_broken_config_leaves_the_node_alone(fake_node: FakeNode) -> None:
    fake_node.config.write_text('{"checks": ["gpu_cnt"]}')
    rc, line, _ = fake_node.run(own_process=False)
    assert (rc, _field(line, "result"), _field(line, "action")) == (2, "error", "none")
    assert "unknown check 'gpu_cnt'" in _field(line, "error")
    assert fake_node.scontrol_calls() == []


def test_scontrol_unreachable_is_reported_and_nothing_is_done(fake_node: FakeNode) -> None:
    fake_node.write_config(CPU_CHECKS)
    (fake_node.root / "bin" / "scontrol").write_text(
        "#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n"
    )
    rc, line, _ = fake_node.run(own_process=False)
    assert (rc, _field(line, "action"), _field(line, "why")) == (1, "none", "node state unknown")
    assert "Unable to contact slurm controller" in _field(line, "error")


def test_a_node_not_registered_yet_is_checked_and_left_for_the_next_run(
    fake_node: FakeNode,
) -> None:
    # slurmd runs the first check while its dynamic node is still registering.
    fake_node.write_config(CPU_CHECKS)
    (fake_node.root / "bin" / "scontrol").write_text(
        f"#!/bin/sh\necho 'Node {NODE} not found' >&2\nexit 1\n"
    )
    rc, line, _ = fake_node.run(own_process=False)
    assert (rc, _field(line, "result"), _field(line, "action")) == (0, "pass", "none")
    assert _field(line, "why") == "node not registered yet"
    assert "error=" not in line


def _verdict_args(output: Path, *extra: str) -> list[str]:
    return [
        "nccl-verdict",
        "--output",
        str(output),
        "--gpu-type",
        "H100",
        "--thresholds",
        '{"h100": 350, "h200": 420}',
        *extra,
    ]


def _verdict(fake_node: FakeNode, output: str | Path, *extra: str) -> tuple[int, str]:
    """``nccl-verdict`` in this interpreter, the stand-in scontrol first on PATH, on a copy of
    fixture ``output`` left as the benchmark job leaves it (or on the path ``output``)."""
    fake_node.monkeypatch.setenv("PATH", fake_node.env()["PATH"])
    if isinstance(output, str):
        job_dir = fake_node.root / "job"
        output = private_copy(job_dir, output) if (FIXTURES / output).exists() else job_dir / output
    rc = main(_verdict_args(output, *extra))
    out, err = fake_node.capsys.readouterr()
    assert err == ""
    return rc, out.strip()


def test_nccl_verdict_command_as_the_job_calls_it(tmp_path: Path) -> None:
    output = private_copy(tmp_path / "job", "all_reduce_perf-8xh100-slow.txt")
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_stack_healthchecks", *_verdict_args(output)],
        cwd=HEALTHCHECKS_DIR,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (proc.returncode, proc.stderr) == (1, "")
    assert re.fullmatch(
        r"nccl-verdict result=fail gpu_type=H100 output=\S+all_reduce_perf-8xh100-slow.txt "
        r'busbw=200.07 threshold=350 reason="healthcheck: nccl busbw 200.0<350 GB/s"\n',
        proc.stdout,
    ), proc.stdout


def test_nccl_verdict_pass_and_unusable_output(fake_node: FakeNode) -> None:
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-pass.txt")
    assert rc == 0
    assert line.startswith("nccl-verdict result=pass gpu_type=H100 output=")
    assert line.endswith("busbw=365.38 threshold=350")
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-crashed.txt")
    assert (rc, _field(line, "result")) == (2, "error")
    assert "did not finish" in _field(line, "error")
    rc, line = _verdict(fake_node, "no-such-output.txt")
    assert (rc, _field(line, "error")) == (2, "cannot read output: No such file or directory")
    assert fake_node.scontrol_calls() == []


def test_nccl_verdict_unknown_gpu_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _verdict_args(private_copy(tmp_path / "job", "all_reduce_perf-8xh100-pass.txt"))
    args[args.index("H100")] = "b200"
    assert main(args) == 2
    assert _field(capsys.readouterr().out, "error") == (
        "no NCCL busbw threshold for GPU type 'b200' (known: h100, h200)"
    )


def test_nccl_verdict_drains_the_slow_node_only_by_its_own_rules(fake_node: FakeNode) -> None:
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-slow.txt", "--node", "dev-gpu-5")
    assert (rc, _field(line, "action")) == (1, "drain")
    assert fake_node.updates() == [
        (
            "update",
            "NodeName=dev-gpu-5",
            "State=DRAIN",
            "Reason=healthcheck: nccl busbw 200.0<350 GB/s",
        )
    ]
    fake_node.set(node="scontrol-node-drained-ours.txt")  # a quick-check drain stays
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-pass.txt", "--node", "dev-gpu-5")
    assert (rc, _field(line, "action")) == (0, "none")
    fake_node.set(node="scontrol-node-drained-nccl.txt")
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-pass.txt", "--node", "dev-gpu-5")
    assert (rc, _field(line, "action")) == (0, "resume")
    assert len(fake_node.updates()) == 2


def test_nccl_verdict_judges_the_level_3_diagnostic_with_the_benchmark(
    fake_node: FakeNode,
) -> None:
    job = fake_node.root / "job"
    dcgm = private_copy(job, "dcgmi-diag-r3-fail.txt")
    args = ("--node", "dev-gpu-5", "--dcgm-output", str(dcgm), "--dcgm-exit", "226")
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-pass.txt", *args)
    assert (rc, _field(line, "dcgm"), _field(line, "action")) == (
        1,
        "fail Targeted Stress",
        "drain",
    )
    assert _field(line, "reason") == "healthcheck: nccl dcgm fail Targeted Stress"
    # A benchmark that left no result is no verdict, but the failed diagnostic still is one.
    rc, line = _verdict(fake_node, "no-such-output.txt", *args)
    assert (rc, _field(line, "reason")) == (1, "healthcheck: nccl dcgm fail Targeted Stress")
    assert _field(line, "nccl_error") == "cannot read output: No such file or directory"
    # timeout's and the shell's own exit statuses name what happened.
    for status, failure in (("124", "timeout"), ("127", "dcgmi not installed in the jail")):
        rc, line = _verdict(
            fake_node,
            "all_reduce_perf-8xh100-pass.txt",
            "--dcgm-output",
            str(dcgm),
            "--dcgm-exit",
            status,
        )
        assert (rc, _field(line, "dcgm")) == (1, failure)
    # A diagnostic output somebody else could have written is no verdict at all.
    dcgm.chmod(0o666)
    rc, line = _verdict(fake_node, "all_reduce_perf-8xh100-slow.txt", *args)
    assert (rc, _field(line, "result")) == (2, "error")
    assert _field(line, "error").startswith("refused dcgm output: ")
    assert len(fake_node.updates()) == 2


def _forged(fake_node: FakeNode, name: str, how: str) -> Path:
    """Fixture ``name`` where the job's output would be, put there by somebody else."""
    job_dir = fake_node.root / "job"
    job_dir.mkdir(mode=0o700, exist_ok=True)
    output = job_dir / "dev-gpu-5-77.out"
    if how == "symlink":  # to a file of ours elsewhere: the link is what is refused
        output.symlink_to(private_copy(fake_node.root / "elsewhere", name))
    elif how == "world-writable":
        shutil.copyfile(FIXTURES / name, output)
        output.chmod(0o666)
    elif how == "shared-directory":  # a file of ours, but in a directory all can write
        job_dir.chmod(0o1777)
        shutil.copyfile(FIXTURES / name, output)
        output.chmod(0o600)
    else:  # "other-owner"
        shutil.copyfile(FIXTURES / name, output)
        output.chmod(0o644)
        os.chown(output, 54321, 54321)
    return output


@pytest.mark.parametrize(
    "how",
    [
        "symlink",
        "world-writable",
        "shared-directory",
        pytest.param(
            "other-owner",
            marks=pytest.mark.skipif(
                os.geteuid() != 0, reason="os.chown to another uid needs root"
            ),
        ),
    ],
)
def test_a_refused_output_is_no_verdict_and_leaves_the_node_as_it_is(
    fake_node: FakeNode, how: str
) -> None:
    # A forged slow result must not drain a healthy node...
    rc, line = _verdict(
        fake_node, _forged(fake_node, "all_reduce_perf-8xh100-slow.txt", how), "--node", "n"
    )
    assert (rc, _field(line, "result"), _field(line, "action")) == (2, "error", None)
    assert _field(line, "error").startswith("refused output: ")
    shutil.rmtree(fake_node.root / "job")
    # ... nor a forged passing one return a node the benchmark drained to service.
    fake_node.set(node="scontrol-node-drained-nccl.txt")
    rc, line = _verdict(
        fake_node, _forged(fake_node, "all_reduce_perf-8xh100-pass.txt", how), "--node", "n"
    )
    assert (rc, _field(line, "result")) == (2, "error")
    assert fake_node.scontrol_calls() == []  # not even asked: the node is left alone


def test_the_owner_can_be_named_for_a_reader_that_is_not_the_job(fake_node: FakeNode) -> None:
    output = private_copy(fake_node.root / "job", "all_reduce_perf-8xh100-pass.txt")
    rc, line = _verdict(fake_node, output, "--owner-uid", str(os.geteuid() + 1))
    assert (rc, _field(line, "error")) == (
        2,
        f"refused output: directory {output.parent} is owned by uid {os.geteuid()}, "
        f"not {os.geteuid() + 1}",
    )
    rc, line = _verdict(fake_node, output, "--owner-uid", str(os.geteuid()))
    assert (rc, _field(line, "result")) == (0, "pass")


@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK), reason="no /usr/bin/python3")
def test_wrapper_runs_through_a_symlink_with_its_shebang(fake_node: FakeNode) -> None:
    link = fake_node.root / "bin" / "healthcheck"
    link.symlink_to(WRAPPER)
    fake_node.write_config(CPU_CHECKS)
    proc = subprocess.run(
        [str(link), "--config", str(fake_node.config)],
        env=fake_node.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"healthcheck node={NODE} result=pass action=none")


def test_run_quick_in_process_with_a_scripted_runner(tmp_path: Path) -> None:
    runner = FakeRunner(
        {
            ("scontrol", "--oneliner"): done((FIXTURES / "scontrol-node-idle.txt").read_text()),
            ("scontrol", "update"): done(),
        }
    )
    config = make_config(checks=["disk"], disk_paths=[str(tmp_path)], min_free_disk_percent=0)
    log = _Log()
    started = time.monotonic()
    rc = run_quick(Path("/unused"), "n1", False, log, context=Context(config, runner=runner))
    assert time.monotonic() - started < 1.0
    assert rc == 0
    assert log.text.startswith(
        "healthcheck node=n1 result=pass action=none why=healthy checks=disk:ok took="
    )
    assert runner.argvs() == [("scontrol", "--oneliner", "show", "node", "n1")]


def test_each_run_leaves_the_nodes_results_for_the_exporter(tmp_path: Path) -> None:
    runner = FakeRunner(
        {
            ("scontrol", "--oneliner"): done((FIXTURES / "scontrol-node-idle.txt").read_text()),
            ("scontrol", "update"): done(),
        }
    )
    results_dir = tmp_path / "results"
    config = make_config(
        checks=["disk"],
        disk_paths=[str(tmp_path)],
        min_free_disk_percent=0,
        results_dir=str(results_dir),
    )
    before = time.time()
    rc = run_quick(Path("/unused"), "n1", False, _Log(), context=Context(config, runner=runner))
    assert rc == 0
    latest = read_results(results_dir, "n1")
    assert latest is not None and before <= latest.finished <= time.time()
    [disk] = latest.checks
    assert disk.name == "disk" and disk.ok and 0 < disk.seconds <= latest.seconds

    # A directory others could write is refused and named in the log line; the node's
    # health alone decides the exit status.
    results_dir.chmod(0o777)
    log = _Log()
    rc = run_quick(Path("/unused"), "n1", False, log, context=Context(config, runner=runner))
    assert rc == 0
    assert re.search(r'results_error=".*writable by group or others"', log.text), log.text
    assert read_results(results_dir, "n1") == latest  # the old file is left as it was


def test_a_dry_run_leaves_no_results(tmp_path: Path) -> None:
    runner = FakeRunner(
        {("scontrol", "--oneliner"): done((FIXTURES / "scontrol-node-idle.txt").read_text())}
    )
    config = make_config(
        checks=["disk"],
        disk_paths=[str(tmp_path)],
        min_free_disk_percent=0,
        results_dir=str(tmp_path / "results"),
    )
    run_quick(Path("/unused"), "n1", True, _Log(), context=Context(config, runner=runner))
    assert not (tmp_path / "results").exists()


class _Log:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass
