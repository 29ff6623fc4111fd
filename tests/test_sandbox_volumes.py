"""emptyDir volumes in the sandbox get the modes the kubelet gives them."""

import subprocess
from pathlib import Path

import pytest

from slurm_stack.sandbox import apply
from slurm_stack.sandbox.plan import Plan, Pod
from slurm_stack.sandbox.state import SandboxState


def test_memory_empty_dir_options_are_the_kubelets() -> None:
    # The kubelet mounts size=<bytes> and leaves tmpfs's root mode, 1777.
    assert apply.tmpfs_options(64 * 2**30) == "mode=1777,size=68719476736"
    assert apply.tmpfs_options(0) == "mode=1777"


def test_memory_empty_dir_is_sticky_and_disk_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, disk = str(tmp_path / "pod" / "ramdisk"), str(tmp_path / "pod" / "scratch")
    mounts: list[list[str]] = []

    def mount(args: list[str], **_: object) -> subprocess.CompletedProcess[bytes]:
        # What mounting a tmpfs does to the directory: its root takes the mode option,
        # 1777 when there is none (tmpfs(5)).
        mounts.append(args)
        options = dict(o.split("=", 1) for o in args[args.index("-o") + 1].split(",") if "=" in o)
        Path(args[-1]).chmod(int(options.get("mode", "1777"), 8))
        return subprocess.CompletedProcess(args, 0, b"", b"")

    monkeypatch.setattr(apply.subprocess, "run", mount)
    pod = Pod(
        name="dev-cpu-0",
        ip="10.0.0.2",
        component="worker",
        phase=0,
        job=False,
        containers=(),
        volume_dirs=(memory, disk),
        memory_dirs=((memory, 2**30),),
    )
    plan = Plan(subnet="10.0.0.0/24", pods=(pod,), hosts={}, empty_dirs=(memory, disk))
    apply._prepare_volumes(plan, pod, SandboxState(tmp_path / "state"))
    assert [args[-1] for args in mounts] == [memory]
    assert Path(memory).stat().st_mode & 0o7777 == 0o1777
    assert Path(disk).stat().st_mode & 0o7777 == 0o777
