"""``nccl-submit``: one exclusive, low-priority ``all_reduce_perf`` job per idle GPU node.

Run by the NCCL benchmark CronJob's pod as the Slurm user, with the Slurm client tools and the
cluster's ``slurm.conf``. Configured by environment variables:

``NCCL_GPU_POOLS`` (required)
    JSON object, pool name → GPU type: ``{"gpu": "h100"}``. A node belongs to a pool when its
    features include the pool's name. An empty type takes the type from the node's Gres.
``NCCL_THRESHOLDS_GBPS`` (required)
    JSON object, GPU type → average bus bandwidth in GB/s: ``{"h100": 350}``; every type named
    in ``NCCL_GPU_POOLS`` needs one.
``NCCL_MIN_BYTES``, ``NCCL_MAX_BYTES`` (required)
    ``all_reduce_perf -b``/``-e`` message sizes: a whole number with an optional ``K``, ``M``,
    ``G`` or ``T`` (``Ki``, ``Mi``... mean the same): powers of 1024, as ``all_reduce_perf``
    reads them, so ``512M`` is 536870912. Passed on as plain byte counts.
``NCCL_ALL_REDUCE_PERF`` (default ``all_reduce_perf``)
    The benchmark binary in the jail: a name on the job's ``PATH`` or an absolute path.
``NCCL_OUTPUT_DIR`` (default ``/tmp``)
    Absolute path of an existing directory, in the jail, in which each job creates its own
    private directory for its results (see below). The job creates nothing else there.
``NCCL_TIME_LIMIT_MINUTES`` (default 30)
    The benchmark's share of the job's ``--time`` (2 to 1440); the benchmark is killed 90 s
    before it so the verdict still runs.
``NCCL_DCGM_TIMEOUT_SECONDS`` (default: unset, no DCGM)
    Run ``dcgmi diag -r 3`` before the benchmark, for at most this many seconds (60 to 14400);
    the job's ``--time`` grows by as many minutes. Its output is judged with the benchmark's.

Which nodes: ``sinfo`` (see :mod:`.sinfo`) nodes in a configured pool whose state is exactly
``idle`` (not drained, mixed, allocated, down, powered down or not responding), with at least
two GPUs in their Gres (one GPU has no peer to all-reduce with) and no benchmark job of ours
already pending or running for them (``squeue --me``).

The job (``sbatch --parsable``, script on stdin): ``--nodelist=<node> --nodes=1 --ntasks=1
--exclusive --gres=gpu:<count> --nice=10000`` (so any user job goes first), a bounded
``--time``, ``--no-requeue``, the node's partition (its default one if it is in it), the
comment ``slurm-stack nccl benchmark ...``.

Where the output goes. The script runs inside the jail (the chroot plugin enters it before the
script starts) as the submitting user, the Slurm user; the submitter's pod does not see the
jail, and Slurm opens ``--output`` before the script runs, following symlinks, so no file the
job could name in a shared directory such as ``/tmp`` is safe for it: ``--output=/dev/null``.
The script first creates a directory private to the job, ``mktemp -d`` in ``NCCL_OUTPUT_DIR``
(``nccl-benchmark-<node>-<jobid>.XXXXXXXX``: a fresh random name, mode 0700, created by
``mkdir``, which never reuses or follows what exists); when it cannot, there is no verdict:
never a fallback to a shared or predictable path. Every file in it is created with
``noclobber`` (``O_CREAT|O_EXCL``; a name that exists, even as a symlink or FIFO, is refused
before it is opened), and the job fails loudly rather than reuse one: ``<node>-<jobid>.out``
(the full ``all_reduce_perf`` output, written through the one descriptor that created it),
``<node>-<jobid>.log`` (the script's own stdout and stderr), ``<node>-<jobid>.dcgm`` (the
``dcgmi diag -r 3`` output, when configured) and ``<node>-<jobid>.verdict``.
The verdict comes from ``healthcheck nccl-verdict --node <node>``, run by the job itself as the
same user, which reads the outputs only as that user's own files in a private directory (see
:func:`.nccl.read_output`) and drains or resumes the node with a ``healthcheck: nccl`` reason
(``healthcheck: nccl dcgm ...`` for a failed diagnostic).
The script then sets the job's comment to the verdict line (best effort; its ``output=`` names
the private directory) and exits with the verdict's status (0 pass, 1 fail, 2 no verdict), so
``sacct`` shows a failing benchmark as ``FAILED``. With no verdict (no private directory, an
output file that exists already or is refused, no result in it) the node is left as it is.

Logs one line per node to stderr (``action=submit`` / ``skip`` / ``error``) and a summary line.
Exit 0 when every submission succeeded (or none was due), 1 when an ``sbatch``, ``sinfo`` or
``squeue`` failed, 2 when the environment is unusable (nothing is submitted).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from .logline import format_line
from .nccl import ThresholdError, parse_thresholds, select_threshold
from .runner import CommandError, Runner
from .sinfo import NodeInfo, SinfoError, list_nodes, parse_gpu_gres, query

HEALTHCHECK_PROGRAM = "/usr/lib/slurm-stack/healthcheck"
JOB_NAME = "nccl-benchmark"
NICE = 10000
# Appended to the job's PATH (sbatch passes on the submitter's), so the basics are there.
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Seconds the benchmark gets less than the job's time limit, so the verdict still runs.
_VERDICT_MARGIN_SECONDS = 90
_COMMAND_TIMEOUT = 30.0
_TOOL = "nccl-submit"

ENV_POOLS = "NCCL_GPU_POOLS"
ENV_THRESHOLDS = "NCCL_THRESHOLDS_GBPS"
ENV_MIN_BYTES = "NCCL_MIN_BYTES"
ENV_MAX_BYTES = "NCCL_MAX_BYTES"
ENV_BINARY = "NCCL_ALL_REDUCE_PERF"
ENV_OUTPUT_DIR = "NCCL_OUTPUT_DIR"
ENV_TIME_LIMIT = "NCCL_TIME_LIMIT_MINUTES"
ENV_DCGM_TIMEOUT = "NCCL_DCGM_TIMEOUT_SECONDS"
DCGM_LEVEL = "3"
# sbatch hands the submitter's environment to the job; NCCL reads NCCL_* variables, so the
# job script drops ours.
_OWN_ENV = (
    ENV_POOLS,
    ENV_THRESHOLDS,
    ENV_MIN_BYTES,
    ENV_MAX_BYTES,
    ENV_BINARY,
    ENV_OUTPUT_DIR,
    ENV_TIME_LIMIT,
    ENV_DCGM_TIMEOUT,
)

_SIZE_RE = re.compile(r"^(?P<number>\d+)(?P<unit>[kmgt]i?)?$", re.I)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
SQUEUE_ARGV = (
    "squeue",
    "--noheader",
    "--all",
    "--me",
    f"--name={JOB_NAME}",
    "--states=PENDING,CONFIGURING,RUNNING,COMPLETING",
    "--format=%i|%n|%N",
)


class SubmitConfigError(ValueError):
    """An environment variable is missing or invalid; the message names it."""


@dataclass(frozen=True)
class SubmitConfig:
    """The validated environment; see the module docstring."""

    pools: dict[str, str]
    thresholds: dict[str, float]
    min_bytes: int
    max_bytes: int
    all_reduce_perf: str = "all_reduce_perf"
    output_dir: str = "/tmp"
    time_limit_minutes: int = 30
    dcgm_timeout_seconds: int | None = None

    @property
    def job_minutes(self) -> int:
        """The job's ``--time``: the benchmark's share plus the diagnostic's, rounded up."""
        return self.time_limit_minutes + -(-(self.dcgm_timeout_seconds or 0) // 60)


@dataclass(frozen=True)
class Target:
    """A node to benchmark."""

    node: str
    pool: str
    gpu_type: str
    gpus: int
    partition: str
    threshold: float


@dataclass(frozen=True)
class Skip:
    """A node left out, and why."""

    node: str
    why: str
    pool: str | None = None


def parse_size(text: str) -> int:
    """``"512M"`` → 536870912 (powers of 1024, as ``all_reduce_perf``); raises ``ValueError``."""
    match = _SIZE_RE.match(text.strip())
    if match is None or int(match["number"]) == 0:
        raise ValueError(f"{text!r} is not a size like 512M, 8G or 1048576")
    return int(match["number"]) * _UNITS[(match["unit"] or "")[:1].lower()]


def _required(environ: Mapping[str, str], name: str, example: str) -> str:
    value = environ.get(name, "").strip()
    if not value:
        raise SubmitConfigError(f"{name} is not set; expected e.g. {name}={example}")
    return value


def _pools(text: str) -> dict[str, str]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SubmitConfigError(f"{ENV_POOLS} is not valid JSON: {exc.msg}") from None
    if not isinstance(raw, dict) or not raw:
        raise SubmitConfigError(
            f'{ENV_POOLS} must be a non-empty JSON object of pool name to GPU type, e.g. {{"gpu": '
            '"h100"}'
        )
    for pool, gpu_type in raw.items():
        if not pool.strip() or not isinstance(gpu_type, str):
            raise SubmitConfigError(
                f"{ENV_POOLS}: pool {pool!r} needs a non-empty name and a GPU type string "
                '(e.g. "h100"; "" takes it from the node\'s Gres)'
            )
    return {pool: gpu_type.strip() for pool, gpu_type in raw.items()}


def _size(environ: Mapping[str, str], name: str, example: str) -> int:
    try:
        return parse_size(_required(environ, name, example))
    except ValueError as exc:
        raise SubmitConfigError(f"{name}: {exc}") from None


def load_submit_config(environ: Mapping[str, str]) -> SubmitConfig:
    """Validate the environment; raises :class:`SubmitConfigError` naming the variable."""
    pools = _pools(_required(environ, ENV_POOLS, '\'{"gpu": "h100"}\''))
    try:
        thresholds = parse_thresholds(_required(environ, ENV_THRESHOLDS, "'{\"h100\": 350}'"))
    except ThresholdError as exc:
        raise SubmitConfigError(f"{ENV_THRESHOLDS}: {exc}") from None
    for pool, gpu_type in pools.items():
        if gpu_type and gpu_type.lower() not in thresholds:
            known = ", ".join(sorted(thresholds))
            raise SubmitConfigError(
                f"{ENV_THRESHOLDS} has no threshold for GPU type {gpu_type!r} of pool "
                f"{pool!r} (it has: {known})"
            )
    min_bytes = _size(environ, ENV_MIN_BYTES, "512M")
    max_bytes = _size(environ, ENV_MAX_BYTES, "8G")
    if min_bytes > max_bytes:
        raise SubmitConfigError(
            f"{ENV_MIN_BYTES} ({min_bytes} bytes) must not exceed {ENV_MAX_BYTES} "
            f"({max_bytes} bytes)"
        )
    binary = environ.get(ENV_BINARY, "").strip() or SubmitConfig.all_reduce_perf
    if any(c in binary for c in "\n\0"):
        raise SubmitConfigError(f"{ENV_BINARY} must be a program name or path on one line")
    output_dir = environ.get(ENV_OUTPUT_DIR, "").strip() or SubmitConfig.output_dir
    # No quote or backslash: the job's error lines quote paths under it in key="value" form.
    if not output_dir.startswith("/") or any(c in output_dir for c in '\n\0"\\'):
        raise SubmitConfigError(
            f"{ENV_OUTPUT_DIR} must be an absolute path without newlines, double quotes or "
            f"backslashes, got {output_dir!r}"
        )
    limit_text = environ.get(ENV_TIME_LIMIT, "").strip() or str(SubmitConfig.time_limit_minutes)
    if not limit_text.isdigit() or not 2 <= int(limit_text) <= 1440:
        raise SubmitConfigError(f"{ENV_TIME_LIMIT} must be whole minutes from 2 to 1440")
    dcgm_text = environ.get(ENV_DCGM_TIMEOUT, "").strip()
    if dcgm_text and (not dcgm_text.isdigit() or not 60 <= int(dcgm_text) <= 14400):
        raise SubmitConfigError(f"{ENV_DCGM_TIMEOUT} must be whole seconds from 60 to 14400")
    return SubmitConfig(
        pools,
        thresholds,
        min_bytes,
        max_bytes,
        binary,
        output_dir.rstrip("/") or "/",
        int(limit_text),
        int(dcgm_text) if dcgm_text else None,
    )


def plan(
    config: SubmitConfig, nodes: list[NodeInfo], queued: Mapping[str, str]
) -> list[Target | Skip]:
    """A :class:`Target` or :class:`Skip` for every node, in order; ``queued`` maps node names
    to the id of a benchmark job already pending or running there."""
    return [_plan_node(config, node, queued) for node in nodes]


def _plan_node(config: SubmitConfig, node: NodeInfo, queued: Mapping[str, str]) -> Target | Skip:
    pool = next((p for p in config.pools if p in node.features), None)
    if pool is None:
        return Skip(node.name, "not in a GPU pool")
    if node.state.lower() != "idle":
        return Skip(node.name, f"state {node.state}", pool)
    if node.name in queued:
        return Skip(node.name, f"benchmark job {queued[node.name]} already queued", pool)
    try:
        gres = parse_gpu_gres(node.gres)
    except ValueError as exc:
        return Skip(node.name, str(exc), pool)
    if gres.count == 0:
        return Skip(node.name, f"no GPUs in Gres {node.gres!r}", pool)
    if gres.count == 1:
        # all_reduce_perf on one GPU moves no data between GPUs: its bus bandwidth is 0 by
        # definition (2(n-1)/n of the algorithm bandwidth), which would drain a healthy node.
        return Skip(node.name, "one GPU: no peer to all-reduce with", pool)
    gpu_type = config.pools[pool]
    if not gpu_type:
        if len(gres.types) != 1:
            return Skip(node.name, "no GPU type: set the pool's gpuType", pool)
        gpu_type = gres.types[0]
    try:
        threshold = select_threshold(config.thresholds, gpu_type)
    except ThresholdError as exc:
        return Skip(node.name, str(exc), pool)
    if node.partition is None:
        return Skip(node.name, "in no partition", pool)
    return Target(node.name, pool, gpu_type, gres.count, node.partition, threshold)


def job_script(config: SubmitConfig, target: Target, healthcheck: str = HEALTHCHECK_PROGRAM) -> str:
    """The batch script for ``target``; every value is shell-quoted."""
    q = shlex.quote
    thresholds = json.dumps({target.gpu_type: target.threshold})
    bench_seconds = config.time_limit_minutes * 60 - _VERDICT_MARGIN_SECONDS
    bench = [
        config.all_reduce_perf,
        "-b",
        str(config.min_bytes),
        "-e",
        str(config.max_bytes),
        "-f",
        "2",
        "-g",
        str(target.gpus),
    ]
    verdict = (
        f'{q(healthcheck)} nccl-verdict --output "$result" --node "$node" \\\n'
        f"  --gpu-type {q(target.gpu_type)} --thresholds {q(thresholds)}"
        + (' --dcgm-output "$dcgm" --dcgm-exit "$dcgm_rc"' if config.dcgm_timeout_seconds else "")
    )
    dcgm = _dcgm_step(config.dcgm_timeout_seconds) if config.dcgm_timeout_seconds else ""
    return f"""#!/bin/bash
# slurm-stack NCCL benchmark, submitted by `healthcheck nccl-submit`; runs in the jail.
# Results go only into a directory this job creates for itself, every file in it is created new
# (noclobber) and a refused or missing result is no verdict: the node is left as it is.
set -u -o noclobber
umask 077
export PATH="${{PATH:+$PATH:}}"{q(JOB_PATH)}
unset {" ".join(_OWN_ENV)}
node={q(target.node)}
base={q(config.output_dir)}
dir=
finish() {{  # the verdict line: stdout, the private directory, the job's comment; then exit
  printf '%s\\n' "$1"
  if [ -n "$dir" ]; then printf '%s\\n' "$1" >"$dir/$node-$SLURM_JOB_ID.verdict" || true; fi
  scontrol update JobId="$SLURM_JOB_ID" Comment="$1" >/dev/null 2>&1 || true
  exit "$2"
}}
no_verdict() {{  # the node is neither drained nor resumed
  echo "nccl-benchmark: $1" >&2
  finish "nccl-verdict result=error node=$node error=\\"$1\\"" 2
}}
if ! dir=$(mktemp -d -- "$base/{JOB_NAME}-$node-$SLURM_JOB_ID.XXXXXXXX"); then
  dir=
  no_verdict "cannot create a private directory in $base; no fallback"
fi
cd -- "$dir" || no_verdict "cannot enter $dir"
if [ -e "$node-$SLURM_JOB_ID.log" ] || [ -L "$node-$SLURM_JOB_ID.log" ] ||
  ! exec >"$node-$SLURM_JOB_ID.log" 2>&1; then
  no_verdict "$dir/$node-$SLURM_JOB_ID.log exists already: not reusing it"
fi
result="$dir/$node-$SLURM_JOB_ID.out"
# noclobber opens a name that does not exist with O_EXCL; one that exists (a file, a symlink,
# a FIFO) is refused here, never opened.
if [ -e "$result" ] || [ -L "$result" ] || ! exec 3>"$result"; then
  no_verdict "$result exists already: not reusing it"
fi
{dcgm}timeout --kill-after=30 {bench_seconds} {shlex.join(bench)} >&3 2>&1 3>&-
rc=$?
exec 3>&-
if [ "$rc" != 0 ]; then
  echo "nccl-benchmark: all_reduce_perf exited $rc (124: timed out); output in $result" >&2
fi
verdict=$({verdict})
status=$?
if [ -z "$verdict" ]; then
  verdict="nccl-verdict result=error node=$node error=\\"healthcheck exited $status\\""
fi
finish "$verdict" "$status"
"""


def _dcgm_step(timeout_seconds: int) -> str:
    """The script's lines that run ``dcgmi diag -r 3`` into its own new file in the private
    directory; ``$dcgm_rc`` keeps its exit status (124 or 137: timed out, 127: no dcgmi)."""
    return f"""dcgm="$dir/$node-$SLURM_JOB_ID.dcgm"
if [ -e "$dcgm" ] || [ -L "$dcgm" ] || ! exec 4>"$dcgm"; then
  no_verdict "$dcgm exists already: not reusing it"
fi
timeout --kill-after=30 {timeout_seconds} dcgmi diag -r {DCGM_LEVEL} >&4 2>&1 3>&- 4>&-
dcgm_rc=$?
exec 4>&-
"""


def sbatch_argv(config: SubmitConfig, target: Target) -> list[str]:
    """The ``sbatch`` command for ``target``; the script (:func:`job_script`) goes on stdin."""
    comment = (
        f"slurm-stack nccl benchmark: pool {target.pool}, {target.gpus}x {target.gpu_type}, "
        f"threshold {target.threshold:g} GB/s"
    )
    return [
        "sbatch",
        "--parsable",
        f"--job-name={JOB_NAME}",
        f"--partition={target.partition}",
        f"--nodelist={target.node}",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        f"--gres=gpu:{target.gpus}",
        f"--nice={NICE}",
        f"--time={config.job_minutes}",
        "--no-requeue",
        "--chdir=/tmp",
        # Slurm opens it as the job's user before the script runs, following symlinks: no path
        # in a shared directory is safe. The script keeps its own log in its private directory.
        "--output=/dev/null",
        f"--comment={comment}",
    ]


def queued_benchmarks(runner: Runner, timeout: float) -> dict[str, str]:
    """Node name → job id of our benchmark jobs not yet finished; raises :class:`SinfoError`."""
    queued: dict[str, str] = {}
    for line in query(runner, SQUEUE_ARGV, timeout).splitlines():
        job_id, _, nodes = line.strip().partition("|")
        for name in nodes.replace("|", ",").split(","):
            if name.strip() and name.strip().lower() not in ("(null)", "n/a"):
                queued.setdefault(name.strip(), job_id)
    return queued


def _submit(config: SubmitConfig, target: Target, runner: Runner) -> tuple[str | None, str]:
    """``(job id, "")`` or ``(None, error)``."""
    argv = sbatch_argv(config, target)
    try:
        result = runner(argv, timeout=_COMMAND_TIMEOUT, stdin=job_script(config, target))
    except CommandError as exc:
        return None, str(exc)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return None, f"sbatch exited {result.returncode}: {lines[0][:120] if lines else ''}"
    job_id = result.stdout.strip().split(";", 1)[0]
    return job_id or "?", ""


def nccl_submit(
    environ: Mapping[str, str], runner: Runner, log: TextIO, *, dry_run: bool = False
) -> int:
    """The ``nccl-submit`` command; see the module docstring."""
    try:
        config = load_submit_config(environ)
    except SubmitConfigError as exc:
        print(format_line(_TOOL, [("result", "error"), ("error", exc)]), file=log)
        return 2
    try:
        nodes = list_nodes(runner, _COMMAND_TIMEOUT)
        queued = queued_benchmarks(runner, _COMMAND_TIMEOUT)
    except SinfoError as exc:
        print(format_line(_TOOL, [("result", "error"), ("error", exc)]), file=log)
        return 1
    submitted = skipped = failed = 0
    for decision in plan(config, nodes, queued):
        if isinstance(decision, Skip):
            skipped += 1
            fields: list[tuple[str, object]] = [
                ("node", decision.node),
                ("action", "skip"),
                ("pool", decision.pool),
            ]
            print(format_line(_TOOL, [*fields, ("why", decision.why)]), file=log)
            continue
        job_id, error = (None, "") if dry_run else _submit(config, decision, runner)
        fields = [
            ("node", decision.node),
            ("action", "error" if error else "submit"),
            ("pool", decision.pool),
            ("gpu_type", decision.gpu_type),
            ("gpus", decision.gpus),
            ("partition", decision.partition),
            ("threshold", f"{decision.threshold:g}"),
            ("job", job_id),
            ("dry_run", "yes" if dry_run else None),
            ("error", error or None),
        ]
        print(format_line(_TOOL, fields), file=log)
        failed += bool(error)
        submitted += not error
    summary = [
        ("result", "error" if failed else "ok"),
        ("submitted", submitted),
        ("skipped", skipped),
        ("failed", failed),
        ("dry_run", "yes" if dry_run else None),
    ]
    print(format_line(_TOOL, summary), file=log)
    return 1 if failed else 0
