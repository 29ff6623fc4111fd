"""Spec loading: valid stack configs fill defaults; invalid ones name every bad key at once."""

import base64
import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from slurm_stack.spec import Partition, SpecError, load_spec
from slurm_stack.spec.models import (
    MARIADB_IMAGE,
    EmptyDirSubmount,
    HostPathSubmount,
    MemorySubmount,
    PvcSubmount,
)
from slurm_stack.spec.versions import SUPPORTED_VERSIONS

ROOT = Path(__file__).resolve().parents[1]
KEY = "slurm-stack:cluster"

ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqyBO8cZ1qbBKq1WLHVpAMsT5t7dfBZb5CmG0r0lMb2 admin@example"
)


# Public keys made here (no private key is kept): `ssh-keygen`'s lines, and blobs put together
# field by field (the SSH wire format: length-prefixed strings) for the types and the damage
# cryptography does not write.
def _openssh(private_key: Any) -> str:
    return (
        private_key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def _blob(*fields: bytes | str) -> str:
    data = b"".join(
        len(f).to_bytes(4, "big") + (f.encode() if isinstance(f, str) else f) for f in fields
    )
    return base64.b64encode(data).decode()


def _mpint(number: int) -> bytes:
    return number.to_bytes(number.bit_length() // 8 + 1, "big")


def _point(curve: ec.EllipticCurve) -> bytes:
    return (
        ec.generate_private_key(curve)
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )


_ED25519_RAW = (
    ed25519.Ed25519PrivateKey.generate()
    .public_key()
    .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
)
RSA = _openssh(rsa.generate_private_key(public_exponent=65537, key_size=2048)) + " bob@example"
RSA_1024 = _openssh(rsa.generate_private_key(public_exponent=65537, key_size=1024))
ECDSA = {
    bits: _openssh(ec.generate_private_key(curve))
    for bits, curve in ((256, ec.SECP256R1()), (384, ec.SECP384R1()), (521, ec.SECP521R1()))
}
SK_ED25519 = "sk-ssh-ed25519@openssh.com " + _blob(
    "sk-ssh-ed25519@openssh.com", _ED25519_RAW, "ssh:"
)
SK_ECDSA = "sk-ecdsa-sha2-nistp256@openssh.com " + _blob(
    "sk-ecdsa-sha2-nistp256@openssh.com", "nistp256", _point(ec.SECP256R1()), "ssh:"
)
ED25519_BLOB = ED25519.split()[1]
# An RSA key of 768 bits: cryptography makes none under 1024, so its fields are written here
# (an odd modulus with the top bit set is all a public key needs to be read).
RSA_768 = "ssh-rsa " + _blob("ssh-rsa", _mpint(65537), _mpint((1 << 767) | 12345))

MINIMAL: dict[str, Any] = {
    "name": "mini",
    "jail": {"storageClass": "nfs"},
    "workerPools": [{"name": "cpu"}],
}

# A production-like cluster: two 8-GPU pools, external accounting, NodePort login,
# submounts of every type, explicit partitions.
FULL: dict[str, Any] = {
    "name": "prod",
    "namespace": "hpc",
    "slurmVersion": "26.05",
    "images": {
        "registry": "registry.example.com/slurm-stack",
        "tag": "26.05-0.1.0",
        "pullSecrets": ["registry-credentials"],
        "jail": "registry.example.com/jails/ubuntu@sha256:" + "ab" * 32,
    },
    "controller": {
        "maxNodeCount": 64,
        "metrics": {"enabled": True},
        "slurmConfExtra": ["MaxJobCount=100000", "PrologTimeout=300"],
    },
    "login": {
        "replicas": 2,
        "service": {"type": "NodePort", "nodePort": 30022},
        "rootAuthorizedKeys": [ED25519],
        "users": [{"name": "alice", "authorizedKeys": [ED25519]}],
        "sshdExtra": ["MaxSessions 50"],
    },
    "workerPools": [
        {
            "name": "h100",
            "replicas": 16,
            "gpus": 8,
            "gpuType": "h100",
            "features": ["ib", "nvlink"],
            "resources": {
                "requests": {"cpu": "120", "memory": "1800Gi"},
                "limits": {"cpu": "120", "memory": "1800Gi"},
            },
            "submounts": [
                {
                    "type": "emptyDir",
                    "name": "tmp",
                    "mountPath": "/local/tmp",
                    "sizeLimit": "100Gi",
                },
                {"type": "memory", "name": "ramdisk", "mountPath": "/ramdisk", "sizeLimit": "64Gi"},
                {
                    "type": "hostPath",
                    "name": "nvme",
                    "mountPath": "/scratch",
                    "hostPath": "/mnt/nvme/scratch",
                },
            ],
        },
        {
            "name": "h200",
            "replicas": 8,
            "gpus": 8,
            "gpuType": "h200",
            "submounts": [
                {
                    "type": "pvc",
                    "name": "cache",
                    "mountPath": "/cache",
                    "size": "2Ti",
                    "storageClass": "local-nvme",
                }
            ],
        },
    ],
    "partitions": [
        {
            "name": "gpu",
            "default": True,
            "maxTime": "7-00:00:00",
            "options": ["DefMemPerGPU=200000"],
        },
        {"name": "h100", "pools": ["h100"], "maxTime": "2-00:00:00"},
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
            "passwordSecret": {"name": "slurm-db", "key": "password"},
        },
        "purge": {"jobsAfter": "24month"},
    },
}


def dev_raw() -> dict[str, Any]:
    """The repo's dev stack: `slurm-stack:cluster` from Pulumi.dev.yaml."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    return document["config"][KEY]


# --------------------------------------------------------------------------- valid configs


def test_minimal_spec_fills_defaults():
    spec = load_spec(copy.deepcopy(MINIMAL))

    assert spec.name == "mini"
    assert spec.namespace == "slurm"
    assert spec.slurm_version == "26.05"
    assert spec.auth == "munge"
    # Images: <registry>/<component>:<slurmVersion>-<revision>; mariadb pinned upstream.
    assert spec.image("controller") == "ghcr.io/slurm-stack/controller:26.05-0.1.0"
    assert spec.image("worker") == "ghcr.io/slurm-stack/worker:26.05-0.1.0"
    assert spec.image("jail") == "ghcr.io/slurm-stack/jail:26.05-0.1.0"
    assert spec.image("mariadb") == MARIADB_IMAGE == "docker.io/library/mariadb:11.8.3"
    assert spec.images.pull_policy == "IfNotPresent"
    # Controller
    assert spec.controller.max_node_count == 1024
    assert spec.controller.state_volume.size == "10Gi"
    assert spec.controller.scheduler.type == "sched/backfill"
    assert spec.controller.scheduler.select_type_parameters == "CR_Core_Memory"
    assert spec.controller.metrics.enabled is False
    assert spec.controller.slurm_conf_extra == []
    # Login
    assert spec.login.replicas == 1
    assert spec.login.service.type == "LoadBalancer"
    assert spec.login.service.port == 22
    assert spec.login.service.node_port is None
    # The pool
    (pool,) = spec.worker_pools
    assert (pool.name, pool.replicas, pool.gpus, pool.gpu_type) == ("cpu", 1, 0, None)
    assert pool.weight == 1
    assert pool.shm_size == "16Gi"
    assert (pool.drain.policy, pool.drain.effective_wait_seconds) == ("requeue", 300)
    assert pool.drain.max_unavailable == 1
    assert pool.resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert pool.resources.limits == {}
    assert spec.gpu_pools == []
    # Partitions: none configured -> one default partition over all pools.
    assert spec.partitions == []
    assert spec.effective_partitions == [
        Partition(name="main", pools=None, default=True, max_time="UNLIMITED")
    ]
    # Jail, accounting, health checks, cgroups
    assert spec.jail.storage_class == "nfs"
    assert spec.jail.existing_claim is None
    assert spec.jail.size == "100Gi"
    assert spec.accounting.enabled is True
    assert spec.accounting.mode == "embedded"
    assert spec.accounting.embedded.volume.size == "20Gi"
    assert spec.health_checks.quick.enabled is True
    assert spec.health_checks.quick.interval_seconds == 300
    assert spec.health_checks.quick.node_states == ["ANY"]
    assert spec.health_checks.nccl.enabled is None
    assert spec.nccl_enabled is False  # no GPU pool -> the NCCL benchmark is off
    assert spec.cgroups.enforce is False


def test_effective_default_partition_covers_every_pool():
    raw = copy.deepcopy(MINIMAL)
    raw["workerPools"] = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    spec = load_spec(raw)
    (partition,) = spec.effective_partitions
    assert partition.name == "main"
    assert partition.default is True
    assert partition.pools is None  # None = every pool


def test_first_partition_becomes_default_when_none_is_marked():
    raw = copy.deepcopy(MINIMAL)
    raw["workerPools"] = [{"name": "a"}, {"name": "b"}]
    raw["partitions"] = [{"name": "short", "pools": ["a"]}, {"name": "long"}]
    spec = load_spec(raw)
    assert [(p.name, p.default) for p in spec.effective_partitions] == [
        ("short", True),
        ("long", False),
    ]
    # The configured partitions themselves are untouched.
    assert [p.default for p in spec.partitions] == [False, False]


def test_full_production_spec():
    spec = load_spec(copy.deepcopy(FULL))

    assert [pool.name for pool in spec.gpu_pools] == ["h100", "h200"]
    assert all(pool.gpus == 8 for pool in spec.gpu_pools)
    assert spec.nccl_enabled is True  # GPU pools -> on by default
    assert spec.health_checks.nccl.thresholds_gbps["h100"] == 350.0
    # Image tag and registry apply to every project image; an explicit ref wins.
    assert spec.image("worker") == "registry.example.com/slurm-stack/worker:26.05-0.1.0"
    assert spec.image("jail") == FULL["images"]["jail"]
    # External accounting with a Secret for the password.
    assert spec.accounting.mode == "external"
    assert spec.accounting.external.host == "mysql.databases.svc"
    assert spec.accounting.external.port == 3306
    assert spec.accounting.external.user == "slurm"
    assert spec.accounting.external.database == "slurm_acct_db"
    assert spec.accounting.external.password_secret is not None
    assert spec.accounting.external.password_secret.key == "password"
    assert spec.accounting.purge.jobs_after == "24month"
    assert spec.accounting.purge.steps_after is None
    # NodePort login
    assert spec.login.service.type == "NodePort"
    assert spec.login.service.node_port == 30022
    assert spec.login.users[0].authorized_keys == [ED25519]
    # Submounts of every type, parsed into their own models.
    h100, h200 = spec.worker_pools
    assert [type(s) for s in h100.submounts] == [
        EmptyDirSubmount,
        MemorySubmount,
        HostPathSubmount,
    ]
    assert h100.submounts[2].read_only is False
    (cache,) = h200.submounts
    assert isinstance(cache, PvcSubmount)
    assert (cache.size, cache.existing_claim) == ("2Ti", None)
    (datasets,) = spec.jail.submounts
    assert isinstance(datasets, PvcSubmount)
    assert (datasets.existing_claim, datasets.read_only) == ("shared-datasets", True)
    # Partitions as configured: one is already the default.
    assert spec.effective_partitions == spec.partitions
    assert [(p.name, p.default, p.pools) for p in spec.partitions] == [
        ("gpu", True, None),
        ("h100", False, ["h100"]),
    ]
    assert spec.partitions[0].options == ["DefMemPerGPU=200000"]
    assert spec.controller.metrics.enabled is True


def test_dev_stack_config_loads():
    spec = load_spec(dev_raw())

    assert spec.name == "dev"
    assert spec.namespace == "slurm-dev"
    assert spec.slurm_version == "26.05"
    assert spec.image("controller") == "localhost/slurm-stack/controller:26.05-0.1.0"
    assert spec.login.service.type == "NodePort"
    assert spec.login.service.node_port == 30022
    assert [u.name for u in spec.login.users] == ["alice"]
    (pool,) = spec.worker_pools
    assert (pool.name, pool.replicas, pool.gpus) == ("cpu", 2, 0)
    assert pool.resources.limits == {"cpu": "2", "memory": "2Gi"}
    assert [s.mount_path for s in pool.submounts] == ["/scratch"]
    assert spec.nccl_enabled is False
    assert [(p.name, p.default, p.max_time) for p in spec.effective_partitions] == [
        ("main", True, "1-00:00:00")
    ]
    assert spec.jail.storage_class == "standard"
    assert spec.accounting.mode == "embedded"
    assert spec.accounting.embedded.volume.size == "2Gi"


def test_version_24_11_changes_default_image_tags():
    raw = copy.deepcopy(MINIMAL) | {"slurmVersion": "24.11"}
    spec = load_spec(raw)
    assert spec.image("worker") == "ghcr.io/slurm-stack/worker:24.11-0.1.0"


DIGEST = "sha256:" + "0123456789abcdef" * 4
PROJECT_IMAGES = ("controller", "worker", "login", "accounting", "munge", "jail", "ops", "sssd")


@pytest.mark.parametrize(
    "reference",
    [
        f"registry.example.com/slurm-stack/worker@{DIGEST}",
        f"registry.example.com/slurm-stack/worker:26.05-0.1.0@{DIGEST}",
        f"registry.example.com:5000/slurm-stack/worker@{DIGEST}",
    ],
    ids=["digest", "tag-and-digest", "registry-port-and-digest"],
)
def test_every_image_can_be_pinned_by_digest(reference: str) -> None:
    raw = copy.deepcopy(MINIMAL)
    raw["images"] = {component: reference for component in (*PROJECT_IMAGES, "mariadb")}
    raw["jail"]["populate"] = {"image": reference}
    spec = load_spec(raw)
    for component in (*PROJECT_IMAGES, "mariadb"):
        assert spec.image(component) == reference, component
    assert spec.jail.populate.image == reference


@pytest.mark.parametrize(
    "host_path",
    [
        "/mnt/nvme/scratch",
        "/var/lib/slurm-scratch",
        "/var/tmp/cache",
        "/runner",
        "/etcd-backup",
        "/devel",
        "/home/scratch",
        "/data",
    ],
)
def test_host_paths_beside_the_node_system_directories_are_fine(host_path: str) -> None:
    raw = copy.deepcopy(MINIMAL)
    raw["workerPools"][0]["submounts"] = [
        {"type": "hostPath", "name": "s", "mountPath": "/s", "hostPath": host_path}
    ]
    (submount,) = load_spec(raw).worker_pools[0].submounts
    assert isinstance(submount, HostPathSubmount) and submount.host_path == host_path


def test_nccl_can_be_turned_off_for_gpu_pools_without_a_gpu_type():
    raw = copy.deepcopy(MINIMAL)
    raw["workerPools"] = [{"name": "gpu", "gpus": 4}]
    raw["healthChecks"] = {"nccl": {"enabled": False}}
    spec = load_spec(raw)
    assert spec.nccl_enabled is False
    assert spec.worker_pools[0].gpu_type is None


def test_snake_case_keys_are_accepted_too():
    raw = {
        "name": "mini",
        "jail": {"storage_class": "nfs"},
        "worker_pools": [{"name": "cpu", "shm_size": "1Gi"}],
    }
    spec = load_spec(raw)
    assert spec.worker_pools[0].shm_size == "1Gi"


def test_spec_is_immutable():
    spec = load_spec(copy.deepcopy(MINIMAL))
    with pytest.raises(ValueError):
        spec.name = "other"  # type: ignore[misc]


def test_loader_does_not_modify_its_input():
    raw = copy.deepcopy(FULL)
    load_spec(raw)
    assert raw == FULL


@pytest.mark.parametrize("raw", [None, "name: dev", ["a"], 3])
def test_non_object_config_is_one_error_at_the_config_key(raw):
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    assert [issue.path for issue in info.value.issues] == [""]
    assert str(info.value).endswith(
        f"\n  {KEY}: must be an object (set it in Pulumi.<stack>.yaml under config)"
    )


def test_config_key_is_configurable():
    with pytest.raises(SpecError) as info:
        load_spec({"jail": {"storageClass": "x"}, "workerPools": [{"name": "a"}]}, config_key="k:c")
    assert "\n  k:c.name: required" in str(info.value)
    assert info.value.config_key == "k:c"


# --------------------------------------------------------------------------- invalid configs

# Every row of the table mutates this valid base. Pool 0 is a CPU pool, pool 1 a GPU pool.
BASE: dict[str, Any] = {
    "name": "prod",
    "jail": {"storageClass": "cephfs"},
    "workerPools": [
        {"name": "cpu", "replicas": 2},
        {"name": "gpu", "replicas": 2, "gpus": 8, "gpuType": "h100"},
    ],
    "partitions": [
        {"name": "batch", "default": True},
        {"name": "gpu", "pools": ["gpu"]},
    ],
}

DELETE = object()
# What an elastic pool needs besides its bounds: CPUs Slurm knows before any pod runs.
ELASTIC_RESOURCES = {"limits": {"cpu": "2", "memory": "1Gi"}}
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _tokens(path: str) -> list[str | int]:
    return [name if name else int(index) for name, index in _TOKEN.findall(path)]


def mutate(raw: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Apply {'workerPools[1].gpus': 99, 'jail.storageClass': DELETE, …} to a copy of raw."""
    raw = copy.deepcopy(raw)
    for path, value in changes.items():
        *parents, last = _tokens(path)
        node: Any = raw
        for token in parents:
            node = node.setdefault(token, {}) if isinstance(token, str) else node[token]
        if value is DELETE:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)
    return raw


def test_base_is_valid():
    load_spec(copy.deepcopy(BASE))


# Valid Kubernetes input that a real API server accepts (apimachinery's quantity grammar,
# robfig/cron's ParseStandard for a CronJob schedule).
UNUSUAL_BUT_VALID = [
    pytest.param({"workerPools[0].shmSize": "129e6"}, id="quantity-exponent"),
    pytest.param({"workerPools[0].shmSize": "1E3"}, id="quantity-capital-exponent"),
    pytest.param({"workerPools[0].shmSize": ".5Gi"}, id="quantity-leading-dot"),
    pytest.param({"workerPools[0].shmSize": "+2Gi"}, id="quantity-plus"),
    pytest.param({"healthChecks.nccl.schedule": "@weekly"}, id="cron-weekly"),
    pytest.param({"healthChecks.nccl.schedule": "@daily"}, id="cron-daily"),
    pytest.param({"healthChecks.nccl.schedule": "@every 6h"}, id="cron-every"),
    pytest.param({"healthChecks.nccl.schedule": "0 3 ? * SUN"}, id="cron-question-mark"),
    pytest.param({"healthChecks.nccl.schedule": "*/30 1-5 * JAN-JUN 1-5"}, id="cron-ranges"),
    pytest.param({"labels": {"example.com/team": "ml", "tier": ""}}, id="label-prefix-empty-value"),
    pytest.param(
        {
            "annotations": {"example.com/policy": '{\n\t"owner": "ml"\n}\n'},
            "login.service.annotations": {
                "service.example.com/cert": "-----BEGIN CERTIFICATE-----\nMIIB\n"
                "-----END CERTIFICATE-----\n",
                "example.com/note": " indented ",
            },
        },
        id="annotation-values-over-lines",
    ),
    # `default` is a user namespace in Kubernetes (spec/fields.py, SYSTEM_NAMESPACE_PREFIX).
    pytest.param({"namespace": "default"}, id="namespace-default"),
    pytest.param({"namespace": "kube"}, id="namespace-kube-without-the-dash"),
    pytest.param(
        {
            "jail.submounts": [
                {"type": "pvc", "name": "h", "mountPath": "/home", "existingClaim": "h"}
            ]
        },
        id="shared-claim-at-home",
    ),
    pytest.param(
        {"workerPools[0].submounts": [{"type": "emptyDir", "name": "s", "mountPath": "/opt/site"}]},
        id="submount-under-opt",
    ),
    pytest.param({"jail.storageClass": "fast.rwx-1"}, id="storage-class-subdomain"),
    pytest.param(
        {"workerPools[0].placement": {"tolerations": [{"operator": "Exists"}]}},
        id="toleration-everything",
    ),
]


@pytest.mark.parametrize("changes", UNUSUAL_BUT_VALID)
def test_unusual_but_valid_kubernetes_input_is_accepted(changes):
    load_spec(mutate(BASE, changes))


# Lines Slurm's parser takes that look unusual (slurm_stack/spec/slurm_options.py).
SLURM_LINES_VALID = [
    pytest.param(
        {
            "topology": {"rootSwitch": "spine"},
            "workerPools[0].switch": "leaf-a",
            "workerPools[1].switch": "leaf-a",
        },
        id="pools-sharing-a-leaf-switch",
    ),
    pytest.param({"controller.slurmConfExtra": ["maxjobcount=500k"]}, id="any-case-and-K"),
    pytest.param({"controller.slurmConfExtra": ["Prolog=/a", "Prolog=/b"]}, id="array-key-twice"),
    pytest.param(
        {"controller.slurmConfExtra": ['DownNodes=n1 State=DOWN Reason="bad psu"']},
        id="line-key-with-its-options-and-a-quoted-value",
    ),
    pytest.param(
        {"controller.slurmConfExtra": ["PowerAction=off Location=slurmd Program=/bin/off"]},
        id="power-action-on-26.05",
    ),
    pytest.param({"controller.slurmConfExtra": ["PrologEpilogTimeout=120"]}, id="26.05-reads-it"),
    pytest.param({"controller.slurmConfExtra": ["KillWait=0x3c"]}, id="hexadecimal"),
    pytest.param({"controller.slurmConfExtra": ['MaxJobCount="5000"']}, id="quoted-number"),
    pytest.param({"workerPools[0].nodeConfExtra": ["TmpDisk=INFINITE"]}, id="node-infinite"),
    pytest.param({"workerPools[0].nodeConfExtra": ["cpus=4"]}, id="node-any-case"),
    pytest.param(
        {"partitions[0].options": ["oversubscribe=FORCE:4", "Hidden=yes", "LLN=1"]},
        id="partition-any-case-and-booleans",
    ),
    pytest.param(
        {"slurmVersion": "24.11", "partitions[0].options": ["MaxNodes=UNLIMITED"]},
        id="partition-unlimited-on-24.11",
    ),
]


@pytest.mark.parametrize("changes", SLURM_LINES_VALID)
def test_unusual_but_valid_slurm_lines_are_accepted(changes):
    load_spec(mutate(BASE, changes))


# `pulumi config set --path` (and YAML) turn `true` and `42` into bool and int; Kubernetes
# label, annotation and node selector values are strings, so the spec takes their text.
SCALAR_TEXT = [
    pytest.param({"labels": {"managed": True}}, "labels", {"managed": "true"}, id="label-true"),
    pytest.param({"labels": {"gpu": False}}, "labels", {"gpu": "false"}, id="label-false"),
    pytest.param(
        {"annotations": {"replicas": 42}}, "annotations", {"replicas": "42"}, id="annotation-int"
    ),
    pytest.param(
        {"annotations": {"ratio": 1.5}}, "annotations", {"ratio": "1.5"}, id="annotation-float"
    ),
    pytest.param(
        {"annotations": {"offset": -3}}, "annotations", {"offset": "-3"}, id="annotation-negative"
    ),
    pytest.param({"labels": {"team": "hpc"}}, "labels", {"team": "hpc"}, id="label-string-kept"),
    pytest.param(
        {"login.service.annotations": {"internal": True}},
        "login.service.annotations",
        {"internal": "true"},
        id="service-annotation-true",
    ),
    pytest.param(
        {"controller.placement.nodeSelector": {"gpu": True, "zone": 1}},
        "controller.placement.nodeSelector",
        {"gpu": "true", "zone": "1"},
        id="node-selector-scalars",
    ),
]


@pytest.mark.parametrize(("changes", "path", "expected"), SCALAR_TEXT)
def test_string_maps_take_scalars_as_text(changes, path, expected):
    node: Any = load_spec(mutate(BASE, changes))
    for name in _tokens(path):
        node = getattr(node, re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), name))
    assert node == expected
    assert all(type(value) is str for value in node.values())


# sshdExtra lines the login image's sshd takes that look unusual (slurm_stack/spec/sshd.py;
# tests/test_sshd_config.py runs `sshd -t` on such lines in the image itself).
SSHD_LINES_VALID = [
    pytest.param({"login.sshdExtra": ["x11FORWARDING yes"]}, id="sshd-keyword-any-case"),
    pytest.param(
        {"login.sshdExtra": ["Banner /etc/issue.net", "ForceCommand internal-sftp"]},
        id="sshd-banner-from-the-image-and-a-global-force-command",
    ),
    pytest.param(
        {"login.sshdExtra": ['VersionAddendum "slurm login"', "AcceptEnv LANG LC_* COLORTERM"]},
        id="sshd-quoted-value-and-patterns",
    ),
    pytest.param({"login.sshdExtra": ["WarnWeakCrypto no"]}, id="sshd-keyword-new-in-forky"),
    pytest.param(
        {"login.sshdExtra": ["LoginGraceTime 2m", "ClientAliveInterval 1h30m", "MaxAuthTries 3"]},
        id="sshd-times-and-numbers",
    ),
    pytest.param(
        {"login.sshdExtra": ["ClientAliveInterval 90", "UnusedConnectionTimeout none"]},
        id="sshd-seconds-without-unit-and-none",
    ),
    pytest.param({"login.sshdExtra": ["LoginGraceTime 1.5s"]}, id="sshd-decimal-seconds-on-26.05"),
    pytest.param(
        {
            "login.sshdExtra": [
                "X11Forwarding YES",
                "LogLevel debug3",
                "GatewayPorts clientspecified",
            ]
        },
        id="sshd-words-in-any-case",
    ),
    pytest.param(
        {"login.sshdExtra": ["PermitTunnel point-to-point", "AllowStreamLocalForwarding local"]},
        id="sshd-words-beyond-yes-no",
    ),
    pytest.param(
        {"login.sshdExtra": ["MaxSessions 20 # per connection", 'MaxAuthTries "4"']},
        id="sshd-number-with-comment-and-quoted",
    ),
    pytest.param(
        {"slurmVersion": "24.11", "login.sshdExtra": ["GSSAPIStoreCredentialsOnRekey no"]},
        id="sshd-keyword-of-trixie-on-24.11",
    ),
]


@pytest.mark.parametrize("changes", SSHD_LINES_VALID)
def test_unusual_but_valid_sshd_lines_are_accepted(changes):
    load_spec(mutate(BASE, changes))


# Values tried for every keyword of the spec's value table (SSHD_VALUES), besides the keyword's
# own words as written, in lower and in upper case: whole numbers and their edges, times,
# words, more than one value, quotes and escapes.
SSHD_SAMPLE_VALUES = (
    *("0", "20", "+5", "-0", "007", "2147483647", "2147483648", "-1", "abc", "1.5", "0x10"),
    *("90", "2m", "1h30m", "2M", "1w", "1.5s", ".5", "1.5m", "5.", "10s5", "2min", "68y"),
    *("none", "yes", "no", "YES", "maybe", "true", "false", "1", "all", "transport", "LOUD"),
    *("yes no", '"yes"', "yes # a comment", "''", "\\yes"),
)


def sshd_value_samples(slurm_version: str) -> list[tuple[str, bool]]:
    """(line, whether the spec takes it) for every keyword of SSHD_VALUES and sample value."""
    from slurm_stack.spec.sshd import SSHD_VALUES, sshd_line_problem

    samples = []
    for keyword, value in SSHD_VALUES.values():
        words = re.findall(r"[A-Za-z0-9-]+", value.wants.removeprefix("one of "))
        own = [w for word in words for w in (word, word.lower(), word.upper())]
        for sample in dict.fromkeys((*SSHD_SAMPLE_VALUES, *own)):
            line = f"{keyword} {sample}"
            samples.append((line, sshd_line_problem(line, slurm_version) is None))
    return samples


def test_the_sshd_value_table_names_keywords_the_spec_lets_through():
    from slurm_stack.spec.sshd import (
        OWNED_SSHD_KEYWORDS,
        REFUSED_SSHD_KEYWORDS,
        SSHD_VALUES,
        keyword_data,
        keyword_versions,
    )

    assert set(SSHD_VALUES).isdisjoint(OWNED_SSHD_KEYWORDS | REFUSED_SSHD_KEYWORDS)
    for version in keyword_versions():
        known = {name.lower() for name in keyword_data(version)["keywords"]}
        assert set(SSHD_VALUES) - known == set(), version
    # Both verdicts occur for every keyword, so the sshd test below compares something.
    for keyword, _ in SSHD_VALUES.values():
        verdicts = {ok for line, ok in sshd_value_samples("26.05") if line.split()[0] == keyword}
        assert verdicts == {True, False}, keyword


@pytest.mark.parametrize("slurm_version", SUPPORTED_VERSIONS)
def test_sshd_judges_the_sample_values_as_the_spec_does(slurm_version, tmp_path):
    """The login image's `sshd -t` accepts every sample line the spec takes and refuses every
    one it refuses (each line alone in a config with a host key). Skips, saying why, without
    podman or the login image (images/build.sh): tests/test_sshd_config.py runs sshd there."""
    from tests.test_sshd_config import login_image

    image = login_image(slurm_version)
    samples = sshd_value_samples(slurm_version)
    cases = tmp_path / "cases"
    cases.mkdir()
    for i, (line, _) in enumerate(samples):
        (cases / f"{i}.conf").write_text(f"{line}\nHostKey /tmp/host_key\n")
    script = (
        'mkdir -p /run/sshd; ssh-keygen -q -N "" -t ed25519 -f /tmp/host_key; '
        'for f in /cases/*.conf; do sshd -t -f "$f" >/dev/null 2>&1; '
        'echo "$(basename "$f" .conf) $?"; done'
    )
    run = subprocess.run(
        [
            *("podman", "run", "--rm", "--network=none", "--entrypoint", "sh"),
            *("-v", f"{cases}:/cases:ro", image, "-c", script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    status = dict(line.split() for line in run.stdout.splitlines())
    assert len(status) == len(samples), run.stdout
    disagree = [
        f"{line!r}: spec {'takes' if ok else 'refuses'} it, sshd -t exits {status[str(i)]}"
        for i, (line, ok) in enumerate(samples)
        if ok != (status[str(i)] == "0")
    ]
    assert disagree == [], "\n".join(disagree)


# Public keys of every type sshd reads, as `ssh-keygen` writes them (a comment or none).
SSH_KEYS_VALID = [
    pytest.param(ED25519, id="ssh-ed25519"),
    pytest.param(RSA, id="ssh-rsa-2048"),
    pytest.param(RSA_1024, id="ssh-rsa-1024-the-least-sshd-reads"),
    *(pytest.param(ECDSA[bits], id=f"ecdsa-sha2-nistp{bits}") for bits in sorted(ECDSA)),
    pytest.param(SK_ED25519 + " alice@yubikey", id="sk-ssh-ed25519"),
    pytest.param(SK_ECDSA, id="sk-ecdsa-sha2-nistp256"),
    pytest.param(f"ssh-ed25519 {ED25519_BLOB} Alice Example (laptop)", id="comment-with-spaces"),
]


@pytest.mark.parametrize("key", SSH_KEYS_VALID)
def test_every_key_type_sshd_reads_is_accepted(key):
    raw = mutate(BASE, {"login.rootAuthorizedKeys": [key]})
    raw["login"]["users"] = [{"name": "alice", "authorizedKeys": [ED25519, key]}]
    spec = load_spec(raw)
    assert spec.login.root_authorized_keys == [key]
    assert spec.login.users[0].authorized_keys == [ED25519, key]


def _pvc(name="s", path="/s", **extra):
    return {"type": "pvc", "name": name, "mountPath": path, **extra}


def _empty(name="s", path="/s"):
    return {"type": "emptyDir", "name": name, "mountPath": path}


def _host(host_path, name="s", path="/s"):
    return {"type": "hostPath", "name": name, "mountPath": path, "hostPath": host_path}


P = pytest.param


def bad(changes: dict[str, Any], path: str, fragment: str, count: int = 1, *, id: str, marks=()):
    """One row: mutation of BASE, issue path below the config key, message fragment, count."""
    return pytest.param(changes, path, fragment, count, id=id, marks=marks)


INVALID = [
    # ---- the node-state controller
    bad(
        {"nodeState": {"enabled": True, "intervalSeconds": 1}},
        "nodeState.intervalSeconds",
        "greater than or equal to 2",
        id="node-state-too-often",
    ),
    bad(
        {"nodeState": {"enable": True}},
        "nodeState.enable",
        "unknown key; valid keys here: enabled, intervalSeconds",
        id="node-state-misspelt",
    ),
    # ---- container jobs
    bad(
        {"containers": {"enabled": True, "cache": "shared"}},
        "containers.cache",
        "Input should be 'node' or 'jail'",
        id="container-cache-unknown",
    ),
    bad(
        {"containers": {"insecureRegistries": ["http://registry.local:5000"]}},
        "containers.insecureRegistries[0]",
        "String should match pattern",
        id="insecure-registry-with-scheme",
    ),
    bad(
        {"containers": {"insecureRegistries": ["registry.local:5000,other:1"]}},
        "containers.insecureRegistries[0]",
        "String should match pattern",
        id="insecure-registries-in-one-string",
    ),
    bad(
        {"containers": {"enabled": True, "cache": "jail"}, "jail.allowRootJobs": True},
        "containers.cache",
        "jail is refused with jail.allowRootJobs: root jobs could change the shared image "
        "cache; use cache: node",
        id="jail-cache-with-root-jobs",
    ),
    bad(
        {"containers": {"enable": True}},
        "containers.enable",
        "unknown key; valid keys here: cache, enabled, insecureRegistries",
        id="containers-misspelt",
    ),
    # ---- the REST API
    bad(
        {"controller.slurmConfExtra": ["AuthAltTypes=auth/jwt"]},
        "controller.slurmConfExtra[0]",
        "AuthAltTypes is set by slurm-stack; configure it through restApi (auth/jwt)",
        id="jwt-by-hand",
    ),
    bad(
        {"controller.slurmConfExtra": ["AuthAltParameters=jwt_key=/etc/key"]},
        "controller.slurmConfExtra[0]",
        "AuthAltParameters is set by slurm-stack; configure it through restApi",
        id="jwt-key-by-hand",
    ),
    bad(
        {"restApi": {"enabled": True, "replicas": 0}},
        "restApi.replicas",
        "greater than or equal to 1",
        id="rest-api-without-replicas",
    ),
    bad(
        {"restApi": {"keyGeneration": 0}},
        "restApi.keyGeneration",
        "greater than or equal to 1",
        id="key-generation-zero",
    ),
    bad(
        {"restApi": {"enable": True}},
        "restApi.enable",
        "unknown key; valid keys here: enabled, keyGeneration, placement, replicas, resources",
        id="rest-api-misspelt",
    ),
    bad(
        {"workerPools[0].name": "rest"},
        "workerPools[0].name",
        "rest",
        id="pool-named-like-the-rest-api",
    ),
    # ---- network topology
    bad(
        {"topology": {}, "workerPools[0].switch": "leaf-a"},
        "workerPools[1].switch",
        "required with `topology`: the leaf switch of this pool's nodes",
        id="topology-without-a-pools-switch",
    ),
    bad(
        {"workerPools[0].switch": "leaf-a"},
        "workerPools[0].switch",
        "`switch` needs `topology`",
        id="switch-without-topology",
    ),
    bad(
        {
            "topology": {"rootSwitch": "leaf-a"},
            "workerPools[0].switch": "leaf-a",
            "workerPools[1].switch": "leaf-b",
        },
        "workerPools[0].switch",
        "'leaf-a' is topology.rootSwitch",
        id="pool-on-the-root-switch",
    ),
    bad(
        {
            "slurmVersion": "24.11",
            "topology": {},
            "workerPools[0].switch": "leaf-a",
            "workerPools[1].switch": "leaf-b",
        },
        "topology",
        "needs Slurm 25.05 or newer, where a dynamic node joins its switch as it registers",
        id="topology-on-24.11",
    ),
    bad(
        {"topology": {}, "workerPools[0].switch": "Leaf_A", "workerPools[1].switch": "leaf-b"},
        "workerPools[0].switch",
        "DNS label",
        id="switch-not-a-dns-label",
    ),
    bad(
        {"controller.slurmConfExtra": ["TopologyPlugin=topology/tree"]},
        "controller.slurmConfExtra[0]",
        "TopologyPlugin is set by slurm-stack; configure it through topology",
        id="topology-plugin-by-hand",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["Topology=default:leaf-a"]},
        "workerPools[0].nodeConfExtra[0]",
        "comes from the pool's switch",
        id="node-topology-by-hand",
    ),
    # ---- a backup controller
    bad(
        {"controller.replicas": 2},
        "controller.stateVolume.storageClass",
        "a backup controller shares StateSaveLocation with the primary: set "
        "stateVolume.storageClass to a ReadWriteMany class",
        id="backup-controller-without-an-rwx-class",
    ),
    bad(
        {"controller.replicas": 3, "controller.stateVolume": {"size": "1Gi", "storageClass": "x"}},
        "controller.replicas",
        "less than or equal to 2",
        id="three-controllers",
    ),
    bad(
        {"controller.takeoverAfterSeconds": 30},
        "controller.takeoverAfterSeconds",
        "there is none with replicas: 1",
        id="takeover-without-a-backup",
    ),
    bad(
        {
            "controller.replicas": 2,
            "controller.stateVolume": {"size": "1Gi", "storageClass": "cephfs"},
            "controller.takeoverAfterSeconds": 2,
        },
        "controller.takeoverAfterSeconds",
        "greater than or equal to 5",
        id="takeover-too-soon",
    ),
    # ---- node labels: a pool's switch and features from its Kubernetes nodes
    bad(
        {
            "topology": {},
            "nodeState": {"enabled": True},
            "workerPools[0].switch": "leaf-a",
            "workerPools[0].switchLabel": "example.com/leaf",
            "workerPools[1].switch": "leaf-b",
        },
        "workerPools[0].switchLabel",
        "a pool takes `switch` (one switch for all its nodes) or `switchLabel`",
        id="switch-and-switch-label",
    ),
    bad(
        {"nodeState": {"enabled": True}, "workerPools[0].switchLabel": "example.com/leaf"},
        "workerPools[0].switchLabel",
        "`switchLabel` needs `topology`",
        id="switch-label-without-topology",
    ),
    bad(
        {
            "topology": {},
            "workerPools[0].switchLabel": "example.com/leaf",
            "workerPools[1].switch": "leaf-b",
        },
        "workerPools[0].switchLabel",
        "needs `nodeState.enabled: true`: the node-state controller is the only pod",
        id="switch-label-without-node-state",
    ),
    bad(
        {"workerPools[1].sshd": True},
        "workerPools[1].sshd",
        "needs `cgroups.enforce: true`: pam_slurm_adopt puts each ssh session",
        id="node-sshd-without-cgroups",
    ),
    bad(
        {
            "cgroups": {"enforce": True},
            "workerPools[0].sshd": True,
            "controller.slurmConfExtra": ["PrologFlags=Alloc,X11"],
        },
        "controller.slurmConfExtra[0]",
        "'PrologFlags=Alloc,X11,Contain'",
        id="node-sshd-with-prolog-flags-without-contain",
    ),
    bad(
        {"workerPools[0].labelFeatures": {"zone": "topology.kubernetes.io/zone"}},
        "workerPools[0].labelFeatures",
        "needs `nodeState.enabled: true`",
        id="label-features-without-node-state",
    ),
    bad(
        {
            "nodeState": {"enabled": True},
            "workerPools[0].labelFeatures": {"Zone": "topology.kubernetes.io/zone"},
        },
        "workerPools[0].labelFeatures.Zone",
        "DNS label",
        id="label-feature-name-not-a-dns-label",
    ),
    bad(
        {"nodeState": {"enabled": True}, "workerPools[0].labelFeatures": {"zone": "a/b/c"}},
        "workerPools[0].labelFeatures.zone",
        "not a label or annotation key",
        id="label-feature-not-a-label-key",
    ),
    bad(
        {"workerPools[0].features": ["k8s-zone-a"]},
        "workerPools[0].features[0]",
        "features that start with 'k8s-' come from Kubernetes node labels",
        id="pool-feature-with-the-label-prefix",
    ),
    bad(
        {"workerPools[0].name": "k8s-gpu"},
        "workerPools[0].name",
        "features that start with 'k8s-' are Kubernetes node labels'",
        id="pool-name-with-the-label-prefix",
    ),
    # ---- what the jail plugin can hold per node
    bad(
        {"workerPools[0].submounts": [_empty(f"s{i}", f"/s{i}") for i in range(33)]},
        "workerPools[0].submounts",
        "would have 33 submounts (jail.submounts plus these); at most 32",
        id="too-many-submounts-for-a-node",
    ),
    # ---- Kubernetes' own rules for what the spec passes through (names, keys, tolerations)
    bad(
        {"labels": {"team name": "ml"}},
        "labels.team name",
        "'team name' is not a label or annotation key",
        id="label-key-with-space",
    ),
    bad(
        {"labels": {"a/b/c": "ml"}},
        "labels.a/b/c",
        "at most one '/'",
        id="label-key-two-slashes",
    ),
    bad(
        {"labels": {"Example.COM/team": "ml"}},
        "labels.Example.COM/team",
        "the prefix of 'Example.COM/team': 'Example.COM' is not a DNS subdomain",
        id="label-key-uppercase-prefix",
    ),
    bad(
        {"labels": {"team": "x" * 64}},
        "labels.team",
        "is not a label value: at most 63",
        id="label-value-too-long",
    ),
    bad(
        {"workerPools[0].placement": {"nodeSelector": {"gpu": "-yes"}}},
        "workerPools[0].placement.nodeSelector.gpu",
        "'-yes' is not a label value",
        id="node-selector-value",
    ),
    bad(
        {"annotations": {"_private": "x"}},
        "annotations._private",
        "'_private' is not a label or annotation key",
        id="annotation-key",
    ),
    bad(
        {"jail.storageClass": "Fast_RWX"},
        "jail.storageClass",
        "'Fast_RWX' is not a DNS subdomain",
        id="storage-class-not-dns",
    ),
    bad(
        {
            "accounting": {
                "mode": "external",
                "external": {"host": "db", "passwordSecret": {"name": "db", "key": "pass/word"}},
            }
        },
        "accounting.external.passwordSecret.key",
        "'pass/word' cannot be a key of a Secret",
        id="secret-key-with-slash",
    ),
    bad(
        {
            "workerPools[0].placement": {
                "tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]
            }
        },
        "workerPools[0].placement.tolerations[0].value",
        "operator Exists matches any value: leave value out",
        id="toleration-exists-with-value",
    ),
    bad(
        {"workerPools[0].placement": {"tolerations": [{"operator": "Equal", "value": "x"}]}},
        "workerPools[0].placement.tolerations[0].operator",
        "a toleration without a key matches every taint only with Exists",
        id="toleration-equal-without-key",
    ),
    bad(
        {
            "workerPools[0].placement": {
                "tolerations": [
                    {
                        "key": "gpu",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                        "tolerationSeconds": 60,
                    }
                ]
            }
        },
        "workerPools[0].placement.tolerations[0].tolerationSeconds",
        "tolerationSeconds applies only to effect NoExecute",
        id="toleration-seconds-without-no-execute",
    ),
    bad(
        {"login.sshdExtra": ["Subsystem backup /usr/lib/backup-server"]},
        "login.sshdExtra[0]",
        "Subsystem is set by slurm-stack: slurm-stack offers sftp",
        id="sshd-subsystem-replaces-sftp",
    ),
    # ---- submount paths that would hide what the jail needs
    bad(
        {"workerPools[0].submounts": [_empty(path="/etc/site")]},
        "workerPools[0].submounts[0].mountPath",
        "'/etc/site' would cover /etc, the jail's users, groups and configuration",
        id="submount-under-etc",
    ),
    bad(
        {"workerPools[0].submounts": [_empty(path="/run/munge")]},
        "workerPools[0].submounts[0].mountPath",
        "'/run/munge' would cover /run",
        id="submount-at-munge-socket",
    ),
    bad(
        {"workerPools[0].submounts": [_empty(path="/var/spool")]},
        "workerPools[0].submounts[0].mountPath",
        "'/var/spool' would cover /var/spool/slurmd, slurmd's spool",
        id="submount-over-the-spool",
    ),
    bad(
        {"workerPools[0].submounts": [_empty(path="/usr")]},
        "workerPools[0].submounts[0].mountPath",
        "'/usr' would cover /usr/lib/slurm-stack, slurm-stack's own programs",
        id="submount-at-usr",
    ),
    bad(
        {"workerPools[0].submounts": [_empty(path="/home/cache")]},
        "workerPools[0].submounts[0].mountPath",
        "a node-local volume at or under /home would hide the users' home directories",
        id="node-local-submount-under-home",
    ),
    bad(
        {"jail.submounts": [_host("/mnt/x", path="/home")]},
        "jail.submounts[0].mountPath",
        "a node-local volume at or under /home",
        id="jail-host-path-at-home",
    ),
    bad(
        {
            "workerPools[0].resources": {"limits": {"memory": "1Gi"}},
            "workerPools[0].submounts": [
                {"type": "memory", "name": "a", "mountPath": "/a", "sizeLimit": "512Mi"},
                {"type": "memory", "name": "b", "mountPath": "/b", "sizeLimit": "512Mi"},
            ],
        },
        "workerPools[0].submounts[1].sizeLimit",
        "the pool's in-memory submounts take 1024Mi of its 1Gi memory, leaving nothing for jobs",
        id="ram-disks-fill-the-pools-memory",
    ),
    # ---- accounting values written into slurmdbd.conf
    bad(
        {"accounting": {"mode": "external", "external": {"host": "db.example.com:3307"}}},
        "accounting.external.host",
        "give the host only, and the port in external.port",
        2,  # and the missing password
        id="external-host-with-port",
    ),
    bad(
        {
            "accounting": {
                "mode": "external",
                "external": {"host": "db", "user": "slurm StorageHost=evil"},
            }
        },
        "accounting.external.user",
        "should match pattern",
        2,
        id="external-user-with-a-second-key",
    ),
    bad(
        {"accounting": {"mode": "external", "external": {"host": "db", "database": "acct#x"}}},
        "accounting.external.database",
        "should match pattern",
        2,
        id="external-database-with-comment",
    ),
    bad(
        {"accounting": {"mode": "mariadb-operator", "external": {"host": "db.example.com"}}},
        "accounting.external.host",
        "external.host is used only with mode 'external' (mode is 'mariadb-operator')",
        id="external-host-in-operator-mode",
    ),
    bad(
        {"controller.scheduler": {"parameters": ["bf_continue,bf_interval=60"]}},
        "controller.scheduler.parameters[0]",
        "should match pattern",
        id="scheduler-parameter-with-comma",
    ),
    # ---- relational rules (rules.py)
    bad(
        {"partitions[1].pools": ["gpu", "tpu"]},
        "partitions[1].pools[1]",
        "unknown pool 'tpu'; defined pools: cpu, gpu",
        id="partition-unknown-pool",
    ),
    bad(
        {"workerPools[1].name": "cpu", "partitions[1].pools": ["cpu"]},
        "workerPools[1].name",
        "'cpu' is used more than once",
        2,
        id="duplicate-pool-name",
    ),
    bad(
        {"partitions[1].name": "batch"},
        "partitions[1].name",
        "'batch' is used more than once",
        2,
        id="duplicate-partition-name",
    ),
    bad(
        {"partitions[1].default": True},
        "partitions[1].default",
        "only one partition may be the default; partitions[0] already is",
        id="two-default-partitions",
    ),
    bad(
        {"workerPools[0].name": "login"},
        "workerPools[0].name",
        "'login' is reserved for another workload; reserved names: accounting, config,",
        id="reserved-pool-name-login",
    ),
    bad(
        {"workerPools[0].name": "populate-jail"},
        "workerPools[0].name",
        "'populate-jail' is reserved",
        id="reserved-pool-name-populate-jail",
    ),
    bad(
        {"name": "c" * 30, "workerPools[0].name": "p" * 22},
        "workerPools[0].name",
        f"is too long for cluster {'c' * 30!r}: at most 21 characters",
        id="pool-name-too-long-for-cluster",
    ),
    bad(
        {"controller.maxNodeCount": 10, "workerPools[0].replicas": 8, "workerPools[1].replicas": 3},
        "controller.maxNodeCount",
        "10 is less than the 11 nodes of all pools (replicas, elastic.maxReplicas of "
        "elastic pools, and externalNodes hosts); raise it to at least 11",
        id="replicas-exceed-max-node-count",
    ),
    bad(
        {"controller.maxNodeCount": 2, "workerPools[0].replicas": DELETE},
        "controller.maxNodeCount",
        "2 is less than the 3 nodes of all pools",  # a pool without replicas counts 1
        id="default-replicas-count-toward-max-node-count",
    ),
    bad(
        {
            "workerPools[0].resources": ELASTIC_RESOURCES,
            "workerPools[0].replicas": DELETE,
            "controller.maxNodeCount": 10,
            "workerPools[0].elastic": {"maxReplicas": 9},
        },
        "controller.maxNodeCount",
        "10 is less than the 11 nodes of all pools",  # an elastic pool counts its maxReplicas
        id="elastic-max-exceeds-max-node-count",
    ),
    bad(
        {
            "workerPools[0].resources": ELASTIC_RESOURCES,
            "workerPools[0].replicas": DELETE,
            "workerPools[0].elastic": {"minReplicas": 3, "maxReplicas": 2},
        },
        "workerPools[0].elastic.minReplicas",
        "3 is more than maxReplicas (2): give at most 2, or raise maxReplicas",
        id="elastic-min-above-max",
    ),
    bad(
        {
            "workerPools[0].replicas": 5,
            "workerPools[0].resources": ELASTIC_RESOURCES,
            "workerPools[0].elastic": {"maxReplicas": 4},
        },
        "workerPools[0].replicas",
        "5 is outside the pool's elastic bounds (0-4): give a size within them, or drop "
        "replicas (the pool then starts at minReplicas)",
        id="elastic-replicas-outside-bounds",
    ),
    bad(
        {
            "workerPools[0].resources": ELASTIC_RESOURCES,
            "workerPools[0].replicas": DELETE,
            "workerPools[0].elastic": {"minReplicas": 1},
        },
        "workerPools[0].elastic.maxReplicas",
        "required",
        id="elastic-without-max",
    ),
    bad(
        {
            "workerPools[0].resources": ELASTIC_RESOURCES,
            "workerPools[0].replicas": DELETE,
            "workerPools[0].elastic": {"maxReplicas": 0},
        },
        "workerPools[0].elastic.maxReplicas",
        "greater than or equal to 1",
        id="elastic-max-zero",
    ),
    bad(
        {
            "workerPools[0].resources": ELASTIC_RESOURCES,
            "workerPools[0].replicas": DELETE,
            "workerPools[0].elastic": {"maxReplicas": 4, "idleSeconds": 1},
        },
        "workerPools[0].elastic.idleSeconds",
        "greater than or equal to 5",
        id="elastic-idle-too-short",
    ),
    bad(
        {
            "workerPools[0].elastic": {"maxReplicas": 4},
            "workerPools[0].resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
        "workerPools[0].resources.limits.cpu",
        "Slurm must know their CPUs: set resources.limits.cpu to a whole number of CPUs, or "
        "CPUs=<n> in nodeConfExtra",
        id="elastic-without-cpus",
    ),
    bad(
        {
            "partitions[1].name": "elastic-cpu",
            "workerPools[0].elastic": {"maxReplicas": 2},
            "workerPools[0].resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
            "workerPools[0].replicas": DELETE,
        },
        "partitions[1].name",
        "'elastic-cpu' is the hidden partition that holds the power-saving settings of "
        "elastic pool workerPools[0]: pick another name",
        id="partition-named-like-an-elastic-pools-hidden-one",
    ),
    bad(
        {"controller.slurmConfExtra": ["SuspendTime=60"]},
        "controller.slurmConfExtra[0]",
        "workerPools[].elastic.idleSeconds",
        id="global-suspend-time-is-owned",
    ),
    bad(
        {"slurmVersion": "24.11", "controller.metrics.enabled": True},
        "controller.metrics.enabled",
        "the metrics endpoint needs Slurm 25.11 or newer; slurmVersion is 24.11",
        id="metrics-on-24.11",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount=5", "JobContainerType=job_container/tmpfs"]},
        "controller.slurmConfExtra[1]",
        "JobContainerType was replaced by NamespaceType in Slurm 25.11",
        id="replaced-key-JobContainerType-on-26.05",
    ),
    bad(
        {"slurmVersion": "24.11", "controller.slurmConfExtra": ["MetricsType=metrics/openmetrics"]},
        "controller.slurmConfExtra[0]",
        "MetricsType needs Slurm 25.11 or newer (slurmVersion is 24.11)",
        id="new-key-MetricsType-on-24.11",
    ),
    bad(
        {"slurmVersion": "24.11", "controller.slurmConfExtra": ["PrologTimeout=60"]},
        "controller.slurmConfExtra[0]",
        "PrologTimeout needs Slurm 25.05 or newer (slurmVersion is 24.11)",
        id="new-key-PrologTimeout-on-24.11",
    ),
    bad(
        {"slurmVersion": "24.11", "controller.slurmConfExtra": ["namespacetype=namespace/tmpfs"]},
        "controller.slurmConfExtra[0]",
        "NamespaceType needs Slurm 25.11 or newer",
        id="new-key-NamespaceType-on-24.11-any-case",
    ),
    bad(
        {"controller.slurmConfExtra": ["ClusterName=other"]},
        "controller.slurmConfExtra[0]",
        "ClusterName is set by slurm-stack; configure it through cluster.name",
        id="owned-slurm-conf-key-ClusterName",
    ),
    bad(
        {"controller.slurmConfExtra": ["NodeName=gpu-[0-3] CPUs=4"]},
        "controller.slurmConfExtra[0]",
        "NodeName is set by slurm-stack; configure it through workerPools (dynamic nodes)",
        id="owned-slurm-conf-key-NodeName",
    ),
    bad(
        {"controller.slurmConfExtra": ["selecttype=select/linear"]},
        "controller.slurmConfExtra[0]",
        "selecttype is set by slurm-stack; configure it through slurm-stack (select/cons_tres)",
        id="owned-slurm-conf-key-any-case",
    ),
    bad(
        {"controller.slurmConfExtra": ["MetricsType=metrics/openmetrics"]},
        "controller.slurmConfExtra[0]",
        "MetricsType is set by slurm-stack; configure it through controller.metrics.enabled",
        id="owned-slurm-conf-key-MetricsType-on-26.05",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["CoreSpecCount=2", "Feature=fast"]},
        "workerPools[0].nodeConfExtra[1]",
        "Feature comes from the pool's features",
        id="owned-node-conf-Feature",
    ),
    bad(
        {"workerPools[1].nodeConfExtra": ["gres=gpu:h100:4"]},
        "workerPools[1].nodeConfExtra[0]",
        "gres comes from the pool's gpus / gpuType",
        id="owned-node-conf-Gres",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["Weight=5"]},
        "workerPools[0].nodeConfExtra[0]",
        "Weight comes from the pool's weight",
        id="owned-node-conf-Weight",
    ),
    # ---- slurm.conf lines, node options and partition options, as Slurm's parser reads them
    # (slurm_stack/spec/slurm_options.py, tables from read_config.c in slurm_stack/spec/data)
    bad(
        {"controller.slurmConfExtra": ["MaxJobCont=50000"]},
        "controller.slurmConfExtra[0]",
        "'MaxJobCont' is not a slurm.conf option Slurm 26.05 knows; did you mean MaxJobCount?",
        id="slurm-conf-unknown-key-did-you-mean",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["CoreSpecCnt=2"]},
        "workerPools[0].nodeConfExtra[0]",
        "'CoreSpecCnt' is not a node option (NodeName line) Slurm 26.05 knows; did you mean "
        "CoreSpecCount?",
        id="node-conf-unknown-key-did-you-mean",
    ),
    bad(
        {"partitions[1].options": ["Hiden=YES"]},
        "partitions[1].options[0]",
        "'Hiden' is not a partition option (PartitionName line) Slurm 26.05 knows; did you mean "
        "Hidden?",
        id="partition-option-unknown-key-did-you-mean",
    ),
    bad(
        {"slurmVersion": "24.11", "controller.slurmConfExtra": ["HealthCheckTimeout=30"]},
        "controller.slurmConfExtra[0]",
        "'HealthCheckTimeout' is not a slurm.conf option Slurm 24.11 knows; Slurm 26.05 knows it",
        id="slurm-conf-key-of-the-other-version",
    ),
    bad(
        {"slurmVersion": "24.11", "partitions[0].options": ["Topology=default"]},
        "partitions[0].options[0]",
        "'Topology' is not a partition option (PartitionName line) Slurm 24.11 knows; Slurm 26.05",
        id="partition-option-of-the-other-version",
    ),
    bad(
        {"slurmVersion": "24.11", "workerPools[0].nodeConfExtra": ["suspendtime=60"]},
        "workerPools[0].nodeConfExtra[0]",
        "'suspendtime' is not a node option (NodeName line) Slurm 24.11 knows; "
        "Slurm 26.05 knows it",
        id="node-option-of-the-other-version-any-case",
    ),
    bad(
        {"controller.slurmConfExtra": ["PowerAction=off Locaton=slurmd Program=/bin/off"]},
        "controller.slurmConfExtra[0]",
        "'Locaton' is not an option of a PowerAction line Slurm 26.05 knows; did you mean "
        "Location?",
        id="slurm-conf-line-key-unknown-option",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount=5 MaxArraySize=10"]},
        "controller.slurmConfExtra[0]",
        "holds a second Key=Value pair, 'MaxArraySize=10': give one Key=Value per item (one item "
        "per line)",
        id="slurm-conf-two-pairs-in-one-item",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["CoreSpecCount=2 RealMemory=1000"]},
        "workerPools[0].nodeConfExtra[0]",
        "holds a second Key=Value pair, 'RealMemory=1000'",
        id="node-conf-two-pairs-in-one-item",
    ),
    bad(
        {"partitions[1].options": ["PriorityTier=10 Hidden=YES"]},
        "partitions[1].options[0]",
        "holds a second Key=Value pair, 'Hidden=YES'",
        id="partition-option-two-pairs-in-one-item",
    ),
    bad(
        {"controller.slurmConfExtra": ["DownNodes=n1 State=DOWN State=DRAIN"]},
        "controller.slurmConfExtra[0]",
        "State is set twice on this line: Slurm keeps only the last one",
        id="slurm-conf-line-key-option-twice",
    ),
    bad(
        {"controller.slurmConfExtra": ["Include=/etc/slurm/site.conf"]},
        "controller.slurmConfExtra[0]",
        "the Include directive is refused",
        id="include-with-equals",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount=5", "include /etc/slurm/site.conf"]},
        "controller.slurmConfExtra[1]",
        "the Include directive is refused",
        id="include-directive",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["INCLUDE"]},
        "workerPools[0].nodeConfExtra[0]",
        "the Include directive is refused",
        id="include-upper-case-alone",
    ),
    bad(
        {"partitions[0].options": ["include=x"]},
        "partitions[0].options[0]",
        "the Include directive is refused",
        id="include-in-partition-options",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount=lots"]},
        "controller.slurmConfExtra[0]",
        "MaxJobCount takes a whole number from 0 to 4294967295, K for x1024 or UNLIMITED, "
        "got 'lots'",
        id="slurm-conf-uint32-not-a-number",
    ),
    bad(
        {"controller.slurmConfExtra": ["TreeWidth=70000"]},
        "controller.slurmConfExtra[0]",
        "TreeWidth takes a whole number from 0 to 65535 or UNLIMITED, got '70000': it is greater "
        "than 65535",
        id="slurm-conf-uint16-too-big",
    ),
    bad(
        {"controller.slurmConfExtra": ["KillWait=08"]},
        "controller.slurmConfExtra[0]",
        "KillWait takes a whole number",  # strtoul reads a leading 0 as octal
        id="slurm-conf-not-octal",
    ),
    bad(
        {"controller.slurmConfExtra": ["UsePAM=maybe"]},
        "controller.slurmConfExtra[0]",
        "UsePAM takes YES or NO (Slurm also reads TRUE/FALSE, UP/DOWN, 1/0), got 'maybe'",
        id="slurm-conf-boolean",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["RealMemory=250G"]},
        "workerPools[0].nodeConfExtra[0]",
        "RealMemory takes a whole number from 0 to 18446744073709551615, K for x1024 or "
        "UNLIMITED, got '250G'",
        id="node-conf-memory-with-a-unit",
    ),
    bad(
        {"partitions[0].options": ["MaxNodes=-1"]},
        "partitions[0].options[0]",
        "got '-1': Slurm refuses a '-' here",
        id="partition-option-negative",
    ),
    bad(
        {"partitions[0].options": ["ExclusiveUser=on"]},
        "partitions[0].options[0]",
        "ExclusiveUser takes YES or NO",
        id="partition-option-boolean",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["CoreSpecCount=2 FEATURE=fast"]},
        "workerPools[0].nodeConfExtra[0]",
        "FEATURE comes from the pool's features",
        2,  # and: a second Key=Value pair
        id="owned-node-conf-key-second-and-in-another-case",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["Features=fast"]},
        "workerPools[0].nodeConfExtra[0]",
        "Features (Slurm's old spelling of Feature) comes from the pool's features",
        id="owned-node-conf-key-old-spelling",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["Port=7000"]},
        "workerPools[0].nodeConfExtra[0]",
        "Port comes from slurm-stack (slurmd listens on SlurmdPort 6818",
        id="owned-node-conf-port",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ['Reason="NodeName=x"']},
        "workerPools[0].nodeConfExtra[0]",
        "slurmd stops when its --conf contains 'NodeName=' anywhere",
        id="node-conf-node-name-in-a-value",
    ),
    bad(
        {"partitions[1].options": ["nodes=cpu"]},
        "partitions[1].options[0]",
        "nodes comes from the partition's pools, not options",
        id="owned-partition-key-any-case",
    ),
    bad(
        {"partitions[1].options": ["Hidden=YES", "state=DOWN"]},
        "partitions[1].options[1]",
        "state comes from slurm-stack (State=UP), not options",
        id="owned-partition-key-State",
    ),
    bad(
        {"partitions[0].options": ["DisableRootJobs=NO"]},
        "partitions[0].options[0]",
        "DisableRootJobs comes from jail.allowRootJobs, not options",
        id="owned-partition-key-root-jobs",
    ),
    bad(
        {"controller.slurmConfExtra": ["ControlMachine=elsewhere"]},
        "controller.slurmConfExtra[0]",
        "ControlMachine (Slurm's old spelling of SlurmctldHost) is set by slurm-stack",
        id="owned-slurm-conf-key-old-spelling",
    ),
    bad(
        {"controller.slurmConfExtra": ["ClusterName=a", "clustername=b"]},
        "controller.slurmConfExtra[1]",
        "clustername is set by slurm-stack; configure it through cluster.name",
        2,
        id="owned-slurm-conf-key-twice",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount=5", "maxjobcount=6"]},
        "controller.slurmConfExtra[1]",
        "maxjobcount is also set by controller.slurmConfExtra[0]: Slurm keeps only the last one",
        id="slurm-conf-key-twice",
    ),
    bad(
        {"partitions[0].options": ["OverSubscribe=NO", "Shared=YES"]},
        "partitions[0].options[1]",
        "Shared is Slurm's old spelling of OverSubscribe: write OverSubscribe= instead",
        id="partition-option-old-spelling",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["Procs=4"]},
        "workerPools[0].nodeConfExtra[0]",
        "Procs is Slurm's old spelling of CPUs",
        id="node-conf-old-spelling",
    ),
    bad(
        {"controller.slurmConfExtra": ["CoreSpecPlugin=core_spec/none"]},
        "controller.slurmConfExtra[0]",
        "CoreSpecPlugin is defunct in Slurm 26.05",
        id="slurm-conf-defunct-key",
    ),
    bad(
        {"controller.slurmConfExtra": ["SallocDefaultCommand=srun"]},
        "controller.slurmConfExtra[0]",
        "SallocDefaultCommand: Slurm 26.05 stops at start with 'SallocDefaultCommand has been "
        "removed",
        id="slurm-conf-key-the-daemon-stops-on",
    ),
    bad(
        {"slurmVersion": "24.11", "controller.slurmConfExtra": ["AccountingStorageLoc=/x"]},
        "controller.slurmConfExtra[0]",
        "AccountingStorageLoc: Slurm 24.11 stops at start",
        id="slurm-conf-key-the-24.11-daemon-stops-on",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount = 5"]},
        "controller.slurmConfExtra[0]",
        "write it without spaces around '='",
        id="slurm-conf-spaces-around-equals",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount=5 # enough"]},
        "controller.slurmConfExtra[0]",
        "contains '#', which starts a comment in slurm.conf",
        id="slurm-conf-comment",
    ),
    bad(
        {"partitions[0].options": ["MaxNodes+=2"]},
        "partitions[0].options[0]",
        "write 'MaxNodes=value': Slurm reads 'MaxNodes+=' here as plain '='",
        id="partition-option-operator",
    ),
    bad(
        {"login.sshdExtra": ["MaxSessions 20", "ChrootDirectory none"]},
        "login.sshdExtra[1]",
        "ChrootDirectory is set by slurm-stack: every session is chrooted into the jail",
        id="owned-sshd-ChrootDirectory",
    ),
    bad(
        {"login.sshdExtra": ["passwordauthentication yes"]},
        "login.sshdExtra[0]",
        "passwordauthentication is set by slurm-stack",
        id="owned-sshd-any-case",
    ),
    bad(
        {
            "login.sshdExtra": [
                "MaxSessions 20",
                "X11Forwarding yes",
                "AuthorizedKeysCommand /bin/cat",
            ]
        },
        "login.sshdExtra[2]",
        "AuthorizedKeysCommand is set by slurm-stack: keys come from login.users",
        id="owned-sshd-AuthorizedKeysCommand",
    ),
    bad(
        {"login.sshdExtra": ["AuthorizedKeysCommandUser root"]},
        "login.sshdExtra[0]",
        "AuthorizedKeysCommandUser is set by slurm-stack",
        id="owned-sshd-AuthorizedKeysCommandUser",
    ),
    bad(
        {"login.sshdExtra": ["AuthorizedKeysFile .ssh/authorized_keys"]},
        "login.sshdExtra[0]",
        "AuthorizedKeysFile is set by slurm-stack",
        id="owned-sshd-AuthorizedKeysFile",
    ),
    bad(
        {"login.sshdExtra": ["AuthorizedPrincipalsFile /etc/ssh/principals/%u"]},
        "login.sshdExtra[0]",
        "AuthorizedPrincipalsFile cannot be set here",
        id="refused-sshd-AuthorizedPrincipalsFile",
    ),
    bad(
        {"login.sshdExtra": ["AuthorizedPrincipalsCommand /bin/echo %u"]},
        "login.sshdExtra[0]",
        "AuthorizedPrincipalsCommand cannot be set here",
        id="refused-sshd-AuthorizedPrincipalsCommand",
    ),
    bad(
        {"login.sshdExtra": ["AuthorizedPrincipalsCommandUser nobody"]},
        "login.sshdExtra[0]",
        "AuthorizedPrincipalsCommandUser cannot be set here",
        id="refused-sshd-AuthorizedPrincipalsCommandUser",
    ),
    bad(
        {"login.sshdExtra": ["TrustedUserCAKeys /etc/ssh/user_ca.pub"]},
        "login.sshdExtra[0]",
        "TrustedUserCAKeys cannot be set here",
        id="refused-sshd-TrustedUserCAKeys",
    ),
    bad(
        {"login.sshdExtra": ["MaxSessions 20", "match User alice"]},
        "login.sshdExtra[1]",
        "match is set by slurm-stack: a Match line makes every later line conditional",
        id="owned-sshd-Match-any-case",
    ),
    bad(
        {"login.sshdExtra": ["Include /etc/ssh/sshd_config.d/*.conf"]},
        "login.sshdExtra[0]",
        "Include cannot be set here: lines from another file would escape these checks",
        id="refused-sshd-Include",
    ),
    bad(
        {"login.sshdExtra": ["PermitRootLogin yes"]},
        "login.sshdExtra[0]",
        "PermitRootLogin is set by slurm-stack: root logs in with login.rootAuthorizedKeys",
        id="owned-sshd-PermitRootLogin",
    ),
    bad(
        {"login.sshdExtra": ["PubkeyAuthentication no"]},
        "login.sshdExtra[0]",
        "PubkeyAuthentication is set by slurm-stack: logins are by SSH key only",
        id="owned-sshd-PubkeyAuthentication",
    ),
    bad(
        {"login.sshdExtra": ["AllowUsers alice"]},
        "login.sshdExtra[0]",
        "AllowUsers cannot be set here: who may log in is login.users",
        id="refused-sshd-AllowUsers",
    ),
    bad(
        {"login.sshdExtra": ["DenyGroups nogroup"]},
        "login.sshdExtra[0]",
        "DenyGroups cannot be set here",
        id="refused-sshd-DenyGroups",
    ),
    bad(
        {"login.sshdExtra": ["AuthenticationMethods publickey,password"]},
        "login.sshdExtra[0]",
        "AuthenticationMethods cannot be set here: logins are by SSH key only",
        id="refused-sshd-AuthenticationMethods",
    ),
    bad(
        {"login.sshdExtra": ["HostbasedAuthentication yes"]},
        "login.sshdExtra[0]",
        "HostbasedAuthentication cannot be set here",
        id="refused-sshd-HostbasedAuthentication",
    ),
    bad(
        {"login.sshdExtra": ["ListenAddress 0.0.0.0:2222"]},
        "login.sshdExtra[0]",
        "ListenAddress cannot be set here: the login Service",
        id="refused-sshd-ListenAddress",
    ),
    bad(
        {"login.sshdExtra": ["SshdSessionPath /mnt/jail/tmp/session"]},
        "login.sshdExtra[0]",
        "SshdSessionPath cannot be set here: sshd runs that program as root",
        id="refused-sshd-SshdSessionPath",
    ),
    bad(
        {"login.sshdExtra": ["PermitUserEnvironment yes"]},
        "login.sshdExtra[0]",
        "PermitUserEnvironment cannot be set here",
        id="refused-sshd-PermitUserEnvironment",
    ),
    bad(
        {"login.sshdExtra": ["ChallengeResponseAuthentication yes"]},
        "login.sshdExtra[0]",
        "ChallengeResponseAuthentication (OpenSSH's old name for KbdInteractiveAuthentication)",
        id="owned-sshd-old-alias",
    ),
    bad(
        {"login.sshdExtra": ["KeepAlive no"]},
        "login.sshdExtra[0]",
        "KeepAlive is OpenSSH's old name for TCPKeepAlive: write TCPKeepAlive",
        id="sshd-old-alias",
    ),
    bad(
        {"login.sshdExtra": ["UseLogin yes"]},
        "login.sshdExtra[0]",
        "UseLogin is deprecated, and ignored by the login image's OpenSSH 10.6p1",
        id="sshd-deprecated-keyword",
    ),
    bad(
        {"login.sshdExtra": ["KerberosTicketCleanup yes"]},
        "login.sshdExtra[0]",
        "KerberosTicketCleanup is not supported by the login image's OpenSSH 10.6p1",
        id="sshd-keyword-not-built-in",
    ),
    bad(
        {"login.sshdExtra": ["MaxSesions 20"]},
        "login.sshdExtra[0]",
        "MaxSesions is not an sshd_config keyword of OpenSSH 10.6p1; did you mean MaxSessions?",
        id="sshd-unknown-keyword-did-you-mean",
    ),
    bad(
        {"login.sshdExtra": ["Frobnicate yes"]},
        "login.sshdExtra[0]",
        "Frobnicate is not an sshd_config keyword of OpenSSH 10.6p1 (see sshd_config(5))",
        id="sshd-unknown-keyword",
    ),
    bad(
        {"login.sshdExtra": ["GSSAPIStoreCredentialsOnRekey no"]},
        "login.sshdExtra[0]",
        "is not an sshd_config keyword of OpenSSH 10.6p1",
        id="sshd-keyword-of-trixie-only-on-26.05",
    ),
    bad(
        {"slurmVersion": "24.11", "login.sshdExtra": ["WarnWeakCrypto no"]},
        "login.sshdExtra[0]",
        "WarnWeakCrypto is not an sshd_config keyword of OpenSSH 10.0p2",
        id="sshd-keyword-of-forky-only-on-24.11",
    ),
    bad(
        {"login.sshdExtra": ["Banner /mnt/jail/etc/issue.net"]},
        "login.sshdExtra[0]",
        "not from /mnt/jail",
        id="sshd-banner-in-the-jail",
    ),
    bad(
        {"login.sshdExtra": ["Banner /etc/ssh/host-keys/ssh_host_ed25519_key"]},
        "login.sshdExtra[0]",
        "not from /etc/ssh/host-keys: it holds the host keys",
        id="sshd-banner-host-key",
    ),
    # ---- sshdExtra values sshd would refuse to start with (slurm_stack/spec/sshd.py SSHD_VALUES)
    bad(
        {"login.sshdExtra": ["MaxAuthTries abc"]},
        "login.sshdExtra[0]",
        "MaxAuthTries takes a whole number from 0 to 2147483647, not 'abc': sshd would refuse",
        id="sshd-value-not-a-number",
    ),
    bad(
        {"login.sshdExtra": ["MaxSessions 20", "ClientAliveCountMax -1"]},
        "login.sshdExtra[1]",
        "ClientAliveCountMax takes a whole number from 0 to 2147483647, not '-1'",
        id="sshd-value-negative-number",
    ),
    bad(
        {"login.sshdExtra": ["MaxSessions 2147483648"]},
        "login.sshdExtra[0]",
        "not '2147483648'",
        id="sshd-value-number-too-large",
    ),
    bad(
        {"login.sshdExtra": ["ClientAliveInterval -1"]},
        "login.sshdExtra[0]",
        "ClientAliveInterval takes a time such as 90, 2m or 1h30m",
        id="sshd-value-negative-time",
    ),
    bad(
        {"login.sshdExtra": ["LoginGraceTime 2min"]},
        "login.sshdExtra[0]",
        "LoginGraceTime takes a time such as 90, 2m or 1h30m (s, m, h, d or w after a number), "
        "not '2min'",
        id="sshd-value-time-unit-misspelt",
    ),
    bad(
        {"slurmVersion": "24.11", "login.sshdExtra": ["LoginGraceTime 1.5s"]},
        "login.sshdExtra[0]",
        "not '1.5s'",
        id="sshd-value-decimal-seconds-before-openssh-10.3",
    ),
    bad(
        {"login.sshdExtra": ["LoginGraceTime 2 minutes"]},
        "login.sshdExtra[0]",
        "LoginGraceTime takes one value, a time such as 90, 2m or 1h30m (s, m, h, d or w after "
        "a number); sshd refuses the line's extra 'minutes'",
        id="sshd-value-extra-argument",
    ),
    bad(
        {"login.sshdExtra": ["X11Forwarding maybe"]},
        "login.sshdExtra[0]",
        "X11Forwarding takes one of yes, no, not 'maybe'",
        id="sshd-value-yes-no-maybe",
    ),
    bad(
        {"login.sshdExtra": ["PermitTTY true"]},
        "login.sshdExtra[0]",
        "PermitTTY takes one of yes, no, not 'true'",
        id="sshd-value-yes-no-true",
    ),
    bad(
        {"login.sshdExtra": ["AllowTcpForwarding both"]},
        "login.sshdExtra[0]",
        "AllowTcpForwarding takes one of yes, all, no, remote, local, not 'both'",
        id="sshd-value-forwarding-word",
    ),
    bad(
        {"login.sshdExtra": ["PermitTunnel YES"]},
        "login.sshdExtra[0]",
        "PermitTunnel takes one of no, yes, point-to-point, ethernet (in lower case), not 'YES'",
        id="sshd-value-case-sensitive-word",
    ),
    bad(
        {"login.sshdExtra": ["LogLevel LOUD"]},
        "login.sshdExtra[0]",
        "LogLevel takes one of QUIET, FATAL, ERROR, INFO, VERBOSE, DEBUG, DEBUG1, DEBUG2, DEBUG3",
        id="sshd-value-log-level",
    ),
    bad(
        {"login.sshdExtra": ["MaxSessions # as many as they like"]},
        "login.sshdExtra[0]",
        "MaxSessions takes a whole number from 0 to 2147483647, and the line gives none",
        id="sshd-value-only-a-comment",
    ),
    bad(
        {"login.sshdExtra": ['VersionAddendum "slurm login']},
        "login.sshdExtra[0]",
        "VersionAddendum: a quote in the line is not closed, and sshd refuses the line",
        id="sshd-unclosed-quote",
    ),
    bad(
        {"workerPools[0].submounts": [_empty("a", "/a"), _empty("a", "/b")]},
        "workerPools[0].submounts[1].name",
        "'a' is used by more than one submount here",
        2,
        id="duplicate-submount-name",
    ),
    bad(
        {"workerPools[0].submounts": [_empty("a", "/x"), _empty("b", "/x")]},
        "workerPools[0].submounts[1].mountPath",
        "'/x' is used by more than one submount here",
        2,
        id="duplicate-submount-path",
    ),
    bad(
        {
            "jail.submounts": [_pvc("data", "/data", existingClaim="data")],
            "workerPools[1].submounts": [_empty("scratch", "/data")],
        },
        "workerPools[1].submounts[0].mountPath",
        "'/data' is used by more than one submount here",
        2,
        id="pool-submount-path-collides-with-jail-submount",
    ),
    bad(
        {"workerPools": [{"name": "cpu"}], "partitions": DELETE, "healthChecks.nccl.enabled": True},
        "healthChecks.nccl.enabled",
        "the NCCL benchmark needs a pool with gpus > 0; no pool has GPUs",
        id="nccl-enabled-without-gpu-pools",
    ),
    bad(
        {"workerPools": [{"name": "cpu"}], "partitions": DELETE, "healthChecks.dcgm.quick": True},
        "healthChecks.dcgm.quick",
        "DCGM diagnoses GPUs: it needs a pool with gpus > 0; no pool has GPUs",
        id="dcgm-without-gpu-pools",
    ),
    bad(
        {"healthChecks.dcgm.quick": True, "healthChecks.quick.enabled": False},
        "healthChecks.dcgm.quick",
        "dcgm.quick runs among the quick checks, which are off",
        id="dcgm-without-quick-checks",
    ),
    bad(
        {"healthChecks.dcgm.quick": True, "healthChecks.dcgm.timeoutSeconds": 300},
        "healthChecks.dcgm.timeoutSeconds",
        "dcgm.timeoutSeconds 300 must be less than quick.intervalSeconds 300",
        id="dcgm-outlasting-the-check-interval",
    ),
    bad(
        {
            "workerPools": [{"name": "cpu"}],
            "partitions": DELETE,
            "healthChecks.dcgm.periodic": True,
        },
        "healthChecks.dcgm.periodic",
        "DCGM diagnoses GPUs: it needs a pool with gpus > 0; no pool has GPUs",
        id="periodic-dcgm-without-gpu-pools",
    ),
    bad(
        {"healthChecks.dcgm.periodic": True, "healthChecks.nccl.enabled": False},
        "healthChecks.dcgm.periodic",
        "dcgm.periodic runs in the NCCL benchmark's job, which is off",
        id="periodic-dcgm-without-the-benchmark",
    ),
    bad(
        {"healthChecks.dcgm.periodic": True, "healthChecks.dcgm.periodicTimeoutSeconds": 30},
        "healthChecks.dcgm.periodicTimeoutSeconds",
        "",
        id="periodic-dcgm-timeout-too-short",
    ),
    bad(
        {"metrics.prometheusOperator": True, "metrics.enabled": False},
        "metrics.prometheusOperator",
        "prometheusOperator creates a ServiceMonitor for the exporter, which is off",
        id="service-monitors-without-the-exporter",
    ),
    bad(
        {"metrics.scrapeIntervalSeconds": 5},
        "metrics.scrapeIntervalSeconds",
        "",
        id="metrics-scrape-interval-too-short",
    ),
    bad(
        {"healthChecks.dcgm.level": 3},
        "healthChecks.dcgm.level",
        "",
        id="dcgm-unknown-key",
    ),
    bad(
        {"workerPools[1].gpuType": DELETE},
        "workerPools[1].gpuType",
        "GPU pools need a gpuType (e.g. 'h100') so the NCCL benchmark can pick a threshold",
        id="gpu-pool-without-gpu-type-while-nccl-on",
    ),
    bad(
        {"workerPools[1].gpuType": "mi300x"},
        "healthChecks.nccl.thresholdsGbps.mi300x",
        "no bus-bandwidth threshold for gpuType 'mi300x' (workerPools[1]); known: a100, b200,",
        id="gpu-type-without-threshold",
    ),
    bad(
        {"healthChecks.nccl.thresholdsGbps": {"a100": 150}},
        "healthChecks.nccl.thresholdsGbps.h100",
        "no bus-bandwidth threshold for gpuType 'h100' (workerPools[1]); known: a100",
        id="custom-thresholds-miss-gpu-type",
    ),
    bad(
        {"accounting": {"mode": "external", "external": {"host": "db.example.com"}}},
        "accounting.external.passwordSecret",
        "an external database needs a password: `pulumi config set --secret "
        "accountingDbPassword <password>` or external.passwordSecret",
        id="external-accounting-without-password",
    ),
    # ---- per-field validation (models.py / fields.py)
    bad(
        {"workerPools[1].name": "gpu_a", "partitions[1].pools": ["cpu"]},
        "workerPools[1].name",
        "'gpu_a' is not a DNS label: use 1-63 lowercase letters, digits and '-'",
        id="pool-name-not-dns-label",
    ),
    bad(
        {"name": "Prod"},
        "name",
        "'Prod' is not a DNS label",
        id="cluster-name-uppercase",
    ),
    bad(
        {"name": "-prod"},
        "name",
        "'-prod' is not a DNS label",
        id="cluster-name-leading-dash",
    ),
    bad(
        {"name": "c" * 31},
        "name",
        "at most 30",
        id="cluster-name-too-long",
    ),
    bad(
        {"namespace": "HPC"},
        "namespace",
        "'HPC' is not a DNS label",
        id="namespace-not-dns-label",
    ),
    bad(
        {"namespace": "kube-system"},
        "namespace",
        "'kube-system' is a Kubernetes system namespace",
        id="namespace-kube-system",
    ),
    bad(
        {"namespace": "kube-public"},
        "namespace",
        "the prefix 'kube-' is reserved for them",
        id="namespace-kube-public",
    ),
    bad(
        {"namespace": "kube-node-lease"},
        "namespace",
        "'kube-node-lease' is a Kubernetes system namespace (the prefix 'kube-' is reserved for "
        "them), where the cluster's pods and Secrets would sit beside the control plane's: use a "
        "namespace of the cluster's own, e.g. 'slurm'",
        id="namespace-kube-node-lease",
    ),
    bad(
        {"workerPools[0].gpuType": "h100"},
        "workerPools[0].gpus",
        "gpuType 'h100' is set but gpus is 0: set gpus to 1-16",
        id="gpu-type-without-gpus",
    ),
    bad(
        {"workerPools[0].defMemPerCpu": 2000},
        "workerPools[0].defMemPerCpu",
        "2000 MiB per CPU is more than the node's RealMemory (972 MiB): no job without --mem "
        "could start; give at most 972",
        id="def-mem-per-cpu-above-the-node",
    ),
    bad(
        {"workerPools[0].defMemPerCpu": 0},
        "workerPools[0].defMemPerCpu",
        "Input should be greater than or equal to 1",
        id="def-mem-per-cpu-zero",
    ),
    bad(
        {"workerPools[1].gpus": 17},
        "workerPools[1].gpus",
        "Input should be less than or equal to 16 (got 17)",
        id="too-many-gpus",
    ),
    bad(
        {"workerPools[0].replicas": -1},
        "workerPools[0].replicas",
        "Input should be greater than or equal to 0 (got -1)",
        id="negative-replicas",
    ),
    bad(
        {"workerPools[0].shmSize": "16GB"},
        "workerPools[0].shmSize",
        "'16GB' is not a Kubernetes quantity (examples: '500m', '4', '64Gi', '1.5T', '129e6')",
        id="bad-quantity-shm",
    ),
    bad(
        {"workerPools[0].resources": {"limits": {"memory": "lots"}}},
        "workerPools[0].resources.limits.memory",
        "'lots' is not a Kubernetes quantity",
        id="bad-quantity-resources",
    ),
    bad(
        {"login.resources": {"limits": {"ephemeral-storage": "20"}}},
        "login.resources.limits.ephemeral-storage",
        "'20' has no unit, and Kubernetes reads it as 20 bytes: add a unit, e.g. '20Mi' or '20Gi'",
        id="ephemeral-storage-without-unit",
    ),
    bad(
        {"workerPools[0].resources": {"limits": {"memory": "2000000"}}},
        "workerPools[0].resources.limits.memory",
        "'2000000' has no unit, and Kubernetes reads it as 2000000 bytes (2.0 MB): add a unit, "
        "e.g. '2000000Mi' or '2000000Gi'",
        id="memory-of-2-mb-without-unit",
    ),
    bad(
        {"login.resources": {"requests": {"memory": "1e3"}}},
        "login.resources.requests.memory",
        "'1e3' is 1000 bytes, less than 1Mi: add a unit, e.g. '20Gi'",
        id="memory-exponent-below-a-mebibyte",
    ),
    bad(
        {"workerPools[0].resources": {"requests": {"memory": "512m"}}},
        "workerPools[0].resources.requests.memory",
        "'512m' is 0.512 bytes, a fraction of a byte: 'm' means milli; write '512Mi'",
        id="memory-in-millibytes",
    ),
    bad(
        {
            "workerPools[1].resources": {
                "requests": {"ephemeral-storage": "200Gi"},
                "limits": {"ephemeral-storage": "100Gi"},
            }
        },
        "workerPools[1].resources.requests.ephemeral-storage",
        "'200Gi' is more than limits.ephemeral-storage '100Gi': Kubernetes refuses a request "
        "above its limit",
        id="ephemeral-storage-request-above-limit",
    ),
    bad(
        {"accounting.embedded.resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}},
        "accounting.embedded.resources.requests.cpu",
        "'2' is more than limits.cpu '500m'",
        id="cpu-request-above-limit",
    ),
    bad(
        {"controller.resources": {"limits": {"ephemeral-storage": "0"}}},
        "controller.resources.limits.ephemeral-storage",
        "a limit of '0' leaves no room at all: give a size, or leave the limit out for none",
        id="ephemeral-storage-limit-zero",
    ),
    bad(
        {"controller.maxNodeCount": 0},
        "controller.maxNodeCount",
        "Input should be greater than or equal to 1 (got 0)",
        2,  # and the relational rule: 0 is less than the 4 replicas
        id="max-node-count-zero",
    ),
    bad(
        {"images.worker": "ghcr.io/acme/worker:latest"},
        "images.worker",
        "'ghcr.io/acme/worker:latest' is not pinned: give a version tag (not 'latest') or a digest",
        id="image-latest",
    ),
    bad(
        {"images.login": "ghcr.io/acme/login"},
        "images.login",
        "'ghcr.io/acme/login' is not pinned",
        id="image-untagged",
    ),
    bad(
        {"images.controller": "GHCR.io/Acme/ctl:1.0"},
        "images.controller",
        "is not an image reference like 'registry/name:tag'",
        id="image-not-a-reference",
    ),
    bad(
        {"images.tag": "latest"},
        "images.tag",
        "'latest' is not a pinned image tag (e.g. '26.05-0.1.0', not 'latest')",
        id="image-tag-latest",
    ),
    bad(
        {"images.tag": "26.05 rc1"},
        "images.tag",
        "'26.05 rc1' is not a pinned image tag",
        id="image-tag-bad-characters",
    ),
    bad(
        {"images.worker": "ghcr.io/acme/worker@sha256:abc123"},
        "images.worker",
        "has a malformed digest 'sha256:abc123': give 'sha256:' and 64 lowercase hex digits",
        id="image-digest-too-short",
    ),
    bad(
        {"images.mariadb": "mariadb:11.8@sha256:" + "AB" * 32},
        "images.mariadb",
        "has a malformed digest",
        id="image-digest-uppercase",
    ),
    bad(
        {"jail.populate.image": "ghcr.io/acme/jail@md5:" + "ab" * 16},
        "jail.populate.image",
        "has a malformed digest 'md5:",
        id="populate-image-digest-not-sha256",
    ),
    bad(
        {"images.tag": "26.05-0.1.0@sha256:" + "ab" * 32},
        "images.tag",
        "is a digest, which names one image, not a tag for all of them: pin each image by "
        "digest under images.<component>",
        id="image-tag-is-a-digest",
    ),
    bad(
        {"images.registry": "registry.example.com/slurm-stack@sha256:" + "ab" * 32},
        "images.registry",
        "is not a registry path like 'registry.example.com/slurm-stack' (lowercase, no tag or "
        "digest",
        id="image-registry-with-digest",
    ),
    bad(
        {"images.registry": "registry.example.com/slurm-stack/"},
        "images.registry",
        "is not a registry path",
        id="image-registry-trailing-slash",
    ),
    bad(
        {"login.service.loadBalancerSourceRanges": ["10.0.0.0/8", "203.0.113.0/33"]},
        "login.service.loadBalancerSourceRanges[1]",
        "'203.0.113.0/33' is not a CIDR range like '203.0.113.0/24'",
        id="bad-cidr",
    ),
    bad(
        {"controller.slurmConfExtra": ["SrunPortRange=50000-50100"]},
        "controller.slurmConfExtra[0]",
        "SrunPortRange is set by slurm-stack; configure it through slurm-stack (the "
        "NetworkPolicies open 60001-63000 for srun)",
        id="owned-slurm-conf-key-SrunPortRange",
    ),
    bad(
        {"networkPolicy": {"enable": False}},
        "networkPolicy.enable",
        "unknown key; valid keys here: apiServerCidrs, enabled, sshSourceRanges",
        id="network-policy-unknown-key",
    ),
    bad(
        {"networkPolicy.enabled": "no"},
        "networkPolicy.enabled",
        "Input should be a valid boolean (got 'no')",
        id="network-policy-enabled-not-bool",
    ),
    bad(
        {"networkPolicy.apiServerCidrs": ["10.0.0.0/24", "172.20.0.1"]},
        "networkPolicy.apiServerCidrs[1]",
        "'172.20.0.1' has no prefix length: use '172.20.0.1/32'",
        id="api-server-cidr-without-prefix",
    ),
    bad(
        {"networkPolicy.apiServerCidrs": ["10.0.0.5/24"]},
        "networkPolicy.apiServerCidrs[0]",
        "'10.0.0.5/24' has host bits set: use '10.0.0.0/24' for the network, or '10.0.0.5/32' "
        "for one address",
        id="api-server-cidr-host-bits",
    ),
    bad(
        {"networkPolicy.apiServerCidrs": ["0.0.0.0/0"]},
        "networkPolicy.apiServerCidrs[0]",
        "'0.0.0.0/0' is every address: list only the API server's addresses",
        id="api-server-cidr-everything",
    ),
    bad(
        {"networkPolicy.sshSourceRanges": ["2001:db8::/129"]},
        "networkPolicy.sshSourceRanges[0]",
        "'2001:db8::/129' is not a CIDR range like '203.0.113.0/24'",
        id="ssh-source-range-bad-cidr",
    ),
    bad(
        {"login.service": {"type": "NodePort", "nodePort": 2222}},
        "login.service.nodePort",
        "Input should be greater than or equal to 30000 (got 2222)",
        id="node-port-below-range",
    ),
    bad(
        {"login.service": {"type": "NodePort", "nodePort": 40000}},
        "login.service.nodePort",
        "Input should be less than or equal to 32767 (got 40000)",
        id="node-port-above-range",
    ),
    bad(
        {"login.service": {"type": "ClusterIP", "nodePort": 30022}},
        "login.service.nodePort",
        "nodePort is only valid with type NodePort or LoadBalancer",
        id="node-port-with-cluster-ip",
    ),
    bad(
        {"login.service": {"type": "NodePort", "loadBalancerSourceRanges": ["10.0.0.0/8"]}},
        "login.service.loadBalancerSourceRanges",
        "loadBalancerSourceRanges is only valid with type LoadBalancer",
        id="source-ranges-with-node-port",
    ),
    bad(
        {"login.rootAuthorizedKeys": ["ssh-dss AAAAB3NzaC1kc3MAAACBAP admin"]},
        "login.rootAuthorizedKeys[0]",
        "is not an OpenSSH public key; it must start with one of ssh-ed25519, ssh-rsa",
        id="bad-ssh-key-root",
    ),
    bad(
        {"login.users": [{"name": "alice", "authorizedKeys": [ED25519, "AAAAC3Nza alice"]}]},
        "login.users[0].authorizedKeys[1]",
        "is not an OpenSSH public key",
        id="bad-ssh-key-user",
    ),
    # ---- SSH public keys: what sshd could not read (slurm_stack/spec/ssh_keys.py)
    bad(
        {"login.users": [{"name": "alice", "authorizedKeys": [ED25519, "ssh-ed25519 AAAA!C3Nz"]}]},
        "login.users[0].authorizedKeys[1]",
        "the ssh-ed25519 key's blob 'AAAA!C3Nz' is not base64: it contains '!'",
        id="ssh-key-not-base64",
    ),
    bad(
        {"login.rootAuthorizedKeys": [f"ssh-ed25519 {ED25519_BLOB[:-1]} admin"]},
        "login.rootAuthorizedKeys[0]",
        "is not base64: its length or '=' padding is wrong; was it cut short?",
        id="ssh-key-cut-inside-base64",
    ),
    bad(
        # The blob ends in "Do=": "Dp=" sets a bit past its last byte.
        {"login.rootAuthorizedKeys": [SK_ED25519.removesuffix("Do=") + "Dp="]},
        "login.rootAuthorizedKeys[0]",
        "is not base64 as sshd reads it: its last character has bits set past the end",
        id="ssh-key-base64-bits-past-the-end",
    ),
    bad(
        {
            "login.users": [
                {"name": "alice", "authorizedKeys": [ED25519, f"ssh-ed25519 {RSA.split()[1]} a"]}
            ]
        },
        "login.users[0].authorizedKeys[1]",
        "the blob is an ssh-rsa key but the line says ssh-ed25519",
        id="ssh-key-blob-of-another-type",
    ),
    bad(
        {"login.rootAuthorizedKeys": [f"ecdsa-sha2-nistp256 {ECDSA[384].split()[1]}"]},
        "login.rootAuthorizedKeys[0]",
        "the blob is an ecdsa-sha2-nistp384 key but the line says ecdsa-sha2-nistp256",
        id="ssh-key-blob-of-another-curve",
    ),
    bad(
        {"login.rootAuthorizedKeys": [f"ssh-ed25519 {ED25519_BLOB[:-4]} admin"]},
        "login.rootAuthorizedKeys[0]",
        "the ssh-ed25519 key in the blob is cut short: the blob ends inside the key",
        id="ssh-key-truncated",
    ),
    bad(
        {"login.rootAuthorizedKeys": [f"ssh-rsa {RSA.split()[1][:200]}"]},
        "login.rootAuthorizedKeys[0]",
        "the ssh-rsa key in the blob is cut short",
        id="ssh-key-rsa-truncated",
    ),
    bad(
        {"login.rootAuthorizedKeys": [f"ssh-ed25519 {ED25519_BLOB}AAAA"]},
        "login.rootAuthorizedKeys[0]",
        "the ssh-ed25519 key in the blob is followed by data that is not part of it",
        id="ssh-key-trailing-data",
    ),
    bad(
        {
            "login.rootAuthorizedKeys": [
                "ssh-ed25519 " + _blob("ssh-ed25519", _ED25519_RAW[:31]),
            ]
        },
        "login.rootAuthorizedKeys[0]",
        "the ssh-ed25519 key in the blob is not a valid key (An Ed25519 public key is 32 bytes",
        id="ssh-key-ed25519-of-31-bytes",
    ),
    bad(
        {
            "login.rootAuthorizedKeys": [
                "ecdsa-sha2-nistp256 "
                + _blob("ecdsa-sha2-nistp256", "nistp384", _point(ec.SECP384R1()))
            ]
        },
        "login.rootAuthorizedKeys[0]",
        "not a valid key (Curve name mismatch)",
        id="ssh-key-ecdsa-curve-mismatch",
    ),
    bad(
        {"login.rootAuthorizedKeys": [SK_ED25519.split()[0] + " " + _blob(SK_ED25519.split()[0])]},
        "login.rootAuthorizedKeys[0]",
        "the sk-ssh-ed25519@openssh.com key in the blob is cut short",
        id="ssh-key-security-key-without-its-key",
    ),
    bad(
        {"login.rootAuthorizedKeys": [RSA_768]},
        "login.rootAuthorizedKeys[0]",
        "the ssh-rsa key has 768 bits; sshd reads no RSA key under 1024 bits",
        id="ssh-key-rsa-too-short",
    ),
    bad(
        {"login.rootAuthorizedKeys": ["ssh-ed25519 " + base64.b64encode(b"a@b.example").decode()]},
        "login.rootAuthorizedKeys[0]",
        "does not start with a key type: it is not an OpenSSH public key",
        id="ssh-key-blob-not-a-key",
    ),
    bad(
        {"login.rootAuthorizedKeys": ["ssh-ed25519"]},
        "login.rootAuthorizedKeys[0]",
        "the ssh-ed25519 key has no base64 blob after its type",
        id="ssh-key-type-alone",
    ),
    bad(
        {"login.rootAuthorizedKeys": [f"ssh-ed25519-cert-v01@openssh.com {ED25519_BLOB}"]},
        "login.rootAuthorizedKeys[0]",
        "ssh-ed25519-cert-v01@openssh.com is an OpenSSH certificate, not a public key",
        id="ssh-key-certificate",
    ),
    bad(
        {"login.users": [{"name": "alice", "authorizedKeys": [f'from="10.0.0.0/8" {ED25519}']}]},
        "login.users[0].authorizedKeys[0]",
        "options before the key type are not taken here",
        id="ssh-key-with-options",
    ),
    bad(
        {"login.users": [{"name": "Alice", "authorizedKeys": [ED25519]}]},
        "login.users[0].name",
        "String should match pattern",
        id="login-user-name-uppercase",
    ),
    bad(
        {"login.users": [{"name": "alice", "uid": 64030, "authorizedKeys": [ED25519]}]},
        "login.users[0].uid",
        "64030 is not a user id slurm-stack may assign: use 1000-59999 (ids below belong to "
        "the jail image's system accounts; 60000 and up are reserved, slurm is 64030)",
        id="login-user-uid-system",
    ),
    *(
        bad(
            {submounts: [_host(host_path)]},
            f"{submounts}[0].hostPath",
            fragment,
            id=f"host-path-{host_path.strip('/').replace('/', '-') or 'root'}",
        )
        for submounts, host_path, fragment in [
            ("workerPools[0].submounts", "/", "'/' is the node's whole filesystem"),
            ("workerPools[0].submounts", "/etc", "'/etc' is the node's configuration"),
            ("workerPools[0].submounts", "/etc/kubernetes", "'/etc/kubernetes' is under /etc"),
            ("workerPools[1].submounts", "/proc", "'/proc' is the node's process and kernel"),
            ("workerPools[1].submounts", "/proc/1/root", "'/proc/1/root' is under /proc"),
            ("workerPools[0].submounts", "/sys", "'/sys' is the node's kernel interface"),
            ("workerPools[0].submounts", "/sys/fs/cgroup", "is under /sys"),
            ("workerPools[0].submounts", "/dev", "'/dev' is the node's devices"),
            ("workerPools[1].submounts", "/dev/nvidia0", "'/dev/nvidia0' is under /dev"),
            ("workerPools[0].submounts", "/boot", "'/boot' is the node's kernel and boot"),
            ("workerPools[0].submounts", "/root", "'/root' is the home of the node's root"),
            ("workerPools[0].submounts", "/run", "'/run' is the node's runtime state"),
            ("workerPools[0].submounts", "/var/run", "'/var/run' is the node's runtime state"),
            ("workerPools[0].submounts", "/run/containerd", "'/run/containerd' is under /run"),
            ("workerPools[0].submounts", "/var/run/containerd", "is under /var/run"),
            ("workerPools[0].submounts", "/var/run/docker.sock", "is under /var/run"),
            ("workerPools[0].submounts", "/var/lib/kubelet", "the kubelet's state, with every"),
            ("workerPools[0].submounts", "/var/lib/kubelet/pods", "is under /var/lib/kubelet"),
            ("workerPools[0].submounts", "/var/lib/docker", "the container runtime's storage"),
            ("workerPools[0].submounts", "/var/lib/containerd", "the container runtime's"),
            ("workerPools[0].submounts", "/var/lib/etcd", "etcd's data"),
            ("workerPools[0].submounts", "/var", "'/var' contains /var/run, the node's runtime"),
            ("workerPools[0].submounts", "/var/lib", "'/var/lib' contains /var/lib/kubelet"),
            ("jail.submounts", "/etc/ssl", "'/etc/ssl' is under /etc, the node's configuration"),
        ]
    ),
    bad(
        {"login.users": [{"name": "alice", "gid": 100, "authorizedKeys": [ED25519]}]},
        "login.users[0].gid",
        "100 is not a user id slurm-stack may assign",
        id="login-user-gid-system",
    ),
    bad(
        {
            "login.users": [
                {"name": "alice", "uid": 5000, "authorizedKeys": [ED25519]},
                {"name": "bob", "uid": 5000, "authorizedKeys": [ED25519]},
            ]
        },
        "login.users[1].uid",
        "uid 5000 of 'bob' is also the uid of 'alice'; set a distinct uid for one of them",
        id="login-users-same-uid",
    ),
    bad(
        {
            "login.users": [
                {"name": "u222", "authorizedKeys": [ED25519]},
                {"name": "u301", "authorizedKeys": [ED25519]},
            ]
        },
        "login.users[1].uid",
        "uid 24457 of 'u301' is also the uid of 'u222'",
        id="login-users-derived-uid-collision",
    ),
    bad(
        {
            "login.users": [
                {"name": "alice", "uid": 5000, "authorizedKeys": [ED25519]},
                {"name": "bob", "uid": 5001, "gid": 5000, "authorizedKeys": [ED25519]},
            ]
        },
        "login.users[1].gid",
        "'bob''s own group would have gid 5000, which is group 'alice''s",
        id="login-users-gid-of-another-users-group",
    ),
    bad(
        {"login.users": [{"name": "alice", "groups": ["ml", "ml"], "authorizedKeys": [ED25519]}]},
        "login.users[0].groups",
        "group names must be unique: ml repeated",
        id="login-user-group-twice",
    ),
    bad(
        {"login.users": [{"name": "alice", "shell": "bash", "authorizedKeys": [ED25519]}]},
        "login.users[0].shell",
        "absolute",
        id="login-user-shell-relative",
    ),
    bad(
        {"login.users": [{"name": "alice", "account": "Research", "authorizedKeys": [ED25519]}]},
        "login.users[0].account",
        "String should match pattern",
        id="login-user-account-uppercase",
    ),
    bad(
        {"login.sshdExtra": ["MaxSessions"]},
        "login.sshdExtra[0]",
        "'MaxSessions' is not a single 'Keyword value' line (example: 'MaxSessions 20')",
        id="sshd-line-without-value",
    ),
    bad(
        {"controller.slurmConfExtra": ["MaxJobCount 5"]},
        "controller.slurmConfExtra[0]",
        "'MaxJobCount 5' is not a single 'Key=Value' line (example: 'MaxJobCount=50000')",
        id="slurm-conf-line-not-key-value",
    ),
    bad(
        {"workerPools[0].nodeConfExtra": ["CoreSpecCount=2\nNodeName=x"]},
        "workerPools[0].nodeConfExtra[0]",
        "contains the control character '\\n'",
        id="node-conf-line-with-newline",
    ),
    bad(
        {"workerPools[1].features": ["ib", "NVLink"]},
        "workerPools[1].features[1]",
        "'NVLink' is not a DNS label",
        id="feature-not-dns-label",
    ),
    bad(
        {"workerPools[1].gpuType": "h100 80g", "healthChecks.nccl.enabled": False},
        "workerPools[1].gpuType",
        "'h100 80g' is not a GRES type: use letters, digits and '_'",
        id="bad-gres-type",
    ),
    bad(
        {"healthChecks.nccl.schedule": "0 3 * *"},
        "healthChecks.nccl.schedule",
        "'0 3 * *' is not a five-field cron schedule: use five fields such as '0 3 * * 0'",
        id="bad-cron",
    ),
    bad(
        {"healthChecks.nccl.schedule": "0 25 * * *"},
        "healthChecks.nccl.schedule",
        "'0 25 * * *' is not a valid cron schedule (Bad hour)",
        id="cron-hour-out-of-range",
    ),
    bad(
        {"healthChecks.nccl.schedule": "0 3 * * 5#2"},
        "healthChecks.nccl.schedule",
        "uses L, W or '#', which Kubernetes' cron does not know",
        id="cron-quartz-syntax",
    ),
    bad(
        {"healthChecks.nccl.schedule": "0 3 * * 7"},
        "healthChecks.nccl.schedule",
        "days of the week are 0-6 (Sunday is 0)",
        id="cron-day-of-week-7",
    ),
    bad(
        {"healthChecks.nccl.schedule": "@reboot"},
        "healthChecks.nccl.schedule",
        "'@reboot' is not a cron descriptor",
        id="cron-unknown-descriptor",
    ),
    bad(
        {"healthChecks.nccl.minBytes": "1.5G"},
        "healthChecks.nccl.minBytes",
        "'1.5G' is not an all_reduce_perf message size: a whole number with an optional K, M, G",
        id="nccl-size-not-whole",
    ),
    bad(
        {"healthChecks.nccl.minBytes": "16G", "healthChecks.nccl.maxBytes": "8G"},
        "healthChecks.nccl.minBytes",
        "minBytes '16G' is larger than maxBytes '8G'",
        id="nccl-sizes-out-of-order",
    ),
    bad(
        # No disk is 100 % free: every node would fail its check and drain.
        {"healthChecks.quick.minFreeDiskPercent": 100},
        "healthChecks.quick.minFreeDiskPercent",
        "Input should be less than 100",
        id="min-free-disk-percent-100",
    ),
    bad(
        {"healthChecks.quick.nodeStates": ["BUSY"]},
        "healthChecks.quick.nodeStates[0]",
        "Input should be 'ALLOC', 'ANY',",
        id="bad-health-check-node-state",
    ),
    bad(
        {"partitions[0].maxTime": "1 day"},
        "partitions[0].maxTime",
        "String should match pattern",
        id="bad-max-time",
    ),
    bad(
        {"partitions[0].name": "my batch"},
        "partitions[0].name",
        "String should match pattern",
        id="bad-partition-name",
    ),
    bad(
        {"workerPools[0].submounts": [_empty("scratch", "scratch")]},
        "workerPools[0].submounts[0].mountPath",
        "'scratch' must be an absolute path like '/scratch' (not '/')",
        id="submount-relative-path",
    ),
    bad(
        {"workerPools[0].submounts": [_empty("root", "/")]},
        "workerPools[0].submounts[0].mountPath",
        "'/' must be an absolute path like '/scratch' (not '/')",
        id="submount-root-path",
    ),
    bad(
        {"workerPools[0].submounts": [_empty("up", "/scratch/../etc")]},
        "workerPools[0].submounts[0].mountPath",
        "'/scratch/../etc' must not contain '.' or '..' components",
        id="submount-dotdot-path",
    ),
    bad(
        {
            "workerPools[0].submounts": [
                {"type": "hostPath", "name": "nvme", "mountPath": "/nvme", "hostPath": "mnt/nvme"}
            ]
        },
        "workerPools[0].submounts[0].hostPath",
        "'mnt/nvme' must be an absolute path",
        id="host-path-relative",
    ),
    bad(
        {"workerPools[0].submounts": [{"type": "memory", "name": "ram", "mountPath": "/ram"}]},
        "workerPools[0].submounts[0].sizeLimit",
        "required",
        id="memory-submount-without-size-limit",
    ),
    bad(
        {"workerPools[0].submounts": [_pvc(existingClaim="data", size="1Ti")]},
        "workerPools[0].submounts[0].size",
        "give exactly one of existingClaim (use a claim that exists) or size "
        "(a new claim per node)",
        id="pvc-submount-with-claim-and-size",
    ),
    bad(
        {"workerPools[0].submounts": [_pvc()]},
        "workerPools[0].submounts[0].existingClaim",
        "give exactly one of existingClaim",
        id="pvc-submount-without-claim-or-size",
    ),
    bad(
        {"workerPools[0].submounts": [_pvc(size="1 Ti")]},
        "workerPools[0].submounts[0].size",
        "'1 Ti' is not a Kubernetes quantity",
        id="pvc-submount-bad-size",
    ),
    bad(
        {"workerPools[0].submounts": [{"type": "nfs", "name": "home", "mountPath": "/home"}]},
        "workerPools[0].submounts[0]",
        "Input tag 'nfs' found using 'type' does not match any of the expected tags: "
        "'emptyDir', 'memory', 'hostPath', 'pvc'",
        id="submount-unknown-type",
    ),
    bad(
        {"workerPools[0].submounts": [{"name": "s", "mountPath": "/s"}]},
        "workerPools[0].submounts[0]",
        "Unable to extract tag using discriminator 'type'",
        id="submount-without-type",
    ),
    bad(
        {"workerPools[0].submounts": [_empty() | {"readonly": True}]},
        "workerPools[0].submounts[0].readonly",
        "unknown key; valid keys here: mountPath, name, sizeLimit, type",
        id="submount-unknown-key-lists-valid-keys",
    ),
    bad(
        {"jail": {"size": "1Ti"}},
        "jail.storageClass",
        "the jail needs a ReadWriteMany volume: set storageClass (an RWX class such as an NFS "
        "or CephFS one) or existingClaim",
        id="jail-without-storage-class-or-claim",
    ),
    bad(
        {"jail.submounts": [_pvc("home", "/shared", size="1Ti")]},
        "jail.submounts[0].size",
        "jail submount 'home' is shared by login and workers, so it needs existingClaim, "
        "not a per-node size",
        id="jail-pvc-submount-without-claim",
    ),
    bad(
        {
            "accounting": {
                "mode": "external",
                "external": {"passwordSecret": {"name": "db", "key": "password"}},
            }
        },
        "accounting.external.host",
        "mode 'external' needs external.host (the database server's name)",
        id="external-accounting-without-host",
    ),
    bad(
        {"accounting.mode": "postgres"},
        "accounting.mode",
        "Input should be 'embedded', 'mariadb-operator' or 'external' (got 'postgres')",
        id="bad-accounting-mode",
    ),
    bad(
        {"accounting.purge.jobsAfter": "2 years"},
        "accounting.purge.jobsAfter",
        "String should match pattern",
        id="bad-purge-age",
    ),
    bad(
        {"nodes": 3},
        "nodes",
        "unknown key; valid keys here: accounting, annotations, auth, cgroups, containers, "
        "controller, directory, externalNodes, healthChecks, images, jail, labels, login, "
        "metrics, name, "
        "namespace, networkPolicy, nodeState, partitions, restApi, siteScripts, slurmVersion, "
        "topology, workerPools",
        id="unknown-top-level-key",
    ),
    bad(
        {"workerPools[1].gpu": 8},
        "workerPools[1].gpu",
        "unknown key; valid keys here: defMemPerCpu, drain, elastic, features, gpuType, gpus, "
        "labelFeatures, name,",
        id="unknown-pool-key",
    ),
    bad(
        {
            "slurmVersion": "24.11",
            "controller.scheduler.parameters": ["bf_continue", "requeue_delay=5"],
        },
        "controller.scheduler.parameters[1]",
        "requeue_delay needs Slurm 26.05 or newer; slurmVersion is 24.11",
        id="requeue-delay-before-26.05",
    ),
    bad(
        {"controller.slurmConfExtra": ["Epilog=/opt/site/epilog"]},
        "controller.slurmConfExtra[0]",
        "Epilog is set by slurm-stack; configure it through slurm-stack (it removes each job's",
        id="epilog-is-ours",
    ),
    bad(
        {"controller.slurmConfExtra": ["DisableRootJobs=NO"]},
        "controller.slurmConfExtra[0]",
        "DisableRootJobs is set by slurm-stack; configure it through jail.allowRootJobs",
        id="root-jobs-through-the-jail-option",
    ),
    bad(
        {"jail.allowRootJobs": "sometimes"},
        "jail.allowRootJobs",
        "Input should be a valid boolean",
        id="allow-root-jobs-is-a-boolean",
    ),
    bad(
        {"workerPools[0].drainTimeoutSeconds": 30},
        "workerPools[0].drainTimeoutSeconds",
        "this key was renamed: use drain.waitSeconds (and drain.policy says what happens",
        id="renamed-drain-timeout",
    ),
    bad(
        {"workerPools[0].drain": {"policy": "wait", "waitSeconds": 60}},
        "workerPools[0].drain.waitSeconds",
        "waitSeconds is a deadline and policy 'wait' has none",
        id="wait-policy-with-deadline",
    ),
    bad(
        # An update waits for jobs by default: a deadline needs another policy.
        {"workerPools[0].update": {"waitSeconds": 600}},
        "workerPools[0].update.waitSeconds",
        "waitSeconds is a deadline and policy 'wait' has none",
        id="update-deadline-with-the-default-wait",
    ),
    bad(
        {"workerPools[0].update.policy": "restart"},
        "workerPools[0].update.policy",
        "Input should be 'requeue', 'cancel' or 'wait'",
        id="unknown-update-policy",
    ),
    bad(
        {"workerPools[0].drain.policy": "kill"},
        "workerPools[0].drain.policy",
        "Input should be 'requeue', 'cancel' or 'wait'",
        id="unknown-drain-policy",
    ),
    bad(
        {"workerPools[0].drain.maxUnavailable": "150%"},
        "workerPools[0].drain.maxUnavailable",
        "give a number of pods (0 or more) or a percentage such as '25%' (got '150%')",
        id="drain-max-unavailable-percent",
    ),
    bad(
        {"workerPools[0].drain.maxUnavailable": -1},
        "workerPools[0].drain.maxUnavailable",
        "give a number of pods (0 or more)",
        id="drain-max-unavailable-negative",
    ),
    bad(
        {"login.service.typ": "NodePort"},
        "login.service.typ",
        "unknown key; valid keys here: annotations, loadBalancerSourceRanges, nodePort, port, type",
        id="unknown-nested-key",
    ),
    bad(
        {"workerPools[1].gpus": "eight"},
        "workerPools[1].gpus",
        "Input should be a valid integer (got 'eight')",
        id="wrong-type-int",
    ),
    bad(
        {"workerPools[1].features": "ib"},
        "workerPools[1].features",
        "Input should be a valid list (got 'ib')",
        id="wrong-type-list",
    ),
    bad(
        {"labels": {"team": [7]}},
        "labels.team",
        "Input should be a valid string",
        id="wrong-type-label-value",  # a bare 7 is taken as "7" (SCALAR_TEXT)
    ),
    bad(
        {"slurmVersion": "25.05"},
        "slurmVersion",
        "Input should be '24.11' or '26.05' (got '25.05')",
        id="unknown-slurm-version",
    ),
    bad(
        {"auth": "jwt"},
        "auth",
        "Input should be 'munge' or 'slurm' (got 'jwt')",
        id="bad-auth",
    ),
    bad({"name": DELETE}, "name", "required", id="missing-name"),
    bad(
        {"workerPools": [], "partitions": DELETE},
        "workerPools",
        "List should have at least 1 item after validation, not 0",
        id="no-worker-pools",
    ),
    bad(
        {"controller.placement.tolerations": [{"key": "gpu", "operator": "In"}]},
        "controller.placement.tolerations[0].operator",
        "Input should be 'Equal' or 'Exists' (got 'In')",
        id="bad-toleration-operator",
    ),
    # ---- string maps take scalars as text, but never a mapping, a list or null
    bad(
        {"labels": {"team": {"name": "hpc"}}},
        "labels.team",
        "Input should be a valid string",
        id="label-value-mapping",
    ),
    bad(
        {"annotations": {"owners": ["a", "b"]}},
        "annotations.owners",
        "Input should be a valid string",
        id="annotation-value-list",
    ),
    bad(
        {"login.service.annotations": {"lb": None}},
        "login.service.annotations.lb",
        "Input should be a valid string",
        id="service-annotation-null",
    ),
    bad(
        {"controller.placement.nodeSelector": {"pool": {"gpu": True}}},
        "controller.placement.nodeSelector.pool",
        "Input should be a valid string",
        id="node-selector-mapping",
    ),
    # ---- externalNodes: hosts outside Kubernetes
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [{"name": "cpu", "hosts": ["bm1"]}],
            }
        },
        "externalNodes.pools[0].name",
        "'cpu' is used more than once",
        2,  # the worker pool of that name too
        id="outside-pool-named-like-a-worker-pool",
    ),
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [{"name": "metal", "hosts": ["prod-cpu-1"]}],
            }
        },
        "externalNodes.pools[0].hosts[0]",
        "node names that start with 'prod-' are the cluster's worker pods'",
        id="outside-host-named-like-a-pod",
    ),
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [{"name": "a", "hosts": ["bm1", "bm2"]}, {"name": "b", "hosts": ["bm2"]}],
            }
        },
        "externalNodes.pools[1].hosts[0]",
        "'bm2' is already a host of pools[0]",
        id="outside-host-in-two-pools",
    ),
    bad(
        {"externalNodes": {"addressRanges": [], "pools": [{"name": "metal", "hosts": ["bm1"]}]}},
        "externalNodes.addressRanges",
        "at least 1 item",
        id="outside-nodes-without-address-ranges",
    ),
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "controllerService": {"type": "NodePort"},
                "pools": [{"name": "metal", "hosts": ["bm1"]}],
            }
        },
        "externalNodes.controllerService.type",
        "'LoadBalancer'",
        id="outside-controller-service-node-port",
    ),
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [{"name": "metal", "hosts": ["bm1"], "features": ["gpu"]}],
            }
        },
        "externalNodes.pools[0].features[0]",
        "'gpu' is another pool's name",
        id="outside-feature-is-a-pool-name",
    ),
    bad(
        {
            "controller.maxNodeCount": 5,
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [{"name": "metal", "hosts": ["a", "b"]}],
            },
        },
        "controller.maxNodeCount",
        "5 is less than the 6 nodes of all pools",
        id="outside-hosts-count-against-max-node-count",
    ),
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [
                    {
                        "name": "metal",
                        "hosts": ["bm1"],
                        "drain": {"policy": "wait", "waitSeconds": 5},
                    }
                ],
            }
        },
        "externalNodes.pools[0].drain.waitSeconds",
        "policy 'wait' has none",
        id="outside-drain-wait-with-deadline",
    ),
    bad(
        {
            "externalNodes": {
                "addressRanges": ["192.0.2.0/24"],
                "pools": [{"name": "metal", "hosts": ["bm1"]}],
            },
            "partitions[1].pools": ["gpu", "tpu"],
        },
        "partitions[1].pools[1]",
        "unknown pool 'tpu'; defined pools: cpu, gpu, metal",
        id="partition-names-unknown-pool-beside-outside-pools",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment", "count"), INVALID)
def test_invalid_config_names_the_key(changes, path, fragment, count):
    raw = mutate(BASE, changes)
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    error = info.value
    messages = [issue.message for issue in error.issues if issue.path == path]
    assert messages, f"no issue at {path}; got {[issue.path for issue in error.issues]}"
    assert any(fragment in message for message in messages), messages
    assert len(error.issues) == count, str(error)
    # The rendered error names the full stack config key.
    lines = [line for line in str(error).splitlines() if line.startswith(f"  {KEY}.{path}: ")]
    assert any(fragment in line for line in lines), lines


def test_invalid_table_is_large():
    assert len(INVALID) >= 40


# --------------------------------------------------------------------------- several errors at once


def test_all_errors_are_reported_at_once_and_sorted():
    raw = mutate(
        BASE,
        {
            "workerPools[1].gpus": 99,
            "partitions[1].pools": ["gpu", "nope"],
            "login.service.type": "Ingress",
        },
    )
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    error = info.value
    assert [issue.path for issue in error.issues] == [
        "login.service.type",
        "partitions[1].pools[1]",
        "workerPools[1].gpus",
    ]
    text = str(error)
    lines = text.splitlines()
    assert lines[0] == "invalid stack config (3 errors):"
    assert lines[1:] == sorted(lines[1:])
    assert lines[1].startswith(f"  {KEY}.login.service.type: Input should be 'LoadBalancer'")
    assert (
        lines[2] == f"  {KEY}.partitions[1].pools[1]: unknown pool 'nope'; defined pools: cpu, gpu"
    )
    assert lines[3] == (
        f"  {KEY}.workerPools[1].gpus: Input should be less than or equal to 16 (got 99)"
    )


def test_relational_and_field_errors_on_the_same_pool_are_both_reported():
    raw = mutate(BASE, {"workerPools[0].name": "login", "workerPools[0].replicas": -3})
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    assert [issue.path for issue in info.value.issues] == [
        "workerPools[0].name",
        "workerPools[0].replicas",
    ]


def test_one_error_is_singular():
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"auth": "none"}))
    assert str(info.value).startswith("invalid stack config (1 error):\n")


# --------------------------------------------------------------------------- external DB password


def test_db_password_from_stack_config_satisfies_external_accounting():
    raw = mutate(BASE, {"accounting": {"mode": "external", "external": {"host": "db"}}})
    with pytest.raises(SpecError):
        load_spec(raw)
    spec = load_spec(raw, db_password_provided=True)
    assert spec.accounting.external.password_secret is None
    assert spec.accounting.external.host == "db"


def test_password_rule_only_applies_to_enabled_external_accounting():
    for accounting in (
        {"mode": "embedded"},
        {"mode": "mariadb-operator"},
        {"enabled": False, "mode": "external"},
    ):
        load_spec(mutate(BASE, {"accounting": accounting}))


# ---------------------------------------------------------- regressions found in review


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        P({"workerPools[0].name": ["cpu"]}, "workerPools[0].name", id="pool-name-list"),
        P({"partitions[0].name": {"n": 1}}, "partitions[0].name", id="partition-name-mapping"),
        P(
            {"workerPools[0].submounts": [{"type": "emptyDir", "name": ["a"], "mountPath": "/a"}]},
            "workerPools[0].submounts[0].name",
            id="submount-name-list",
        ),
        P({"workerPools[1].gpuType": ["h100"]}, "workerPools[1].gpuType", id="gpu-type-list"),
    ],
)
def test_non_scalar_names_are_spec_errors(changes, path):
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, changes))
    assert path in {issue.path for issue in info.value.issues}


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        P(
            {"partitions[1].default": "yes"},
            "partitions[1].default",
            id="second-default-partition-as-string",
        ),
        P(
            {"workerPools[0].replicas": "2000"},
            "workerPools[0].replicas",
            id="replicas-as-string-is-not-an-integer",
        ),
        P(
            {"slurmVersion": "24.11", "controller.metrics.enabled": "true"},
            "controller.metrics.enabled",
            id="metrics-enabled-as-string-on-24.11",
        ),
    ],
)
def test_values_are_not_coerced_past_the_rules(changes, path):
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, changes))
    assert path in {issue.path for issue in info.value.issues}


@pytest.mark.parametrize("name", ["DEFAULT", "default"])
def test_partition_named_default_is_rejected(name):
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"partitions[1].name": name}))
    assert "partitions[1].name" in {issue.path for issue in info.value.issues}


def test_pool_feature_may_not_name_another_pool():
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"workerPools[0].features": ["gpu"]}))
    assert "workerPools[0].features[0]" in {issue.path for issue in info.value.issues}


@pytest.mark.parametrize(
    "line",
    ["SlurmctldPort=7817", "SlurmdPort=7818", "AccountingStoragePort=7819", "SlurmdSpoolDir=/x"],
)
def test_extra_may_not_override_wired_ports_and_paths(line):
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"controller.slurmConfExtra": [line]}))
    assert "controller.slurmConfExtra[0]" in {issue.path for issue in info.value.issues}


def test_node_conf_extra_may_not_set_node_name():
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"workerPools[0].nodeConfExtra": ["NodeName=other"]}))
    assert "workerPools[0].nodeConfExtra[0]" in {issue.path for issue in info.value.issues}


def test_too_long_cluster_name_says_characters():
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"name": "c" * 31}))
    (issue,) = info.value.issues
    assert issue.path == "name"
    assert "30 characters" in issue.message


def test_bad_mapping_key_path_is_the_key_itself():
    with pytest.raises(SpecError) as info:
        load_spec(mutate(BASE, {"workerPools[0].resources": {"requests": {"gpu": "1"}}}))
    (issue,) = info.value.issues
    assert issue.path == "workerPools[0].resources.requests.gpu"
