"""Command line: the quick checks (default, what slurmd runs), ``nccl-verdict``, ``nccl-submit``.

``healthcheck [run] [--config PATH] [--node NAME] [--dry-run]``
    Run the node's enabled checks, drain or resume it, log one line to stderr. Exit 0 when all
    checks pass, 1 when a check failed or ``scontrol`` did not answer, 2 when the config is
    unusable (then the node is left alone: a broken config says nothing about the node).

``healthcheck nccl-verdict --output FILE --gpu-type T --thresholds JSON [--node NAME]
[--dcgm-output FILE --dcgm-exit N]``
    Judge an ``all_reduce_perf`` output file, and the output and exit status of the job's
    ``dcgmi diag -r 3`` where given, print one verdict line to stdout; with ``--node`` also
    drain (or resume) the node with a ``healthcheck: nccl`` reason. Exit 0 pass, 1 fail,
    2 no verdict: unusable input (no result in the file while DCGM found nothing, unknown GPU
    type) or an output file that is refused (see :func:`.nccl.read_output`: not a regular file,
    a symlink, not owned by ``--owner-uid``, by default the caller's, or writable by others, in
    a directory that is not private) or missing while DCGM found nothing. With no verdict the
    node is left as it is: neither drained (whoever can plant or spoil the file could drain
    healthy nodes) nor resumed.

``healthcheck exporter``
    Serve the cluster's state as Prometheus metrics (see :mod:`.exporter`); exit 2 when the
    environment is unusable.

``healthcheck node-state``
    Drain the Slurm nodes of cordoned or NotReady Kubernetes nodes with a ``k8s:`` reason and
    resume them when their node recovers (see :mod:`.node_state`), until stopped; exit 2 when
    the environment is unusable.

``healthcheck restore-state DIRECTORY``
    Before slurmctld starts: put back the state files of which only a ``.new`` or ``.old`` copy
    is left, unless a controller is in control (see :mod:`.controller_state`). Exit 0, or 1
    when the directory cannot be read or written.

``healthcheck drain-node``
    A worker pod's preStop hook (the entrypoint's ``drain-node`` role): drain this pod's node,
    give its jobs the pool's wait, requeue or cancel what is left as the pool's policy says,
    delete the node (see :mod:`.drain_node`). Exit 0 whatever Slurm did, 2 when the
    environment is unusable.

``healthcheck nccl-submit [--dry-run]``
    Submit one NCCL benchmark job per idle GPU node (configured by ``NCCL_*`` environment
    variables, see :mod:`.nccl_submit`), log one line per node to stderr. Exit 0 all submitted,
    1 a Slurm command failed, 2 unusable environment.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from . import registry
from .checks.dcgm import job_diag_failure
from .config import DEFAULT_CONFIG_PATH, ConfigError, load_config
from .context import Context
from .drain import Decision, Owner, drain_reason
from .logline import format_line
from .nccl import (
    NcclOutputError,
    OutputRefused,
    ThresholdError,
    parse_all_reduce,
    parse_thresholds,
    read_output,
    select_threshold,
    verdict,
    with_dcgm,
)
from .node_actions import decide_and_apply
from .result import CheckResult
from .results_file import ResultsFileError, write_results
from .runner import CommandError, Runner, run_command

# slurmd starts HealthCheckProgram with an almost empty environment.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# scontrol when the config that names its timeout could not be read.
_SCONTROL_TIMEOUT = 5.0


def node_name(explicit: str | None) -> str:
    """``--node``, else ``$SLURMD_NODENAME`` (set by slurmd), else the short hostname."""
    return explicit or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="healthcheck", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the quick checks (the default)")
    run.add_argument("--config", type=Path, default=DEFAULT_CONFIG_PATH)
    run.add_argument("--node", help="Slurm node name (default: $SLURMD_NODENAME or hostname)")
    run.add_argument("--dry-run", action="store_true", help="decide and log, change nothing")
    nccl = commands.add_parser("nccl-verdict", help="judge all_reduce_perf output")
    nccl.add_argument("--output", type=Path, required=True, help="all_reduce_perf output file")
    nccl.add_argument("--gpu-type", required=True, help="GPU model, e.g. h100")
    nccl.add_argument("--thresholds", required=True, help='busbw GB/s, e.g. {"h100": 350}')
    nccl.add_argument("--node", help="also drain/resume this node by the verdict")
    nccl.add_argument(
        "--owner-uid",
        type=int,
        default=None,
        help="uid that must own the output and its directory (default: the caller's, as the "
        "benchmark job runs it)",
    )
    nccl.add_argument("--dcgm-output", type=Path, help="the job's dcgmi diag output file")
    nccl.add_argument("--dcgm-exit", type=int, default=0, help="the exit status of dcgmi diag")
    nccl.add_argument("--timeout", type=float, default=_SCONTROL_TIMEOUT, help="scontrol timeout")
    nccl.add_argument("--dry-run", action="store_true", help="decide and print, change nothing")
    commands.add_parser("exporter", help="serve the cluster's state as Prometheus metrics")
    commands.add_parser("node-state", help="drain Slurm nodes of cordoned Kubernetes nodes")
    restore = commands.add_parser(
        "restore-state", help="put back slurmctld state files that only a .new or .old copy has"
    )
    restore.add_argument("directory", type=Path, help="slurmctld's StateSaveLocation")
    submit = commands.add_parser("nccl-submit", help="submit the NCCL benchmark to idle nodes")
    submit.add_argument("--dry-run", action="store_true", help="decide and log, submit nothing")
    for program, what in ELASTIC_PROGRAMS.items():
        elastic = commands.add_parser(program, help=what)
        elastic.add_argument("nodes", help="Slurm hostlist of the nodes")
    commands.add_parser(
        "drain-node", help="a worker pod's preStop: drain its node, end its jobs, delete it"
    )
    commands.add_parser("elastic-sync", help="create elastic pools' nodes powered down")
    commands.add_parser(
        "outside-sync", help="delete (or drain, while busy) outside hosts the stack no longer has"
    )
    given_back = commands.add_parser(
        "elastic-given-back", help="exit 0 when Slurm has given the node back or powers it up"
    )
    given_back.add_argument("node", help="Slurm node name")
    retry = commands.add_parser(
        "elastic-retry", help="return a pool's nodes that failed to start to service"
    )
    retry.add_argument("prefix", help="the pool's node name prefix, <statefulset>-")
    return parser


# slurmctld's power-saving programs (ResumeProgram, SuspendProgram, ResumeFailProgram): links
# to this program by these names, as slurmctld passes the hostlist as the only argument.
ELASTIC_PROGRAMS = {
    "elastic-resume": "ResumeProgram: start the pods of these nodes",
    "elastic-suspend": "SuspendProgram: give back the pods of these nodes",
    "elastic-resume-fail": "ResumeFailProgram: mark these nodes down, give back their pods",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None and (called_as := os.path.basename(sys.argv[0])) in ELASTIC_PROGRAMS:
        args_list.insert(0, called_as)
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in ("-h", "--help")):
        args_list.insert(0, "run")
    args = _parser().parse_args(args_list)
    os.environ.setdefault("PATH", DEFAULT_PATH)
    # The other commands' modules are imported when they run: slurmd waits for the quick
    # checks before a starting node registers, so what they do not need is not loaded.
    if args.command == "nccl-verdict":
        return nccl_verdict(args, run_command, sys.stdout)
    if args.command == "nccl-submit":
        from .nccl_submit import nccl_submit

        return nccl_submit(os.environ, run_command, sys.stderr, dry_run=args.dry_run)
    if args.command == "exporter":
        from .exporter import ExporterConfig, serve

        try:
            config = ExporterConfig.from_environ(os.environ)
        except ValueError as exc:
            print(format_line("exporter", [("result", "error"), ("error", exc)]), file=sys.stderr)
            return 2
        return serve(config, run_command)
    if args.command == "node-state":
        return node_state(os.environ)
    if args.command == "restore-state":
        from .controller_state import restore_state

        return restore_state(
            args.directory,
            lambda: controller_in_control(run_command),
            lambda line: print(line, file=sys.stderr, flush=True),
        )
    if args.command == "drain-node":
        from .drain_node import main as drain_node

        return drain_node(os.environ)
    if args.command == "outside-sync":
        from .elastic import Slurm, container_log, slurm_conf
        from .outside_sync import DeclaredHosts, sync_outside_hosts

        log = container_log(sys.stderr, name="outside-sync")
        try:
            declared = DeclaredHosts.beside(slurm_conf(os.environ))
            failures = sync_outside_hosts(declared, Slurm(run_command), log)
        except (OSError, ValueError, CommandError) as exc:
            failures = [str(exc)]
        for failure in failures:
            log(f"failed: {failure}")
        return 1 if failures else 0
    if args.command.startswith("elastic-"):
        from .elastic_cli import run_elastic

        return run_elastic(args, os.environ, run_command, sys.stderr)
    return run_quick(args.config, node_name(args.node), args.dry_run, sys.stderr)


# A client asks each controller in turn, each for up to MessageTimeout (10 s by default).
_IN_CONTROL_TIMEOUT = 30.0


def controller_in_control(runner: Runner) -> bool:
    """Whether a controller serves the cluster: a backup that stands by answers pings but
    refuses `sinfo`."""
    try:
        return runner(["sinfo", "-h", "-o", "%D"], timeout=_IN_CONTROL_TIMEOUT).returncode == 0
    except CommandError:
        return False


def node_state(environ: Mapping[str, str]) -> int:
    """The node-state controller's loop (returns only when its environment is unusable)."""
    from .kube_api import KubeApi
    from .node_state import NodeStateConfig, run_forever
    from .stopping import exit_on_sigterm

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        config = NodeStateConfig.from_environ(environ)
        api = KubeApi.in_cluster(environ)
    except ValueError as exc:
        log(format_line("node-state", [("result", "error"), ("error", exc)]))
        return 2
    except KeyError as exc:  # outside a pod: no API server to ask
        log(
            format_line("node-state", [("result", "error"), ("error", f"{exc.args[0]} is not set")])
        )
        return 2
    exit_on_sigterm()
    run_forever(config, api, run_command, log)
    return 0


def run_quick(
    config_path: Path,
    node: str,
    dry_run: bool,
    log: TextIO,
    *,
    context: Context | None = None,
    runner: Runner = run_command,
) -> int:
    """Load the config, run the checks, act on the node, log one line; returns the exit status.

    ``context`` (with its ``config``) replaces the one built from ``config_path`` in tests.
    """
    started = time.monotonic()
    if context is None:
        try:
            config = load_config(config_path, registry.names())
        except ConfigError as exc:
            fields = [("node", node), ("result", "error"), ("action", "none"), ("error", exc)]
            print(format_line("healthcheck", fields), file=log)
            return 2
        context = Context(config=config, runner=runner)
    config = context.config
    results = registry.run_checks(context, config.enabled_checks)
    wanted = drain_reason(results)
    decision, error = decide_and_apply(
        context.runner, node, wanted, Owner.QUICK, config.command_timeout_seconds, dry_run
    )
    results_error = None
    if config.results_dir and not dry_run:
        results_error = _write_results(Path(config.results_dir), node, results, started)
    fields = _quick_fields(node, results, wanted, decision, dry_run, error, started)
    print(format_line("healthcheck", [*fields, ("results_error", results_error)]), file=log)
    # The node's health decides the exit status; a results file that cannot be written is
    # the exporter's loss, reported in the log line.
    return 0 if wanted is None and error is None else 1


def _write_results(
    directory: Path, node: str, results: list[CheckResult], started: float
) -> str | None:
    try:
        write_results(directory, node, results, time.time(), time.monotonic() - started)
    except (ResultsFileError, OSError) as exc:
        return str(exc)
    return None


def _quick_fields(
    node: str,
    results: list[CheckResult],
    wanted: str | None,
    decision: Decision,
    dry_run: bool,
    error: str | None,
    started: float,
) -> list[tuple[str, object | None]]:
    checks = ",".join(f"{r.name}:{'ok' if r.ok else 'fail'}" for r in results)
    return [
        ("node", node),
        ("result", "pass" if wanted is None else "fail"),
        ("action", decision.action.value),
        ("dry_run", "yes" if dry_run else None),
        ("reason", wanted),
        ("why", decision.why),
        ("error", error),
        ("checks", checks or "none"),
        ("took", f"{time.monotonic() - started:.2f}s"),
    ]


def nccl_verdict(args: argparse.Namespace, runner: Runner, out: TextIO) -> int:
    """The ``nccl-verdict`` command; see the module docstring."""
    head: list[tuple[str, object | None]] = [("gpu_type", args.gpu_type), ("output", args.output)]
    owner_uid = os.geteuid() if args.owner_uid is None else args.owner_uid

    def no_verdict(error: object) -> int:
        print(format_line("nccl-verdict", [("result", "error"), *head, ("error", error)]), file=out)
        return 2

    try:
        threshold = select_threshold(parse_thresholds(args.thresholds), args.gpu_type)
    except ThresholdError as exc:
        return no_verdict(exc)
    dcgm_failure = None
    if args.dcgm_output is not None:
        try:
            dcgm_text = read_output(args.dcgm_output, owner_uid)
        except OutputRefused as exc:
            return no_verdict(f"refused dcgm output: {exc}")
        except OSError as exc:
            return no_verdict(f"cannot read dcgm output: {exc.strerror or exc}")
        dcgm_failure = job_diag_failure(args.dcgm_exit, dcgm_text)
    judged = None
    try:
        judged = verdict(parse_all_reduce(read_output(args.output, owner_uid)), threshold)
    except OutputRefused as exc:
        return no_verdict(f"refused output: {exc}")
    except (NcclOutputError, OSError) as exc:
        unread = f"cannot read output: {exc.strerror or exc}" if isinstance(exc, OSError) else exc
        if dcgm_failure is None:
            return no_verdict(unread)
        # A failed diagnostic is a verdict of its own.
        head.append(("nccl_error", unread))
    reason = with_dcgm(judged.reason if judged else None, dcgm_failure)
    fields: list[tuple[str, object | None]] = [
        ("result", "pass" if reason is None else "fail"),
        *head,
        ("busbw", f"{judged.busbw:.2f}" if judged else None),
        ("threshold", f"{threshold:g}"),
        ("dcgm", ("pass" if dcgm_failure is None else dcgm_failure) if args.dcgm_output else None),
        ("reason", reason),
    ]
    error = None
    if args.node:
        decision, error = decide_and_apply(
            runner, args.node, reason, Owner.NCCL, args.timeout, args.dry_run
        )
        fields += [("node", args.node), ("action", decision.action.value), ("why", decision.why)]
        fields += [("dry_run", "yes" if args.dry_run else None), ("error", error)]
    print(format_line("nccl-verdict", fields), file=out)
    return 0 if reason is None and error is None else 1
