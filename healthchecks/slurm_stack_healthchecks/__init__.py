"""Node health checks for slurm-stack workers.

Three entry points, all stdlib-only so they run on the worker image's Debian ``python3``:

* the quick checks, run by slurmd as ``HealthCheckProgram`` (``python3 -m
  slurm_stack_healthchecks`` or the ``healthcheck`` wrapper): small pluggable checks enabled per
  node by a JSON config (see :mod:`.config`), a failing check drains the node with a reason that
  starts with ``healthcheck:``, passing again resumes only drains that carry that reason;
* ``nccl-verdict``, called by the NCCL benchmark job: parses ``all_reduce_perf`` output and
  compares the average bus bandwidth with a per-GPU-model threshold (see :mod:`.nccl`);
* ``nccl-submit``, run by the NCCL benchmark CronJob: submits that job to every idle GPU node
  (see :mod:`.nccl_submit`).

Adding a check: write a function ``(ctx: Context) -> CheckResult`` in a module under
``checks/``, decorate it with ``@check("name")`` and import the module in ``checks/__init__.py``;
nodes enable it by listing ``"name"`` in their config's ``checks``.
"""

__version__ = "0.1.0"
