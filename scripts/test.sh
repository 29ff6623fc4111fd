#!/usr/bin/env bash
# The whole test suite, as CI runs it: set up, build the images (cached under
# /var/cache/slurm-stack), lint, then every test. With no arguments pytest runs three workers:
# each runs one share of the real-Slurm tier (tests/cluster) in order, one of them the Slurm
# version matrix, and they share the other tests, since the tier mostly waits on Slurm
# (tests/conftest.py). Arguments go to pytest as they are, in one process unless they say `-n`.
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
.venv/bin/mypy  # slurm_stack and the pod-side package, as pyproject.toml's [tool.mypy] says
if [ "$#" -eq 0 ]; then
  set -- -n 3
  if [ -z "${SLURM_STACK_TEST_SLURM_VERSION:-}" ]; then
    # The version matrix boots Slurm 24.11 too (tests/cluster/conftest.py). Its images build
    # beside the first tests; a boot at 24.11 waits for this build (one per version at a time).
    matrix_log=/var/cache/slurm-stack/images-24.11-build.log
    echo "building the Slurm 24.11 images in the background (log: $matrix_log)"
    .venv/bin/python -c 'from slurm_stack.sandbox.images import ensure_images
ensure_images("24.11")' >"$matrix_log" 2>&1 &
  fi
fi
exec .venv/bin/python -m pytest "$@"
