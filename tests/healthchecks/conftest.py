"""Make the stdlib-only health-check package importable: it ships as a plain directory in the
worker image, not as an installed distribution."""

import sys
from pathlib import Path

HEALTHCHECKS_DIR = Path(__file__).resolve().parents[2] / "healthchecks"
if str(HEALTHCHECKS_DIR) not in sys.path:
    sys.path.insert(0, str(HEALTHCHECKS_DIR))
