"""The `healthcheck elastic-*` commands: the scaler's entry points (elastic.py)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from .elastic import (
    ElasticConfig,
    Log,
    Scaler,
    Slurm,
    container_log,
    given_back,
    in_cluster_api,
    one_at_a_time,
    retry_failed,
    slurm_conf,
    sync_nodes,
)
from .kube_api import KubeApiError
from .runner import CommandError, Runner


def run_elastic(
    args: argparse.Namespace, environ: Mapping[str, str], runner: Runner, err: TextIO
) -> int:
    """Run one elastic command; 0 when everything it set out to do was done."""
    slurm = Slurm(runner)
    if args.command == "elastic-given-back":
        try:
            return 0 if given_back(slurm, args.node) else 1
        except CommandError as exc:
            print(f"elastic: could not read node {args.node}: {exc}", file=err)
            return 2
    log = container_log(err)
    if args.command == "elastic-retry":
        try:
            failures = retry_failed(slurm, args.prefix, log)
        except CommandError as exc:
            failures = [str(exc)]
        return _report(failures, log)
    try:
        config = ElasticConfig.beside(
            slurm_conf(environ), missing_ok=args.command == "elastic-sync"
        )
    except (OSError, ValueError, KeyError) as exc:
        log(f"no usable elastic.json beside slurm.conf: {exc}")
        return 2
    if args.command == "elastic-sync":
        try:
            return _report(sync_nodes(config, slurm, log), log)
        except CommandError as exc:
            return _report([str(exc)], log)
    try:
        scaler = Scaler(config, in_cluster_api(environ), slurm, log)
    except (OSError, ValueError, KeyError) as exc:
        log(f"where the Kubernetes API is: {exc}")
        return 2
    try:
        nodes = slurm.hostnames(args.nodes)
        with one_at_a_time():
            if args.command == "elastic-resume":
                failures = scaler.resume(nodes)
            elif args.command == "elastic-suspend":
                failures = scaler.suspend(nodes)
            else:
                failures = scaler.resume_failed(nodes)
    except (CommandError, KubeApiError, OSError) as exc:
        failures = [str(exc)]
    return _report(failures, log)


def _report(failures: list[str], log: Log) -> int:
    for failure in failures:
        log(f"failed: {failure}")
    return 1 if failures else 0
