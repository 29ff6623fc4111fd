"""Spec errors that name the offending stack config key and say what would be valid."""

import re
from dataclasses import dataclass

CONFIG_KEY = "slurm-stack:cluster"


@dataclass(frozen=True)
class SpecIssue:
    """One invalid value: where it is (path below the config key) and what is wrong."""

    path: str
    message: str

    def render(self, config_key: str = CONFIG_KEY) -> str:
        """`slurm-stack:cluster.workerPools[1].gpus: …`."""
        where = f"{config_key}.{self.path}" if self.path else config_key
        return f"{where}: {self.message}"


class KeyProblem(ValueError):
    """Raised by a model's validator about one of its keys (or a key below it): the error
    then names that key, the one to change, not the model's."""

    def __init__(self, message: str, *key: str | int):
        super().__init__(message)
        self.key = key


class SpecError(ValueError):
    """Raised with every issue found in one pass over the stack config."""

    def __init__(self, issues: list[SpecIssue], config_key: str = CONFIG_KEY):
        self.issues = sorted(set(issues), key=_natural_order)
        self.config_key = config_key
        lines = "\n".join(f"  {issue.render(config_key)}" for issue in self.issues)
        count = len(self.issues)
        super().__init__(
            f"invalid stack config ({count} error{'s' if count != 1 else ''}):\n{lines}"
        )


def join_path(*parts: str | int) -> str:
    """('workerPools', 1, 'gpus') -> 'workerPools[1].gpus'."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _natural_order(issue: SpecIssue) -> tuple[list[tuple[int, int | str]], str]:
    """workerPools[2] before workerPools[10]."""
    parts = re.split(r"(\d+)", issue.path)
    key = [(1, int(part)) if part.isdigit() else (0, part) for part in parts]
    return key, issue.message
