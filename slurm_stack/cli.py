"""`python -m slurm_stack`: offline tools for the stack (no Pulumi CLI, no cluster needed)."""

import argparse
import json
import os
import sys
from pathlib import Path

from slurm_stack.spec import SpecError


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m slurm_stack", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser(
        "render",
        help="run the program under Pulumi's mock engine; write and validate what it creates",
    )
    source = render.add_mutually_exclusive_group()
    source.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml")
    source.add_argument("--config", type=Path, help="a stack file anywhere")
    render.add_argument("--out", type=Path, required=True, help="output directory")
    render.add_argument(
        "--project-dir", type=Path, default=Path.cwd(), help="where Pulumi.yaml is (default: .)"
    )
    render.add_argument(
        "--show-secrets", action="store_true", help="write Secret data instead of <redacted>"
    )
    render.add_argument(
        "--k8s-versions",
        help="comma-separated Kubernetes minors to validate against (default: 1.30-1.34)",
    )
    _add_join_script(commands)
    _add_sandbox(commands)
    args = parser.parse_args(argv)
    if args.command == "render":
        return _render(args)
    if args.command == "sandbox":
        return _sandbox(args)
    if args.command == "join-script":
        return _join_script(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _add_join_script(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    join = commands.add_parser(
        "join-script",
        help="print the script that joins a host outside Kubernetes to the cluster "
        "(docs/hybrid.md)",
    )
    source = join.add_mutually_exclusive_group()
    source.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml")
    source.add_argument("--config", type=Path, help="a stack file anywhere")
    join.add_argument("--project-dir", type=Path, default=Path.cwd(), help="where Pulumi.yaml is")
    join.add_argument(
        "--outputs",
        type=Path,
        required=True,
        help="the stack's outputs as `pulumi stack output --json` writes them ('-': stdin)",
    )
    join.add_argument("--pool", help="the outside pool (default: the stack's only one)")
    join.add_argument(
        "--show-secrets",
        action="store_true",
        help="put the auth key in the script (from outputs written with --show-secrets); "
        "without it the host reads the key from SLURM_STACK_AUTH_KEY_FILE",
    )


def _join_script(args: argparse.Namespace) -> int:
    from slurm_stack.render.join_script import JoinError, render_join_script
    from slurm_stack.spec import load_spec
    from slurm_stack.stackfile import load_stack_config

    loaded = _load_stack_file(args)
    if loaded is None:
        return 2
    path, project = loaded
    try:
        text = sys.stdin.read() if str(args.outputs) == "-" else args.outputs.read_text()
        outputs = json.loads(text)
        stack = load_stack_config(path, project)
        spec = load_spec(json.loads(stack.config[f"{project}:cluster"]), **stack.secrets_given())
    except SpecError as error:  # a ValueError too: first
        print(f"error: {path}: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    pools = [pool.name for pool in spec.outside_pools]
    pool = args.pool or (pools[0] if len(pools) == 1 else None)
    if pool is None:
        print(
            f"error: name the outside pool with --pool: {', '.join(pools) or '(none)'}",
            file=sys.stderr,
        )
        return 2
    key = None
    if args.show_secrets:
        key = outputs.get("outsideNodesAuthKey")
        if not isinstance(key, str) or not key or key == "[secret]":
            print(
                "error: the outputs hold no auth key: write them with "
                "`pulumi stack output --json --show-secrets`",
                file=sys.stderr,
            )
            return 2
    try:
        sys.stdout.write(render_join_script(spec, pool, outputs, key))
    except JoinError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _add_sandbox(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    sandbox = commands.add_parser(
        "sandbox", help="run the stack's rendered pods as a local Slurm cluster on podman (root)"
    )
    actions = sandbox.add_subparsers(dest="action", required=True)
    for name, text in (
        ("up", "set up podman, build images, start or update the cluster (idempotent)"),
        ("down", "stop every pod; volumes are kept unless --delete-data"),
        ("status", "pods and `sinfo`"),
        ("ssh", "log in to the login node as a declared user (or run COMMAND there)"),
        ("exec", "run COMMAND in a node's main container"),
        ("run-cronjob", "run a CronJob's pod once now (kubectl create job --from=cronjob/NAME)"),
        ("kill-pod", "kill a pod without preStop or grace (a crash), then recreate it"),
        ("delete-pod", "delete a pod as an eviction does (preStop, grace), then recreate it"),
        ("kube-node", "cordon, uncordon or label the stand-in Kubernetes node of a pod"),
    ):
        action = actions.add_parser(name, help=text)
        source = action.add_mutually_exclusive_group()
        source.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml")
        source.add_argument("--config", type=Path, help="a stack file anywhere")
        action.add_argument(
            "--project-dir", type=Path, default=Path.cwd(), help="where Pulumi.yaml is"
        )
        if name == "up":
            action.add_argument(
                "--no-build", action="store_true", help="use the images already built"
            )
            action.add_argument(
                "--run", metavar="COMMAND", help="then run COMMAND on the login node over ssh"
            )
        if name == "down":
            action.add_argument(
                "--delete-data",
                action="store_true",
                help="also delete volumes, keys and state; pods are killed, not drained",
            )
        if name == "exec":
            action.add_argument("node", help="pod name, e.g. dev-cpu-0 or dev-controller-0")
        if name == "run-cronjob":
            action.add_argument("name", help="the CronJob, e.g. dev-nccl-benchmark")
        if name in ("kill-pod", "delete-pod"):
            action.add_argument("name", help="the pod, e.g. dev-cpu-1")
        if name == "kube-node":
            _add_kube_node_arguments(action)
        if name == "ssh":
            action.add_argument(
                "--user", default="sandbox", help="a user of login.users (default: sandbox)"
            )
            action.add_argument(
                "-i",
                "--identity",
                type=Path,
                help="that user's private key (default: the sandbox's own key)",
            )
        if name in ("ssh", "exec"):
            action.add_argument("remote", nargs=argparse.REMAINDER, metavar="COMMAND")


def _add_kube_node_arguments(action: argparse.ArgumentParser) -> None:
    action.add_argument("name", help="the pod (e.g. dev-cpu-1) or its node (node-dev-cpu-1)")
    cordon = action.add_mutually_exclusive_group()
    cordon.add_argument("--cordon", dest="unschedulable", action="store_true", default=None)
    cordon.add_argument("--uncordon", dest="unschedulable", action="store_false")
    ready = action.add_mutually_exclusive_group()
    ready.add_argument("--ready", dest="ready", action="store_true", default=None)
    ready.add_argument("--not-ready", dest="ready", action="store_false")
    action.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a label (KEY- removes it), as `kubectl label node` does; repeatable",
    )


def _node_labels(given: list[str]) -> dict[str, str | None]:
    """`--label` arguments: KEY=VALUE sets, KEY- removes; raises KeyError on anything else."""
    labels: dict[str, str | None] = {}
    for item in given:
        if "=" in item:
            key, value = item.split("=", 1)
            labels[key] = value
        elif item.endswith("-"):
            labels[item[:-1]] = None
        else:
            raise KeyError(f"--label {item!r}: want KEY=VALUE, or KEY- to remove it")
    return labels


def _sandbox(args: argparse.Namespace) -> int:
    import subprocess

    from slurm_stack.sandbox.apply import SandboxError
    from slurm_stack.sandbox.kube_api import node_of
    from slurm_stack.sandbox.podman import PodmanError
    from slurm_stack.sandbox.session import Sandbox, exec_interactive

    loaded = _load_stack_file(args)
    if loaded is None:
        return 2
    path, project = loaded
    if os.geteuid() != 0:
        print("error: the sandbox runs podman as root; run it as root", file=sys.stderr)
        return 2
    sandbox = Sandbox(path, project)
    remote = [a for a in getattr(args, "remote", []) if a != "--"]
    try:
        if args.action == "up":
            report = sandbox.up(build=not args.no_build)
            print(
                f"sandbox {sandbox.name}: {len(report.created)} pods started, "
                f"{len(report.kept)} unchanged, {len(report.removed)} removed, "
                f"jobs run: {', '.join(report.jobs_run) or 'none'}"
            )
            print(sandbox.login_hint())
            if args.run:
                result = sandbox.ssh(args.run)
                sys.stdout.write(result.stdout)
                sys.stderr.write(result.stderr)
                return result.returncode
        elif args.action == "down":
            removed = sandbox.down(delete_data=args.delete_data)
            print(f"sandbox {sandbox.name}: removed {len(removed)} pods")
        elif args.action == "status":
            print(sandbox.status())
        elif args.action == "ssh":
            command = sandbox.ssh_command(
                args.user, tty=not remote and sys.stdin.isatty(), identity=args.identity
            )
            exec_interactive([*command, *remote])
        elif args.action == "kill-pod":
            report = sandbox.kill_pod(args.name)
            print(
                f"sandbox {sandbox.name}: killed {args.name}; started {', '.join(report.created)}"
            )
        elif args.action == "delete-pod":
            report = sandbox.delete_pod(args.name)
            print(
                f"sandbox {sandbox.name}: deleted {args.name}; started {', '.join(report.created)}"
            )
        elif args.action == "kube-node":
            node = args.name if args.name.startswith("node-") else node_of(args.name)
            sandbox.kube_api().set_node(
                node,
                unschedulable=args.unschedulable,
                ready=args.ready,
                labels=_node_labels(args.label),
            )
            print(f"sandbox {sandbox.name}: {node}: {sandbox.kube_api().nodes()[node]}")
        elif args.action == "run-cronjob":
            sandbox.run_cron_job(args.name)
            print(f"sandbox {sandbox.name}: {args.name} ran")
        elif args.action == "exec":
            container = sandbox.node_container(args.node)
            tty = ["-it"] if sys.stdin.isatty() else ["-i"]
            exec_interactive(["podman", "exec", *tty, container, *(remote or ["bash"])])
    except SpecError as error:
        print(f"error: {path}: {error}", file=sys.stderr)
        return 2
    except (SandboxError, PodmanError, KeyError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _load_stack_file(args: argparse.Namespace) -> tuple[Path, str] | None:
    """The stack file of ``args`` and its project, once the file is known to be usable; None
    (the problems printed, every one of them) for a missing or broken one."""
    from slurm_stack.stackfile import StackFileError, load_stack_config, project_name, stack_file

    path = args.config or stack_file(args.stack, args.project_dir)
    try:
        project = project_name(args.project_dir)
        if not path.exists():
            print(f"error: stack file {path} does not exist", file=sys.stderr)
            return None
        load_stack_config(path, project)
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return None
    return path, project


# What `pip install '.[render]'` adds (pyproject.toml), by import name, with what they pull in.
RENDER_EXTRA_MODULES = frozenset(
    {"kubernetes_validate", "cryptography", "jsonschema", "referencing"}
)


def _missing_module(error: ModuleNotFoundError) -> int:
    """Say which install a missing module needs (a missing module of ours is a bug: raise)."""
    name = (error.name or "?").split(".")[0]
    if name == "slurm_stack":
        raise error
    if name in RENDER_EXTRA_MODULES:
        print(
            f"error: render needs the optional 'render' extra (kubernetes-validate, "
            f"cryptography), which is not installed (no module {name!r}): "
            "pip install '.[render]'",
            file=sys.stderr,
        )
    else:
        print(
            f"error: render needs {name!r}, which is not installed: pip install '.[render]'",
            file=sys.stderr,
        )
    return 2


def _render(args: argparse.Namespace) -> int:
    # The stack file first: a broken one is refused before anything is imported or written.
    loaded = _load_stack_file(args)
    if loaded is None:
        return 2
    path, project = loaded
    versions = args.k8s_versions.split(",") if args.k8s_versions else None
    try:
        from slurm_stack.offline.render import RenderError, render_stack
        from slurm_stack.offline.requests import summarize
    except ModuleNotFoundError as error:
        return _missing_module(error)
    try:
        result = render_stack(
            path, args.out, project=project, show_secrets=args.show_secrets, versions=versions
        )
    except SpecError as error:
        print(f"error: {path}: {error}", file=sys.stderr)
        return 2
    except RenderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"rendered {len(result.manifests)} Kubernetes objects from {path}")
    print(f"  {args.out / 'manifests.yaml'}")
    for name in sorted(result.config_files):
        print(f"  {args.out / 'configs' / name}")
    print(f"  {args.out / 'outputs.json'}")
    print(f"valid against Kubernetes {', '.join(result.versions)} (strict schemas)")
    print(f"outputs: {json.dumps(result.outputs, sort_keys=True)}")
    print("\n".join(summarize(result.manifests).lines()))
    return 0
