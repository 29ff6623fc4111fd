"""``python3 -m slurm_stack_healthchecks``: see :mod:`.cli`."""

import sys

from .cli import main

sys.exit(main())
