"""What a check gets to work with: config, command runner, kernel log source, clock."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .config import Config
from .kernel_log import LogLine, read_dmesg, read_kmsg
from .runner import CommandError, CommandResult, CommandTimeout, Runner, run_command

NVIDIA_SMI = "nvidia-smi"


def _monotonic_since_boot() -> float:
    # /dev/kmsg and dmesg timestamps count from boot on the monotonic clock.
    return time.clock_gettime(time.CLOCK_MONOTONIC)


@dataclass
class Context:
    """Shared by all checks of one run.

    ``kernel_log``, ``now_since_boot`` and ``statvfs`` default to the real sources (the kernel
    log source chosen by the config); tests pass recorded ones.
    """

    config: Config
    runner: Runner = run_command
    kernel_log: Callable[[], list[LogLine]] | None = None
    now_since_boot: Callable[[], float] = _monotonic_since_boot
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs
    _smi_cache: dict[tuple[str, ...], CommandResult | CommandError] = field(
        default_factory=dict, repr=False
    )
    _smi_hung: CommandTimeout | None = field(default=None, repr=False)

    def nvidia_smi(self, *args: str) -> CommandResult:
        """Run ``nvidia-smi args`` once per run (the result or error is cached).

        Once one call has timed out, later calls fail at once with the same timeout: a hung
        driver would otherwise cost every GPU check the full timeout.
        """
        if args in self._smi_cache:
            cached = self._smi_cache[args]
        elif self._smi_hung is not None:
            cached = self._smi_hung
        else:
            try:
                cached = self.runner(
                    [NVIDIA_SMI, *args], timeout=self.config.nvidia_smi_timeout_seconds
                )
            except CommandTimeout as exc:
                self._smi_hung = exc
                cached = exc
            except CommandError as exc:
                cached = exc
            self._smi_cache[args] = cached
        if isinstance(cached, CommandError):
            raise cached
        return cached

    def read_kernel_log(self) -> list[LogLine]:
        """The kernel log from the injected source or the configured one; raises ``OSError``."""
        if self.kernel_log is not None:
            return self.kernel_log()
        if self.config.xid_source == "dmesg":
            return read_dmesg(self.runner, self.config.command_timeout_seconds)
        return read_kmsg()
