"""Renderers: golden files, determinism, version awareness and slurm.conf structure.

Regenerate the golden files after an intended change with

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_render.py

and review the diff under tests/golden/ like any other code change.
"""

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_stack import paths
from slurm_stack.k8s.jobs import nccl_cronjob
from slurm_stack.k8s.workers import healthcheck_config, pool_statefulset
from slurm_stack.render import (
    accounting_config_files,
    content_hash,
    login_config_files,
    node_conf,
    slurm_config_files,
)
from slurm_stack.spec import ClusterSpec, SpecError, load_spec

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqyBO8cZ1qbBKq1WLHVpAMsT5t7dfBZb5CmG0r0lMb2 admin@example"
)

# Production-like: three pools (two GPU models and CPU), Slurm 26.05 with the metrics endpoint,
# extra slurm.conf lines (one overriding a default), partitions with options, cgroup
# enforcement, external accounting with purge and archive.
PROD_GPU: dict[str, Any] = {
    "name": "prod",
    "namespace": "hpc",
    "slurmVersion": "26.05",
    "controller": {
        "maxNodeCount": 256,
        "metrics": {"enabled": True},
        "scheduler": {"parameters": ["bf_continue", "bf_window=4320", "bf_resolution=600"]},
        "slurmConfExtra": [
            "MaxJobCount=100000",
            "PriorityType=priority/multifactor",
            "ReturnToService=1",
            "PrologTimeout=300",
        ],
    },
    "login": {
        "replicas": 2,
        "service": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"]},
        "rootAuthorizedKeys": [ED25519],
        "sshdExtra": ["MaxSessions 50", "ClientAliveInterval 120"],
    },
    "workerPools": [
        {
            "name": "h100",
            "replicas": 16,
            "gpus": 8,
            "gpuType": "h100",
            "features": ["ib", "nvlink"],
            "weight": 10,
            "resources": {
                "requests": {"cpu": "120", "memory": "1800Gi"},
                "limits": {"cpu": "120", "memory": "1800Gi"},
            },
            "nodeConfExtra": ["CoreSpecCount=2"],
            "submounts": [
                {
                    "type": "hostPath",
                    "name": "nvme",
                    "mountPath": "/scratch",
                    "hostPath": "/mnt/nvme/scratch",
                },
                {"type": "memory", "name": "ramdisk", "mountPath": "/ramdisk", "sizeLimit": "64Gi"},
            ],
        },
        {
            "name": "a100",
            "replicas": 8,
            "gpus": 4,
            "gpuType": "a100",
            "weight": 20,
            "resources": {"limits": {"cpu": "64", "memory": "900Gi"}},
            "submounts": [
                {"type": "pvc", "name": "cache", "mountPath": "/cache", "size": "2Ti"},
            ],
        },
        {
            "name": "cpu",
            "replicas": 32,
            "weight": 50,
            "resources": {"limits": {"cpu": "64", "memory": "256Gi"}},
            "nodeConfExtra": ["RealMemory=250000"],
            "submounts": [
                {
                    "type": "emptyDir",
                    "name": "tmp",
                    "mountPath": "/local/tmp",
                    "sizeLimit": "200Gi",
                },
            ],
        },
    ],
    "partitions": [
        {
            "name": "gpu",
            "pools": ["h100", "a100"],
            "default": True,
            "maxTime": "7-00:00:00",
            "options": ["DefMemPerGPU=200000", "OverSubscribe=EXCLUSIVE"],
        },
        {
            "name": "h100",
            "pools": ["h100"],
            "maxTime": "2-00:00:00",
            "options": ["PriorityTier=10"],
        },
        {"name": "cpu", "pools": ["cpu"], "maxTime": "1-00:00:00"},
        {"name": "debug", "maxTime": "30:00", "options": ["MaxNodes=2"]},
    ],
    "jail": {
        "storageClass": "cephfs",
        "size": "10Ti",
        "submounts": [
            {
                "type": "pvc",
                "name": "datasets",
                "mountPath": "/datasets",
                "existingClaim": "shared-datasets",
                "readOnly": True,
            }
        ],
    },
    "accounting": {
        "mode": "external",
        "external": {
            "host": "mysql.databases.svc",
            "port": 3307,
            "user": "slurm_prod",
            "database": "prod_acct",
            "passwordSecret": {"name": "slurm-db", "key": "password"},
        },
        "purge": {
            "jobsAfter": "24months",
            "stepsAfter": "6months",
            "eventsAfter": "12month",
            "archive": True,
        },
    },
    "healthChecks": {"quick": {"intervalSeconds": 120, "nodeStates": ["IDLE", "MIXED"]}},
    "cgroups": {"enforce": True},
}

# The stable major: Slurm 24.11 with auth/slurm, no accounting, no quick checks, a single
# untyped GPU per node, a CPU pool sized by requests only, the jail on an existing claim.
LEGACY_24_11: dict[str, Any] = {
    "name": "legacy",
    "namespace": "slurm-legacy",
    "slurmVersion": "24.11",
    "auth": "slurm",
    "controller": {
        "slurmConfExtra": ["PrologEpilogTimeout=120", "KillWait=60"],
        "scheduler": {"parameters": ["bf_continue"]},
    },
    "login": {"service": {"type": "ClusterIP"}},
    "workerPools": [
        {
            "name": "cpu",
            "replicas": 3,
            "resources": {"requests": {"cpu": "500m", "memory": "4Gi"}},
        },
        {
            "name": "t4",
            "replicas": 2,
            "gpus": 1,
            "resources": {"limits": {"cpu": "8", "memory": "32Gi"}},
        },
    ],
    "jail": {"existingClaim": "legacy-jail"},
    "accounting": {"enabled": False},
    "healthChecks": {"quick": {"enabled": False}, "nccl": {"enabled": False}},
}


def dev_raw() -> dict[str, Any]:
    """The repo's dev stack: `slurm-stack:cluster` from Pulumi.dev.yaml."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    return document["config"]["slurm-stack:cluster"]


CASES = {
    "dev": dev_raw,
    "prod-gpu-26.05": lambda: copy.deepcopy(PROD_GPU),
    "legacy-24.11": lambda: copy.deepcopy(LEGACY_24_11),
}


def load_case(case: str) -> ClusterSpec:
    return load_spec(CASES[case]())


def rendered_files(spec: ClusterSpec) -> dict[str, str]:
    """Every rendered file by golden file name (node_conf strings get a final newline)."""
    files = {
        **slurm_config_files(spec),
        **login_config_files(spec),
        **accounting_config_files(spec),
    }
    for pool in spec.worker_pools:
        files[f"node-conf.{pool.name}.txt"] = node_conf(pool) + "\n"
    return files


def slurm_conf(spec: ClusterSpec) -> str:
    return slurm_config_files(spec)["slurm.conf"]


def reorder(value: Any) -> Any:
    """The same config with every mapping's keys inserted in reverse order."""
    if isinstance(value, dict):
        return {key: reorder(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reorder(item) for item in value]
    return value


# --------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_files(case):
    files = rendered_files(load_case(case))
    directory = GOLDEN / case
    if UPDATE:
        directory.mkdir(parents=True, exist_ok=True)
        for path in directory.iterdir():
            if path.name not in files:
                path.unlink()
        for name, text in files.items():
            (directory / name).write_bytes(text.encode())
    assert directory.is_dir(), f"no golden files for {case}: run with UPDATE_GOLDEN=1"
    on_disk = {path.name: path.read_bytes() for path in directory.iterdir()}
    assert sorted(on_disk) == sorted(files)
    for name, text in files.items():
        # Compare text first for a readable diff, then bytes for an exact match.
        assert on_disk[name].decode() == text, f"{case}/{name} differs from the golden file"
        assert on_disk[name] == text.encode()


def test_golden_cases_cover_both_versions_and_auth_types():
    specs = [load_case(case) for case in CASES]
    assert {spec.slurm_version for spec in specs} == {"24.11", "26.05"}
    assert {spec.auth for spec in specs} == {"munge", "slurm"}
    assert {spec.cgroups.enforce for spec in specs} == {True, False}
    assert {spec.accounting.enabled for spec in specs} == {True, False}


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendering_is_deterministic(case):
    spec = load_case(case)
    assert rendered_files(spec) == rendered_files(spec)
    # Two separately loaded specs, one from a config written in another key order.
    first, second = load_case(case), load_spec(reorder(CASES[case]()))
    assert first == second
    assert rendered_files(first) == rendered_files(second)
    assert content_hash(rendered_files(first)) == content_hash(rendered_files(second))


# --------------------------------------------------------------------------- version awareness


def test_metrics_type_only_for_versions_that_know_it():
    spec = load_spec(copy.deepcopy(PROD_GPU))
    assert slurm_conf(spec).count("\nMetricsType=metrics/openmetrics\n") == 1

    # The same spec on 24.11: the loader would reject metrics, so build it around the rules.
    controller = spec.controller.model_copy(update={"slurm_conf_extra": []})
    legacy = spec.model_copy(update={"slurm_version": "24.11", "controller": controller})
    assert legacy.controller.metrics.enabled is True
    assert "MetricsType" not in slurm_conf(legacy)
    # An extra line the version does not know is refused, never written.
    with pytest.raises(ValueError, match=r"PrologTimeout needs Slurm 25\.05"):
        slurm_conf(spec.model_copy(update={"slurm_version": "24.11"}))

    raw = copy.deepcopy(LEGACY_24_11)
    raw["controller"]["metrics"] = {"enabled": True}
    with pytest.raises(SpecError):
        load_spec(raw)
    unchecked = ClusterSpec.model_validate(raw)  # pydantic alone; no relational rules
    assert "MetricsType" not in slurm_conf(unchecked)
    assert "Metrics" not in slurm_conf(unchecked)


def conf_value(conf: str, key: str) -> str | None:
    found = [line.split("=", 1)[1] for line in conf.splitlines() if line.startswith(f"{key}=")]
    return found[0] if found else None


@pytest.mark.parametrize("interval", [10, 60, 61, 300])
def test_the_health_check_timeout_is_below_its_interval(interval):
    # Slurm 26.05 logs an error at every start when HealthCheckTimeout (default 60) is not
    # below HealthCheckInterval; 24.11 has no HealthCheckTimeout.
    raw = copy.deepcopy(PROD_GPU)
    raw.setdefault("healthChecks", {}).setdefault("quick", {})["intervalSeconds"] = interval
    conf = slurm_conf(load_spec(raw))
    assert int(conf_value(conf, "HealthCheckInterval")) == interval
    # Set only where Slurm's default would not be below the interval: a config without it is
    # one that 24.11 daemons, still running while a version change rolls, can also parse.
    expected = interval - 1 if interval <= 60 else None
    timeout = conf_value(conf, "HealthCheckTimeout")
    assert (int(timeout) if timeout else None) == expected
    legacy = copy.deepcopy(LEGACY_24_11)
    legacy.setdefault("healthChecks", {}).setdefault("quick", {})["intervalSeconds"] = interval
    assert conf_value(slurm_conf(load_spec(legacy)), "HealthCheckTimeout") is None


def partition_line(conf: str, name: str) -> str:
    return next(line for line in conf.splitlines() if line.startswith(f"PartitionName={name} "))


def test_a_partition_defaults_a_jobs_memory_to_its_cpus_share_of_the_smallest_node():
    raw = copy.deepcopy(PROD_GPU)
    spec = load_spec(raw)
    conf = slurm_conf(spec)
    assert conf_value(conf, "EnforcePartLimits") == "ALL"
    for partition in spec.effective_partitions:
        pools = [p for p in spec.worker_pools if p.name in (partition.pools or [])] or list(
            spec.worker_pools
        )
        line = partition_line(conf, partition.name)
        if any(option.startswith("DefMem") for option in partition.options):
            assert "DefMemPerCPU" not in line  # the partition's own default
            continue
        shares = []
        for pool in pools:
            node = dict(part.split("=", 1) for part in node_conf(pool).split())
            shares.append(int(node["RealMemory"]) // int(node["CPUs"]))
        assert f" DefMemPerCPU={min(shares)}" in line, line


def test_a_pools_own_default_memory_per_cpu_is_its_share():
    raw = copy.deepcopy(PROD_GPU)
    raw["workerPools"][0]["defMemPerCpu"] = 1000
    spec = load_spec(raw)
    conf = slurm_conf(spec)
    checked = False
    for partition in spec.effective_partitions:
        line = partition_line(conf, partition.name)
        if any(option.startswith("DefMem") for option in partition.options):
            continue  # the partition's own default
        if partition.pools is None or raw["workerPools"][0]["name"] in partition.pools:
            assert " DefMemPerCPU=1000 " in line + " ", line
            checked = True
    assert checked


def test_a_default_memory_of_the_users_own_wins():
    raw = copy.deepcopy(PROD_GPU)
    raw["partitions"][0]["options"] = ["DefMemPerGPU=100000"]
    conf = slurm_conf(load_spec(raw))
    line = partition_line(conf, raw["partitions"][0]["name"])
    assert "DefMemPerCPU" not in line and "DefMemPerGPU=100000" in line
    raw = copy.deepcopy(PROD_GPU)
    raw["controller"]["slurmConfExtra"] = ["DefMemPerCPU=1000"]
    conf = slurm_conf(load_spec(raw))
    partitions = [line for line in conf.splitlines() if line.startswith("PartitionName")]
    assert not [line for line in partitions if "DefMemPerCPU" in line]
    # A pool whose CPUs slurmd counts itself (no CPU limit): no default can be derived.
    raw = copy.deepcopy(PROD_GPU)
    for pool in raw["workerPools"]:
        pool.setdefault("resources", {}).setdefault("limits", {}).pop("cpu", None)
    conf = slurm_conf(load_spec(raw))
    assert "DefMemPerCPU" not in conf


def scheduler_line(conf: str) -> str:
    return next(line for line in conf.splitlines() if line.startswith("SchedulerParameters="))


def test_requeued_jobs_wait_ten_seconds_where_slurm_lets_us_say_so():
    spec = load_spec(copy.deepcopy(PROD_GPU))
    assert scheduler_line(slurm_conf(spec)).endswith(",requeue_delay=10")
    scheduler = spec.controller.scheduler.model_copy(update={"parameters": ["requeue_delay=30"]})
    own = spec.model_copy(
        update={"controller": spec.controller.model_copy(update={"scheduler": scheduler})}
    )
    assert scheduler_line(slurm_conf(own)) == "SchedulerParameters=requeue_delay=30"
    legacy = load_spec(copy.deepcopy(LEGACY_24_11))
    assert "requeue_delay" not in slurm_conf(legacy)


def test_root_jobs_are_refused_and_every_job_gets_the_epilog_unless_the_jail_allows_root():
    spec = load_spec(copy.deepcopy(PROD_GPU))
    conf = slurm_conf(spec)
    assert f"Epilog={paths.EPILOG}" in conf.splitlines()
    assert "DisableRootJobs=YES" in conf.splitlines()
    jail = spec.jail.model_copy(update={"allow_root_jobs": True})
    allowed = slurm_conf(spec.model_copy(update={"jail": jail}))
    assert "DisableRootJobs" not in allowed and f"Epilog={paths.EPILOG}" in allowed


def test_the_plugin_epilog_and_entrypoint_agree_on_the_job_directories():
    plugin = plugin_args(load_spec(copy.deepcopy(PROD_GPU)))
    assert f"job_tmp={paths.JOB_TMP_DIR}" in plugin and f"job_shm={paths.JOB_SHM_DIR}" in plugin
    root = Path(__file__).resolve().parent.parent / "images"
    for script in (root / "worker" / "epilog", root / "base" / "entrypoint"):
        text = script.read_text()
        assert f"JOB_TMP_DIR={paths.JOB_TMP_DIR}" in text, script
        assert f"JOB_SHM_DIR={paths.JOB_SHM_DIR}" in text, script


def test_metrics_off_emits_no_metrics_type():
    spec = load_spec(copy.deepcopy(PROD_GPU))
    off = spec.model_copy(
        update={
            "controller": spec.controller.model_copy(
                update={"metrics": spec.controller.metrics.model_copy(update={"enabled": False})}
            )
        }
    )
    assert "MetricsType" not in slurm_conf(off)


def test_extra_lines_unknown_to_the_version_are_never_emitted():
    spec = load_spec(copy.deepcopy(PROD_GPU))
    controller = spec.controller.model_copy(
        update={
            "metrics": spec.controller.metrics.model_copy(update={"enabled": False}),
            "slurm_conf_extra": ["MetricsType=metrics/openmetrics", "PrologTimeout=300"],
        }
    )
    legacy = spec.model_copy(update={"slurm_version": "24.11", "controller": controller})
    with pytest.raises(ValueError, match=r"MetricsType needs Slurm 25\.11"):
        slurm_conf(legacy)


def _pools_config(replicas: int, max_node_count: int = 1000) -> dict[str, Any]:
    return {
        "name": "scale",
        "jail": {"storageClass": "nfs"},
        "controller": {"maxNodeCount": max_node_count},
        "workerPools": [
            {"name": "cpu", "replicas": replicas},
            {"name": "big", "replicas": replicas, "resources": {"limits": {"memory": "512Gi"}}},
            {"name": "gpu", "replicas": replicas, "gpus": 8, "gpuType": "h100"},
        ],
        "partitions": [{"name": "all"}, {"name": "gpu", "pools": ["gpu"]}],
    }


def test_slurm_conf_does_not_depend_on_node_count():
    small = load_spec(_pools_config(replicas=4))
    large = load_spec(_pools_config(replicas=200))
    assert sum(p.replicas for p in large.worker_pools) == 600
    assert slurm_conf(small) == slurm_conf(large)
    # Nothing the nodes fetch changes either: scaling a pool is only a replica count.
    assert slurm_config_files(small) == slurm_config_files(large)
    assert [node_conf(p) for p in small.worker_pools] == [node_conf(p) for p in large.worker_pools]
    assert "NodeName=" not in slurm_conf(large)


def test_max_node_count_changes_only_its_own_line():
    before = slurm_conf(load_spec(_pools_config(replicas=4, max_node_count=1000)))
    after = slurm_conf(load_spec(_pools_config(replicas=4, max_node_count=4000)))
    changed = [
        (old, new)
        for old, new in zip(before.splitlines(), after.splitlines(), strict=True)
        if old != new
    ]
    assert changed == [("MaxNodeCount=1000", "MaxNodeCount=4000")]


# --------------------------------------------------------------------------- config hash


def _with(raw: dict[str, Any], mutate) -> ClusterSpec:
    raw = copy.deepcopy(raw)
    mutate(raw)
    return load_spec(raw)


def test_content_hash_follows_partition_options():
    base = load_spec(copy.deepcopy(PROD_GPU))
    changed = _with(PROD_GPU, lambda r: r["partitions"][1]["options"].append("Hidden=YES"))
    base_files, changed_files = slurm_config_files(base), slurm_config_files(changed)
    assert base_files["slurm.conf"] != changed_files["slurm.conf"]
    assert content_hash(base_files) != content_hash(changed_files)


def test_content_hash_ignores_insertion_order_and_replicas():
    base = slurm_config_files(load_spec(copy.deepcopy(PROD_GPU)))
    reordered = slurm_config_files(load_spec(reorder(PROD_GPU)))
    assert content_hash(base) == content_hash(reordered)
    assert content_hash(dict(reversed(list(base.items())))) == content_hash(base)

    # Scaling a pool does not change the config, so it does not roll the controller.
    scaled = _with(PROD_GPU, lambda r: r["workerPools"][2].update(replicas=64))
    assert content_hash(slurm_config_files(scaled)) == content_hash(base)


def test_ten_thousand_nodes_render_the_same_slurm_conf_as_twelve():
    """At one controller.maxNodeCount, a pool's size is not in any Slurm config file (the
    README's claim); MaxNodeCount itself is, and must hold every node."""

    def sized(replicas: int) -> dict[str, str]:
        def change(raw: dict) -> None:
            raw["controller"]["maxNodeCount"] = 10016
            for pool in raw["workerPools"]:
                pool["replicas"] = 0
            raw["workerPools"][0]["replicas"] = replicas

        return slurm_config_files(_with(PROD_GPU, change))

    twelve, ten_thousand = sized(12), sized(10000)
    assert ten_thousand == twelve
    assert "MaxNodeCount=10016" in twelve["slurm.conf"]


def test_content_hash_changes_when_and_only_when_a_file_changes():
    files = rendered_files(load_spec(copy.deepcopy(PROD_GPU)))
    digest = content_hash(files)
    assert re.fullmatch(r"[0-9a-f]{10}", digest)
    assert content_hash(dict(files)) == digest
    for name in files:
        edited = dict(files)
        edited[name] = files[name] + "#\n"
        assert content_hash(edited) != digest, name
        renamed = {(f"{key}.new" if key == name else key): text for key, text in files.items()}
        assert content_hash(renamed) != digest, name
    fewer = {key: text for key, text in files.items() if key != "gres.conf"}
    assert content_hash(fewer) != digest
    # A name/content boundary cannot be shifted to forge the same hash.
    assert content_hash({"a": "bc"}) != content_hash({"ab": "c"})


def test_login_change_leaves_the_slurm_config_hash_alone():
    base = load_spec(copy.deepcopy(PROD_GPU))
    changed = _with(PROD_GPU, lambda r: r["login"]["sshdExtra"].append("LoginGraceTime 30"))
    assert content_hash(slurm_config_files(base)) == content_hash(slurm_config_files(changed))
    assert content_hash(login_config_files(base)) != content_hash(login_config_files(changed))


# --------------------------------------------------------------------------- overrides


def _keyword_lines(text: str, keyword: str, separator: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.split(separator, 1)[0].strip().lower() == keyword.lower()
    ]


def test_sshd_extra_overrides_a_default_keyword_instead_of_duplicating_it():
    raw = copy.deepcopy(dev_raw())
    raw["login"]["sshdExtra"] = ["ClientAliveInterval 60", "x11forwarding yes", "MaxSessions 50"]
    text = login_config_files(load_spec(raw))["sshd_config"]
    assert _keyword_lines(text, "ClientAliveInterval", " ") == ["ClientAliveInterval 60"]
    assert _keyword_lines(text, "X11Forwarding", " ") == ["x11forwarding yes"]
    assert _keyword_lines(text, "MaxSessions", " ") == ["MaxSessions 50"]
    # Untouched defaults stay, once each.
    assert _keyword_lines(text, "PermitRootLogin", " ") == ["PermitRootLogin prohibit-password"]
    assert _keyword_lines(text, "ChrootDirectory", " ") == ["ChrootDirectory /mnt/jail"]
    assert len(_keyword_lines(text, "HostKey", " ")) == 3


# What an OpenSSH 9.2 client (Debian 12, the host the cluster tests log in from) offers by
# default, in its order of preference (`ssh -Q kex` etc. and ssh_config(5) of 9.2).
OPENSSH_9_2_CLIENT = {
    "KexAlgorithms": [
        "sntrup761x25519-sha512@openssh.com",
        "curve25519-sha256",
        "curve25519-sha256@libssh.org",
        "ecdh-sha2-nistp256",
        "ecdh-sha2-nistp384",
        "ecdh-sha2-nistp521",
        "diffie-hellman-group-exchange-sha256",
        "diffie-hellman-group16-sha512",
        "diffie-hellman-group18-sha512",
        "diffie-hellman-group14-sha256",
    ],
    "Ciphers": [
        "chacha20-poly1305@openssh.com",
        "aes128-ctr",
        "aes192-ctr",
        "aes256-ctr",
        "aes128-gcm@openssh.com",
        "aes256-gcm@openssh.com",
    ],
    "MACs": [
        "umac-64-etm@openssh.com",
        "umac-128-etm@openssh.com",
        "hmac-sha2-256-etm@openssh.com",
        "hmac-sha2-512-etm@openssh.com",
        "hmac-sha1-etm@openssh.com",
        "umac-64@openssh.com",
        "umac-128@openssh.com",
        "hmac-sha2-256",
        "hmac-sha2-512",
        "hmac-sha1",
    ],
}
WEAK_SSH_ALGORITHMS = re.compile(r"cbc|3des|arcfour|md5|sha1|umac-64|nistp|diffie-hellman")


def _sshd_settings(text: str) -> dict[str, str]:
    lines = [line.split(None, 1) for line in text.splitlines() if line and line[0] != "#"]
    return {key.lower(): value for key, value in lines}


def test_sshd_is_hardened_by_default():
    settings = _sshd_settings(
        login_config_files(load_spec(copy.deepcopy(dev_raw())))["sshd_config"]
    )
    # Root with a key stays the admin's way into the jail; passwords never.
    assert settings["permitrootlogin"] == "prohibit-password"
    assert settings["passwordauthentication"] == "no"
    assert int(settings["maxauthtries"]) <= 3
    assert int(settings["logingracetime"]) <= 30
    for keyword in (
        "AllowTcpForwarding",
        "AllowStreamLocalForwarding",
        "AllowAgentForwarding",
        "PermitTunnel",
        "X11Forwarding",
    ):
        assert settings[keyword.lower()] == "no", keyword
    for keyword, client in OPENSSH_9_2_CLIENT.items():
        offered = settings[keyword.lower()].split(",")
        assert not [name for name in offered if WEAK_SSH_ALGORITHMS.search(name)], keyword
        assert set(client) & set(offered), keyword
    # That client gets its first choice of key exchange (post-quantum hybrid) and cipher.
    for keyword in ("KexAlgorithms", "Ciphers"):
        assert OPENSSH_9_2_CLIENT[keyword][0] in settings[keyword.lower()].split(","), keyword


def test_sshd_extra_can_turn_forwarding_back_on():
    raw = copy.deepcopy(dev_raw())
    raw["login"]["sshdExtra"] = ["AllowTcpForwarding local", "Ciphers aes256-gcm@openssh.com"]
    text = login_config_files(load_spec(raw))["sshd_config"]
    assert _keyword_lines(text, "AllowTcpForwarding", " ") == ["AllowTcpForwarding local"]
    assert _keyword_lines(text, "Ciphers", " ") == ["Ciphers aes256-gcm@openssh.com"]
    assert _keyword_lines(text, "AllowAgentForwarding", " ") == ["AllowAgentForwarding no"]


def test_slurm_conf_extra_overrides_a_default_key_instead_of_duplicating_it():
    raw = copy.deepcopy(dev_raw())
    raw["controller"]["slurmConfExtra"] = [
        "ReturnToService=1",
        "launchparameters=use_interactive_step,enable_nss_slurm",
        "MaxJobCount=50000",
    ]
    text = slurm_conf(load_spec(raw))
    assert _keyword_lines(text, "ReturnToService", "=") == ["ReturnToService=1"]
    assert _keyword_lines(text, "LaunchParameters", "=") == [
        "launchparameters=use_interactive_step,enable_nss_slurm"
    ]
    assert _keyword_lines(text, "MaxJobCount", "=") == ["MaxJobCount=50000"]
    # The extras come last, under their own heading.
    assert text.endswith(
        "\n# controller.slurmConfExtra\nReturnToService=1\n"
        "launchparameters=use_interactive_step,enable_nss_slurm\nMaxJobCount=50000\n"
    )


@pytest.mark.parametrize("option", ["MaxTime=1:00:00", "Default=YES", "Nodes=h100", "State=DOWN"])
def test_partition_options_do_not_duplicate_rendered_keys(option):
    raw = copy.deepcopy(PROD_GPU)
    raw["partitions"][2]["options"] = [option]
    try:
        spec = load_spec(raw)
    except SpecError as error:
        assert "partitions[2].options[0]" in {issue.path for issue in error.issues}
        return
    (line,) = [
        line for line in slurm_conf(spec).splitlines() if line.startswith("PartitionName=cpu ")
    ]
    keys = [token.split("=", 1)[0].lower() for token in line.split()]
    assert len(keys) == len(set(keys)), line


# --------------------------------------------------------------------------- slurm.conf structure

_TOKEN = r"[A-Za-z][A-Za-z0-9]*=\S+"
_LINE = re.compile(rf"^{_TOKEN}( {_TOKEN})*$")
STRUCTURE_SPECS = {
    **CASES,
    "scale": lambda: _pools_config(replicas=4),
    "minimal": lambda: {
        "name": "mini",
        "jail": {"storageClass": "nfs"},
        "workerPools": [{"name": "a"}, {"name": "b"}],
    },
}


@pytest.mark.parametrize("case", sorted(STRUCTURE_SPECS))
def test_slurm_conf_lines_are_key_value_comment_or_blank(case):
    spec = load_spec(STRUCTURE_SPECS[case]())
    text = slurm_conf(spec)
    assert text.endswith("\n") and not text.endswith("\n\n")
    for number, line in enumerate(text.splitlines(), 1):
        assert line == "" or line.startswith("# ") or _LINE.match(line), f"line {number}: {line!r}"
        assert line == line.rstrip(), f"line {number} has trailing space"

    settings = [line for line in text.splitlines() if line and not line.startswith("#")]
    # Configless dynamic nodes: no NodeName lines, one NodeSet per pool named after it.
    assert not any(line.lower().startswith("nodename=") for line in settings)
    nodesets = [line for line in settings if line.startswith("NodeSet=")]
    assert nodesets == [f"NodeSet={p.name} Feature={p.name}" for p in spec.worker_pools]
    # Partitions only over NodeSets, exactly one of them the default.
    partitions = [line for line in settings if line.startswith("PartitionName=")]
    assert [line.split()[0] for line in partitions] == [
        f"PartitionName={p.name}" for p in spec.effective_partitions
    ]
    pools = {p.name for p in spec.worker_pools}
    for line in partitions:
        fields = dict(token.split("=", 1) for token in line.split())
        assert set(fields["Nodes"].split(",")) <= pools, line
        assert fields["State"] == "UP"
    assert sum(" Default=YES " in f"{line} " for line in partitions) == 1
    # Every global key appears once (an override replaces, never repeats).
    global_keys = [
        line.split("=", 1)[0].lower()
        for line in settings
        if not line.startswith(("NodeSet=", "PartitionName="))
    ]
    assert len(global_keys) == len(set(global_keys))
    for key in ("clustername", "slurmctldhost", "slurmctldparameters", "maxnodecount"):
        assert key in global_keys
    assert "\nSlurmctldParameters=enable_configless\n" in text
    assert f"\nClusterName={spec.name}\n" in text


def test_default_partition_spans_every_pool():
    spec = load_spec(STRUCTURE_SPECS["minimal"]())
    assert slurm_conf(spec).endswith(
        "\nNodeSet=a Feature=a\nNodeSet=b Feature=b\n\n"
        "PartitionName=main Nodes=a,b Default=YES MaxTime=UNLIMITED State=UP\n"
    )


def test_optional_sections_follow_the_spec():
    legacy = slurm_conf(load_case("legacy-24.11"))
    prod = slurm_conf(load_case("prod-gpu-26.05"))
    dev = slurm_conf(load_case("dev"))
    # Accounting only when enabled.
    assert "AccountingStorage" not in legacy
    assert "\nAccountingStorageType=accounting_storage/slurmdbd\n" in dev
    # GPUs: GPU TRES only with GPU pools; the GRES type always, so that slurmd honours
    # gres.conf's AutoDetect=off (test_drain.py boots a cluster without GPUs).
    assert "\nGresTypes=gpu\n" in dev and "AccountingStorageTRES" not in dev
    assert "\nGresTypes=gpu\n" in prod and "\nAccountingStorageTRES=gres/gpu\n" in prod
    # Quick health checks only when enabled.
    assert "HealthCheck" not in legacy
    assert "\nHealthCheckNodeState=IDLE,MIXED\n" in prod
    # Cgroup enforcement switches the process tracking and task plugins.
    assert "\nProctrackType=proctrack/cgroup\n" in prod
    assert "\nTaskPlugin=task/affinity,task/cgroup\n" in prod
    assert "\nProctrackType=proctrack/linuxproc\n" in dev
    # Auth follows cluster.auth in slurm.conf and slurmdbd.conf.
    assert "\nAuthType=auth/slurm\nCredType=cred/slurm\n" in legacy
    spec = load_case("legacy-24.11")
    assert accounting_config_files(spec) == {}  # accounting is off: no slurmdbd.conf
    with_accounting = spec.model_copy(
        update={"accounting": spec.accounting.model_copy(update={"enabled": True})}
    )
    assert "\nAuthType=auth/slurm\n" in accounting_config_files(with_accounting)["slurmdbd.conf"]


def test_node_conf_per_pool():
    prod = {p.name: node_conf(p) for p in load_case("prod-gpu-26.05").worker_pools}
    assert prod["h100"] == (
        "Feature=h100,ib,nvlink Gres=gpu:h100:8 Weight=10 RealMemory=1685504 CPUs=120 "
        "CoreSpecCount=2"
    )
    # nodeConfExtra's RealMemory replaces the computed one.
    assert prod["cpu"] == "Feature=cpu Weight=50 CPUs=64 RealMemory=250000"
    legacy = {p.name: node_conf(p) for p in load_case("legacy-24.11").worker_pools}
    # Memory from requests when there is no limit; no CPUs for a fractional CPU request.
    assert legacy["cpu"] == "Feature=cpu Weight=1 RealMemory=3891"
    assert legacy["t4"] == "Feature=t4 Gres=gpu:1 Weight=1 RealMemory=31129 CPUs=8"
    # Each node's GPUs are its pod's devices (the entrypoint writes them): no File= here.
    gres = slurm_config_files(load_case("legacy-24.11"))["gres.conf"]
    lines = [line for line in gres.splitlines() if line and not line.startswith("#")]
    assert lines == ["AutoDetect=off", f"Include {paths.NODE_GRES_CONF}"]
    # The chroot plugin reads the same file: a step sees only its GPUs. With cgroups.enforce
    # the device cgroup confines them (and Slurm numbers them for tasks).
    assert f"gpus={paths.NODE_GRES_CONF}" in plugin_args(load_case("legacy-24.11"))
    assert not [a for a in plugin_args(load_case("prod-gpu-26.05")) if a.startswith("gpus=")]


def plugin_args(spec: ClusterSpec) -> list[str]:
    """The chroot plugin's arguments on the `required` line of plugstack.conf."""
    conf = slurm_config_files(spec)["plugstack.conf"]
    line = next(line for line in conf.splitlines() if line.startswith("required "))
    return line.split()[2:]


def test_plugin_gets_the_gpu_driver_directory_only_with_gpu_pools():
    assert "gpu_driver=/run/slurm-stack/gpu-driver" in plugin_args(load_case("prod-gpu-26.05"))
    assert not [arg for arg in plugin_args(load_case("dev")) if arg.startswith("gpu_driver=")]


def test_opting_out_of_the_jail_is_rendered_only_when_allowed():
    spec = load_case("dev")
    assert not [arg for arg in plugin_args(spec) if arg.startswith("allow_opt_out")]
    allowed = spec.model_copy(update={"jail": spec.jail.model_copy(update={"allow_opt_out": True})})
    assert "allow_opt_out=1" in plugin_args(allowed)


def test_dcgm_joins_the_quick_checks_of_gpu_pools_only_when_asked():
    spec = load_case("prod-gpu-26.05")
    configs = {pool.name: json.loads(healthcheck_config(spec, pool)) for pool in spec.worker_pools}
    assert not any("dcgm" in config for config in configs.values())
    raw = spec.model_dump(by_alias=True, exclude_unset=True)
    raw["healthChecks"] = {"dcgm": {"quick": True, "timeoutSeconds": 45}}
    asked = load_spec(raw)
    configs = {p.name: json.loads(healthcheck_config(asked, p)) for p in asked.worker_pools}
    assert configs["h100"]["dcgm"] is True and configs["h100"]["dcgm_timeout_seconds"] == 45
    assert "dcgm" not in configs["cpu"]  # no GPU, nothing for DCGM to diagnose


def test_periodic_dcgm_reaches_the_benchmark_job_only_when_asked():
    spec = load_case("prod-gpu-26.05")

    def submitter_env(spec):
        cronjob = nccl_cronjob(spec, "config")
        [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        return {item["name"]: item.get("value") for item in container["env"]}

    assert "NCCL_DCGM_TIMEOUT_SECONDS" not in submitter_env(spec)
    raw = spec.model_dump(by_alias=True, exclude_unset=True)
    raw["healthChecks"] = {"dcgm": {"periodic": True, "periodicTimeoutSeconds": 1800}}
    assert submitter_env(load_spec(raw))["NCCL_DCGM_TIMEOUT_SECONDS"] == "1800"


def _containers(spec: ClusterSpec, **settings: Any) -> ClusterSpec:
    raw = spec.model_dump(by_alias=True, exclude_unset=True)
    raw["containers"] = {"enabled": True, **settings}
    return load_spec(raw)


def test_container_jobs_are_offered_only_when_enabled():
    spec = load_case("dev")
    assert not [arg for arg in plugin_args(spec) if arg.startswith("container_")]
    node = plugin_args(_containers(spec, insecureRegistries=["reg.local:5000", "10.0.0.7"]))
    assert f"container_fetch={paths.CONTAINER_FETCH}" in node
    assert f"container_cache={paths.CONTAINER_CACHE_NODE_DIR}" in node
    assert "container_insecure=reg.local:5000,10.0.0.7" in node
    jail = plugin_args(_containers(spec, cache="jail"))
    assert f"container_cache={paths.CONTAINER_CACHE_JAIL_DIR}" in jail
    assert paths.CONTAINER_CACHE_JAIL_DIR.startswith(paths.JAIL_DIR + "/")
    assert not [arg for arg in jail if arg.startswith("container_insecure")]


def test_container_jobs_give_workers_registry_credentials_and_a_node_cache_when_used():
    def container_volumes(spec: ClusterSpec) -> list[tuple[str, str, str]]:
        found = []
        for pool in spec.worker_pools:
            pod = pool_statefulset(spec, pool)["spec"]["template"]["spec"]
            volumes = {v["name"]: v for v in pod["volumes"]}
            [slurmd] = pod["containers"]
            for mount in slurmd["volumeMounts"]:
                if mount["name"] in ("container-cache", "registry-auth"):
                    source = json.dumps({k: v for k, v in volumes[mount["name"]].items()})
                    found.append((mount["mountPath"], str(mount.get("readOnly", False)), source))
        return found

    spec = load_case("dev")
    assert container_volumes(spec) == []
    # The credentials' Secret is optional: setting containerRegistryAuth later, or removing
    # it, changes files in the pods, not their template. Root reads them, nobody else.
    auth = (
        paths.REGISTRY_AUTH_DIR,
        "True",
        '{"name": "registry-auth", "secret": {"secretName": "dev-registry-auth", '
        '"optional": true, "defaultMode": 256}}',
    )
    cache = (
        paths.CONTAINER_CACHE_NODE_DIR,
        "False",
        '{"name": "container-cache", "emptyDir": {}}',
    )
    pools = len(spec.worker_pools)
    assert container_volumes(_containers(spec, cache="jail")) == [auth] * pools
    assert container_volumes(_containers(spec)) == [auth, cache] * pools

    # No capability comes with container jobs: slurmd holds what the jail already needs.
    def security(spec: ClusterSpec) -> list[Any]:
        return [
            pool_statefulset(spec, pool)["spec"]["template"]["spec"]["containers"][0][
                "securityContext"
            ]
            for pool in spec.worker_pools
        ]

    assert security(_containers(spec)) == security(spec)
