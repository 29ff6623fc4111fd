"""`python -m slurm_stack`: offline tools for the stack (no Pulumi CLI, no cluster needed)."""

import argparse
import json
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
    args = parser.parse_args(argv)
    if args.command == "render":
        return _render(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _render(args: argparse.Namespace) -> int:
    from slurm_stack.offline.render import RenderError, render_stack
    from slurm_stack.stackfile import project_name, stack_file

    project = project_name(args.project_dir)
    path = args.config or stack_file(args.stack, args.project_dir)
    if not path.exists():
        print(f"error: stack file {path} does not exist", file=sys.stderr)
        return 2
    versions = args.k8s_versions.split(",") if args.k8s_versions else None
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
    return 0
