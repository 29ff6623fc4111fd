"""The one result type every check returns."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    ``detail`` is a few words without the check name (``"7/8"``, ``"timeout after 5s"``);
    ``text`` joins both and is what goes into drain reasons and logs (``"gpu_count 7/8"``).
    ``seconds`` is how long the check took, set by the loop that runs it; it is not part of
    the outcome, so two results compare equal whatever their durations.
    """

    name: str
    ok: bool
    detail: str = ""
    seconds: float = field(default=0.0, compare=False)

    @property
    def text(self) -> str:
        """``"<name> <detail>"``, or just the name when there is no detail."""
        return f"{self.name} {self.detail}".rstrip()

    @classmethod
    def passed(cls, name: str, detail: str = "") -> CheckResult:
        """A passing result."""
        return cls(name, True, detail)

    @classmethod
    def failed(cls, name: str, detail: str) -> CheckResult:
        """A failing result; ``detail`` says what is wrong in a few words."""
        return cls(name, False, detail)
