"""`python -m slurm_stack`."""

import sys

from slurm_stack.cli import main

sys.exit(main())
