"""The spec refuses exactly the NCCL thresholds the benchmark's verdict refuses at run time.

The CronJob hands the spec's `healthChecks.nccl.thresholdsGbps` to `nccl-verdict` as JSON; a
map the spec accepted and the tool then refused would fail every benchmark run.
"""

import copy
import json
import math
from pathlib import Path

import pytest
import yaml
from slurm_stack_healthchecks.nccl import ThresholdError, parse_thresholds

from slurm_stack.spec import SpecError, load_spec

PROD = Path(__file__).resolve().parents[2] / "examples" / "production" / "Pulumi.prod.yaml"
BASE = yaml.safe_load(PROD.read_text())["config"]["slurm-stack:cluster"]

CASES = [
    {"h100": 360, "h200": 380},
    {"h100": 0.5, "h200": 1e4},
    {"h100": 0, "h200": 380},
    {"h100": -1, "h200": 380},
    {"h100": 360, "H100": 300, "h200": 380},
    {"h100": math.inf, "h200": 380},
    {"h100": math.nan, "h200": 380},
    {"h100": True, "h200": 380},
]


def spec_accepts(thresholds: dict[str, object]) -> bool:
    raw = copy.deepcopy(BASE)
    raw["healthChecks"]["nccl"]["thresholdsGbps"] = thresholds
    try:
        load_spec(raw, db_password_provided=True)
    except SpecError:
        return False
    return True


def tool_accepts(thresholds: dict[str, object]) -> bool:
    try:
        parse_thresholds(json.dumps(thresholds))
    except (ThresholdError, ValueError):
        return False
    return True


@pytest.mark.parametrize("thresholds", CASES, ids=[json.dumps(c) for c in CASES])
def test_spec_and_tool_agree(thresholds: dict[str, object]) -> None:
    assert spec_accepts(thresholds) == tool_accepts(thresholds)
