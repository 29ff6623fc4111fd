"""The per-node JSON config: the documented example loads, defaults apply, every error is named."""

import json
from pathlib import Path

import pytest
from slurm_stack_healthchecks import registry
from slurm_stack_healthchecks.config import Config, ConfigError, load_config, parse_config
from slurm_stack_healthchecks.xid import FATAL_XIDS

EXAMPLE = {
    "expected_gpus": 8,
    "gpu_type": "h100",
    "checks": ["gpu_count", "gpu_ecc", "gpu_xid", "gpu_driver", "jail", "munge", "disk"],
    "jail_marker": "/mnt/jail/.slurm-stack-populated",
    "munge_socket": "/run/munge/munge.socket.2",
    "disk_paths": ["/tmp", "/var/spool/slurmd"],
    "min_free_disk_percent": 5,
    "nvidia_smi_timeout_seconds": 5,
    "dcgm": False,
}


def _load(tmp_path: Path, raw: object) -> Config:
    path = tmp_path / "healthcheck.json"
    path.write_text(json.dumps(raw))
    return load_config(path, registry.names())


def test_the_documented_example_loads(tmp_path: Path) -> None:
    config = _load(tmp_path, EXAMPLE)
    assert config.checks == tuple(EXAMPLE["checks"])
    assert config.enabled_checks == config.checks
    assert config.expected_gpus == 8
    assert config.gpu_type == "h100"
    assert config.disk_paths == ("/tmp", "/var/spool/slurmd")
    assert config.min_free_disk_percent == 5.0
    assert config.nvidia_smi_timeout_seconds == 5.0


def test_defaults_for_a_minimal_config() -> None:
    config = parse_config({"checks": ["disk"]}, registry.names())
    assert config == Config(checks=("disk",))
    assert config.expected_gpus == 0
    assert config.disk_paths == ("/tmp",)
    assert config.xid_source == "kmsg"
    assert config.xid_window_seconds == 3600.0
    assert config.fatal_xids == FATAL_XIDS
    assert config.dcgm is False


def test_dcgm_true_adds_the_dcgm_check_once() -> None:
    names = registry.names()
    assert parse_config({"checks": ["disk"], "dcgm": True}, names).enabled_checks == (
        "disk",
        "dcgm",
    )
    assert parse_config({"checks": ["dcgm"], "dcgm": True}, names).enabled_checks == ("dcgm",)


def test_results_dir_is_a_path_or_null() -> None:
    names = registry.names()
    assert parse_config({"checks": []}, names).results_dir is None
    assert parse_config({"checks": [], "results_dir": None}, names).results_dir is None
    assert parse_config({"checks": [], "results_dir": "/r"}, names).results_dir == "/r"


def test_null_window_means_since_boot_and_xids_can_be_replaced() -> None:
    config = parse_config(
        {"checks": ["gpu_xid"], "xid_window_seconds": None, "fatal_xids": [79]}, registry.names()
    )
    assert config.xid_window_seconds is None
    assert config.fatal_xids == frozenset({79})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "checks: required"),
        ({"checks": "disk"}, "checks: must be a list of check names"),
        ({"checks": ["gpu_cnt"]}, "checks[0]: unknown check 'gpu_cnt' (known: dcgm, disk,"),
        ({"checks": ["disk", "disk"]}, "checks: lists a check twice"),
        ({"checks": [], "expected_gpus": "8"}, 'expected_gpus: must be an integer >= 0, got "8"'),
        ({"checks": [], "expected_gpus": True}, "expected_gpus: must be an integer >= 0, got true"),
        ({"checks": [], "expected_gpus": -1}, "expected_gpus: must be an integer >= 0, got -1"),
        ({"checks": [], "min_free_disk_percent": 100}, "must be a number in [0, 100)"),
        ({"checks": [], "nvidia_smi_timeout_seconds": 0}, "must be a number > 0, got 0"),
        ({"checks": [], "xid_window_seconds": "1h"}, "must be a number > 0 or null"),
        ({"checks": [], "disk_paths": ["tmp"]}, "disk_paths: must be a non-empty list of absol"),
        ({"checks": [], "disk_paths": []}, "disk_paths: must be a non-empty list"),
        ({"checks": [], "jail_marker": "jail/.marker"}, "jail_marker: must be an absolute path"),
        ({"checks": [], "results_dir": "results"}, "results_dir: must be an absolute path or null"),
        ({"checks": [], "dcgm": "yes"}, 'dcgm: must be true or false, got "yes"'),
        ({"checks": [], "xid_source": "journal"}, 'xid_source: must be one of "kmsg", "dmesg"'),
        ({"checks": [], "fatal_xids": [79, "48"]}, "fatal_xids: must be a list of positive"),
        ({"checks": [], "gpu_type": ""}, "gpu_type: must be a non-empty string or null"),
        ({"checks": [], "expected_gpu": 8}, "expected_gpu: unknown key"),
    ],
)
def test_schema_errors_are_named(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, registry.names())
    assert message in str(info.value)


def test_all_errors_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"checks": ["nope"], "expected_gpus": -2, "bogus": 1}, registry.names())
    text = str(info.value)
    assert "checks[0]: unknown check 'nope'" in text
    assert "expected_gpus:" in text
    assert "bogus: unknown key" in text


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(ConfigError, match=r"absent.json: cannot read: No such file"):
        load_config(missing, registry.names())
    broken = tmp_path / "broken.json"
    broken.write_text('{"checks": [\n')
    with pytest.raises(ConfigError, match=r"broken.json: not valid JSON: line 2 column 1"):
        load_config(broken, registry.names())
    with pytest.raises(ConfigError, match=r"must be a JSON object, got a list"):
        _load(tmp_path, ["disk"])
