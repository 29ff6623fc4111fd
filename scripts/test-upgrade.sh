#!/bin/bash
# The Slurm 24.11 -> 26.05 upgrade on real Slurm (tests/cluster/test_upgrade.py) alone; .ci/run
# runs it too. It needs both image sets, which this builds first when their inputs changed
# (about 2 minutes each), then boots and upgrades a cluster (about 3 minutes); -s shows the
# sandbox's progress and the upgrade's `upgrade_up_seconds` line.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -c "
from slurm_stack.sandbox.images import ensure_images
for version in ('24.11', '26.05'):
    print(f'images {version}:', 'built' if ensure_images(version, quiet=True) else 'up to date', flush=True)
"
exec .venv/bin/python -m pytest -v -s -p no:cacheprovider tests/cluster/test_upgrade.py "$@"
