"""GPU checks on ``nvidia-smi`` output: the driver answers, the count, ECC and row remapping."""

from __future__ import annotations

from ..context import Context
from ..nvidia_smi import (
    ECC_ARGS,
    GPU_LIST_ARGS,
    RC_NO_DEVICES,
    ParseError,
    parse_ecc,
    parse_gpu_list,
)
from ..registry import check
from ..result import CheckResult
from ..runner import CommandNotFound, CommandResult, CommandTimeout


def _short_error(result: CommandResult) -> str:
    text = (result.stderr or result.stdout).strip().splitlines()
    return f"rc {result.returncode}" + (f": {text[0][:60]}" if text else "")


@check("gpu_driver")
def gpu_driver(ctx: Context) -> CheckResult:
    """``nvidia-smi`` answers the GPU list query within the timeout and exits 0.

    A missing ``nvidia-smi`` fails only on a node that expects GPUs.
    """
    try:
        result = ctx.nvidia_smi(*GPU_LIST_ARGS)
    except CommandTimeout as exc:
        return CheckResult.failed("gpu_driver", f"timeout after {exc.timeout:g}s")
    except CommandNotFound:
        if ctx.config.expected_gpus == 0:
            return CheckResult.passed("gpu_driver", "no nvidia-smi, no GPUs expected")
        return CheckResult.failed("gpu_driver", "nvidia-smi not found")
    if result.returncode not in (0, RC_NO_DEVICES):
        return CheckResult.failed("gpu_driver", _short_error(result))
    return CheckResult.passed("gpu_driver")


@check("gpu_count")
def gpu_count(ctx: Context) -> CheckResult:
    """The driver lists exactly ``expected_gpus`` GPUs (detail ``seen/expected``)."""
    expected = ctx.config.expected_gpus
    try:
        result = ctx.nvidia_smi(*GPU_LIST_ARGS)
    except CommandNotFound:
        seen = 0
    except CommandTimeout:
        return CheckResult.failed("gpu_count", f"?/{expected} (driver timeout)")
    else:
        if result.returncode == RC_NO_DEVICES:
            seen = 0
        else:
            # A lost GPU makes nvidia-smi exit non-zero with an error line among the rows of the
            # GPUs it still sees: count those, and call the output unparsable only on success.
            try:
                seen = len(parse_gpu_list(result.stdout, strict=result.returncode == 0))
            except ParseError:
                return CheckResult.failed("gpu_count", f"?/{expected} (unparsable output)")
            if seen == 0 and result.returncode != 0:
                return CheckResult.failed("gpu_count", f"?/{expected} ({_short_error(result)})")
    detail = f"{seen}/{expected}"
    return CheckResult(name="gpu_count", ok=seen == expected, detail=detail)


@check("gpu_ecc")
def gpu_ecc(ctx: Context) -> CheckResult:
    """No uncorrectable volatile ECC errors, pending page retirement, pending row remap or
    remap failure; fields a GPU does not report (``[N/A]``) do not fail."""
    try:
        result = ctx.nvidia_smi(*ECC_ARGS)
    except CommandTimeout:
        return CheckResult.failed("gpu_ecc", "driver timeout")
    except CommandNotFound:
        if ctx.config.expected_gpus == 0:
            return CheckResult.passed("gpu_ecc", "no GPUs")
        return CheckResult.failed("gpu_ecc", "nvidia-smi not found")
    if result.returncode == RC_NO_DEVICES:
        return CheckResult.passed("gpu_ecc", "no GPUs")
    try:
        rows = parse_ecc(result.stdout)
    except ParseError as exc:
        if result.returncode != 0:
            return CheckResult.failed("gpu_ecc", _short_error(result))
        return CheckResult.failed("gpu_ecc", f"unparsable: {exc}"[:60])
    bad = [f"gpu{row.index} {'+'.join(row.problems())}" for row in rows if row.problems()]
    if bad:
        return CheckResult.failed("gpu_ecc", ", ".join(bad))
    if result.returncode != 0:
        return CheckResult.failed("gpu_ecc", _short_error(result))
    return CheckResult.passed("gpu_ecc")
