#!/usr/bin/env bash
# The whole test suite, as CI runs it: set up, build the images (cached under
# /var/cache/slurm-stack), lint, then every test. With no arguments pytest runs two workers:
# each runs one half of the real-Slurm tier (tests/cluster) in order and shares the other
# tests with the other worker, since the tier mostly waits on Slurm (tests/conftest.py).
# Arguments go to pytest as they are, in one process unless they say `-n`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-podman.sh  # the real-Slurm tests (tests/cluster) boot the sandbox
# Before pytest: the tests that run sshd in the login image find it built, whichever worker
# reaches them first.
.venv/bin/python -c 'import sys; from slurm_stack.sandbox.images import ensure_images
ensure_images(sys.argv[1])' "${SLURM_STACK_TEST_SLURM_VERSION:-26.05}"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
if [ "$#" -eq 0 ]; then
  set -- -n 2
fi
exec .venv/bin/python -m pytest "$@"
