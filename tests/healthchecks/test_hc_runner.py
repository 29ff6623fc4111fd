"""The real command runner: output, stdin, missing programs, and timeouts that really bound."""

import time
from pathlib import Path

import pytest
from slurm_stack_healthchecks.runner import CommandNotFound, CommandTimeout, run_command


def test_output_and_exit_status() -> None:
    result = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=5)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.argv == ("sh", "-c", "echo out; echo err >&2; exit 3")


def test_stdin_is_passed() -> None:
    assert run_command(["cat"], timeout=5, stdin="credential\n").stdout == "credential\n"


def test_missing_program() -> None:
    with pytest.raises(CommandNotFound, match="no-such-tool-xyz: not found"):
        run_command(["no-such-tool-xyz"], timeout=5)


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # A wrapper script whose child keeps stdout open: killing only the shell would leave
    # communicate() waiting for the grandchild.
    script = tmp_path / "hang"
    script.write_text("#!/bin/sh\nsleep 30 &\nsleep 30\n")
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match=r"timeout after 0.1s") as info:
        run_command([str(script)], timeout=0.1)
    assert info.value.timeout == 0.1
    assert time.monotonic() - started < 1.5
