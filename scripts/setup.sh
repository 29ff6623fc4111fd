#!/usr/bin/env bash
# Set up everything slurm-stack needs on a Debian machine, as root: Python, a virtualenv with
# the package and its test tools (checkov in .venv/checkov). Idempotent; a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR source=apt-lock.sh
source scripts/apt-lock.sh  # apt_get: apt-get that waits for another install's package locks

python_ok() { command -v python3 >/dev/null && python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

if ! python_ok; then
  echo "setup: installing Python 3 from Debian" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends python3 python3-venv python3-pip ca-certificates >/dev/null
fi

if ! command -v make >/dev/null || ! command -v cc >/dev/null || [ ! -e /usr/include/stdio.h ]; then
  echo "setup: installing a C toolchain from Debian (the chroot plugin's unit tests)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends gcc libc6-dev make >/dev/null
fi

stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -e "$stamp" ]; then
  echo "setup: creating .venv and installing slurm-stack with its test tools" >&2
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip 2>/dev/null || true
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# checkov (tests/test_checkov.py) gets a virtualenv of its own: it pins packaging<24, which
# pulumi (packaging>=26) cannot share. About 40 s to install on 2 cores.
CHECKOV_VERSION=3.3.30
if [ ! -e ".venv/checkov/.installed-$CHECKOV_VERSION" ]; then
  echo "setup: installing checkov $CHECKOV_VERSION into .venv/checkov" >&2
  rm -rf .venv/checkov
  python3 -m venv .venv/checkov
  .venv/checkov/bin/python -m pip install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION"
  touch ".venv/checkov/.installed-$CHECKOV_VERSION"
fi
echo "setup: ready (.venv/bin/python -m slurm_stack --help)" >&2
