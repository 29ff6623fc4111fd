#!/usr/bin/env bash
# The whole test suite, as CI runs it: set up, lint, then every test (the real-Slurm tier
# builds the images on first use, cached under /var/cache/slurm-stack).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-podman.sh  # the real-Slurm tests (tests/cluster) boot the sandbox
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"
