"""Every string of the spec, each map key included, refuses control characters and
surrounding whitespace at its exact key path (slurm_stack/spec/text.py).

FULL sets every string field the model has (a test checks that), so the fuzz below reaches
each of them: a field added to the spec without a value here fails the coverage test.
"""

import copy
import functools
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from slurm_stack.spec import SpecError, load_spec
from slurm_stack.spec.models import ClusterSpec

ROOT = Path(__file__).resolve().parent.parent
PROD = ROOT / "examples" / "production" / "Pulumi.prod.yaml"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqyBO8cZ1qbBKq1WLHVpAMsT5t7dfBZb5CmG0r0lMb2 a@b"
CERTIFICATE = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUB\n-----END CERTIFICATE-----\n"


@functools.cache
def _production_example() -> dict[str, Any]:
    return yaml.safe_load(PROD.read_text())["config"]["slurm-stack:cluster"]


def full_config() -> dict[str, Any]:
    """The production example with every optional string field set as well (a fresh copy
    each call; the file is parsed once)."""
    cluster = copy.deepcopy(_production_example())
    cluster["annotations"] = {"example.com/owner": "ml"}
    cluster["auth"] = "munge"
    cluster["images"].update(
        pullPolicy="Always",
        **{
            component: f"registry.example.com/slurm-stack/{component}:26.05-0.1.0"
            for component in (
                "controller",
                "worker",
                "login",
                "accounting",
                "munge",
                "jail",
                "ops",
                "rest",
                "sssd",
                "mariadb",
            )
        },
    )
    cluster["controller"]["scheduler"] = {
        "type": "sched/backfill",
        "parameters": ["bf_continue"],
        "selectTypeParameters": "CR_Core_Memory",
    }
    cluster["controller"]["placement"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "slurm", "effect": "NoSchedule"}
    ]
    login = cluster["login"]
    login["defaultAccount"] = "research"
    login["users"] = [
        {
            "name": "alice",
            "authorizedKeys": [KEY],
            "groups": ["ml"],
            "shell": "/bin/zsh",
            "account": "research",
            "defaultQos": "normal",
        }
    ]
    login["service"] = {
        "type": "LoadBalancer",
        "annotations": {"example.com/lb": "internal"},
        "loadBalancerSourceRanges": ["198.51.100.0/24"],
    }
    cluster["workerPools"][0]["drain"]["maxUnavailable"] = "25%"
    cluster["workerPools"][0]["nodeConfExtra"] = ["CoreSpecCount=2"]
    cluster["workerPools"][0]["submounts"].append(
        {"type": "emptyDir", "name": "scratch", "mountPath": "/local", "sizeLimit": "10Gi"}
    )
    cluster["jail"]["populate"] = {"image": "registry.example.com/slurm-stack/jail:26.05-0.1.0"}
    cluster["accounting"]["external"]["passwordSecret"] = {"name": "db", "key": "password"}
    cluster["directory"] = {
        "uri": "ldaps://ldap.example.com",
        "baseDn": "dc=example,dc=com",
        "bindDn": "cn=reader,dc=example,dc=com",
        "caCertificate": CERTIFICATE,
        "loginGroups": ["ml"],
        "sshPublicKeyAttribute": "sshPublicKey",
    }
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}
    cluster["login"]["placement"]["tolerations"] = [
        {**toleration, "operator": "Equal", "value": "a"}
    ]
    cluster["workerPools"][0]["placement"]["tolerations"] = [
        toleration,
        {**toleration, "operator": "Equal", "value": "b"},
    ]
    cluster["accounting"]["placement"] = {
        "nodeSelector": {"node-role/system": "true"},
        "tolerations": [{**toleration, "operator": "Equal", "value": "db"}],
    }
    cluster["accounting"]["resources"] = {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}}
    cluster["accounting"]["embedded"] = {
        "volume": {"size": "20Gi", "storageClass": "fast-rwo"},
        "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}},
    }
    cluster["accounting"]["purge"]["archiveVolume"] = {"size": "20Gi", "storageClass": "slow"}
    cluster["healthChecks"]["nccl"].update(minBytes="512M", maxBytes="8G")
    cluster["jail"]["existingClaim"] = "shared-jail"
    cluster["jail"]["submounts"] += [
        {"type": "hostPath", "name": "models", "mountPath": "/models", "hostPath": "/mnt/models"},
        {"type": "emptyDir", "name": "tmp2", "mountPath": "/tmp2", "sizeLimit": "1Gi"},
    ]
    cluster["workerPools"][1]["submounts"] += [
        {"type": "pvc", "name": "shared", "mountPath": "/shared", "existingClaim": "shared"},
        {"type": "pvc", "name": "own", "mountPath": "/own", "size": "1Ti", "storageClass": "x"},
    ]
    cluster["networkPolicy"] = {
        "apiServerCidrs": ["10.0.0.1/32"],
        "sshSourceRanges": ["198.51.100.0/24"],
    }
    cluster["metrics"] = {
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    }
    cluster["siteScripts"] = {
        "prolog": [{"name": "mark", "content": "#!/bin/sh\n\ttrue\n"}],
        "epilog": [{"name": "unmark", "content": "#!/bin/sh\ntrue\n"}],
        "prologSlurmctld": [{"name": "log", "content": "#!/bin/sh\ntrue\n"}],
        "epilogSlurmctld": [{"name": "log", "content": "#!/bin/sh\ntrue\n"}],
        "taskProlog": {"name": "env", "content": "#!/bin/sh\ntrue\n"},
        "taskEpilog": {"name": "env", "content": "#!/bin/sh\ntrue\n"},
        "files": [{"name": "site.json", "content": '{"a": 1}'}],
        "jobSubmitLua": "function slurm_job_submit(j, p, u)\n\treturn slurm.SUCCESS\nend\n",
        "cliFilterLua": "function slurm_cli_pre_submit(options, offset)\n\treturn 0\nend\n",
    }
    cluster["restApi"] = {
        "enabled": True,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
        "placement": {
            "nodeSelector": {"pool": "services"},
            "tolerations": [
                {"key": "services", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
            ],
        },
    }
    cluster["containers"] = {
        "enabled": True,
        "cache": "jail",
        "insecureRegistries": ["registry.cluster.local:5000", "10.0.0.7"],
    }
    cluster["nodeState"] = {"enabled": True, "intervalSeconds": 15}
    cluster["externalNodes"] = {
        "addressRanges": ["192.0.2.0/24"],
        "controllerService": {
            "type": "LoadBalancer",
            "annotations": {"example.com/internal": "true"},
        },
        "pools": [
            {
                "name": "metal",
                "hosts": ["bm1"],
                "features": ["bigmem"],
                "memory": "500Gi",
                "drain": {"policy": "cancel"},
            }
        ],
    }
    cluster["topology"] = {"rootSwitch": "spine"}
    for i, pool in enumerate(cluster["workerPools"]):
        pool["switch"] = f"leaf-{i}"
    # A fixed pool: an elastic one names its switch (its nodes exist before any pod runs).
    last = next(pool for pool in reversed(cluster["workerPools"]) if "elastic" not in pool)
    del last["switch"]
    last["switchLabel"] = "network.example.com/leaf"
    last["labelFeatures"] = {"zone": "topology.kubernetes.io/zone"}
    last["sshd"] = True
    cluster["cgroups"] = {"enforce": True}
    return cluster


def load(raw: dict[str, Any]) -> ClusterSpec:
    return load_spec(raw, db_password_provided=False, ldap_password_provided=True)


def string_leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every string value in ``value``; a map key's path ends in ("<key>", key)."""
    if isinstance(value, str):
        return [path]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in string_leaves(item, (*path, i))]
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            found += string_leaves(item, (*path, key))
        return found
    return []


def shape(path: tuple[Any, ...]) -> str:
    return ".".join("[]" if isinstance(part, int) else part for part in path)


def model_string_fields(annotation: Any, path: tuple[str, ...] = ()) -> set[str]:
    """Shapes (`workerPools.[].name`) of every string field the model has."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {
            found
            for name, info in annotation.model_fields.items()
            for found in model_string_fields(info.annotation, (*path, info.alias or name))
        }
    if origin is list:
        return model_string_fields(typing.get_args(annotation)[0], (*path, "[]"))
    if origin is dict:
        return model_string_fields(typing.get_args(annotation)[-1], (*path, "*"))
    if origin in (typing.Union, types.UnionType):
        return {
            found
            for member in typing.get_args(annotation)
            for found in model_string_fields(member, path)
        }
    if annotation is str or origin is typing.Literal:
        return {".".join(path)}
    return set()


def config_shapes(config: dict[str, Any]) -> set[str]:
    shapes = set()
    for path in string_leaves(config):
        shapes.add(shape(path))
        # Values of maps: `labels.team` is the map field `labels.*`.
        shapes.add(shape((*path[:-1], "*")))
    return shapes


# Fields of a type shared with places where they are valid, that the spec refuses here.
REFUSED_HERE = {
    "jail.submounts.[].size": "a jail submount is shared: an existingClaim, not a new claim",
    "jail.submounts.[].storageClass": "as jail.submounts[].size",
}


def test_full_config_is_valid_and_sets_every_string_field() -> None:
    config = full_config()
    load(config)
    missing = sorted(model_string_fields(ClusterSpec) - config_shapes(config) - set(REFUSED_HERE))
    assert missing == [], f"set these in full_config(): {missing}"


def at(config: dict[str, Any], path: tuple[Any, ...]) -> Any:
    for part in path:
        config = config[part]
    return config


def put(config: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    at(config, path[:-1])[path[-1]] = value


def display(path: tuple[Any, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


BAD = {
    "newline": lambda s: s + "\n",
    "carriage-return": lambda s: s[:1] + "\r" + s[1:],
    "tab": lambda s: s[:1] + "\t" + s[1:],
    "nul": lambda s: s + "\x00",
    "leading-space": lambda s: " " + s,
    "trailing-space": lambda s: s + " ",
}
LEAVES = string_leaves(full_config())
SCRIPTS = ("content", "jobSubmitLua", "cliFilterLua")  # the siteScripts fields
FREE = ("newline", "tab", "leading-space", "trailing-space")  # what scripts and annotations keep


def is_annotation(path: tuple[Any, ...]) -> bool:
    """A value of an annotations map: any text, as Kubernetes takes it (spec/text.py)."""
    return len(path) >= 2 and path[-2] == "annotations"


@pytest.mark.parametrize("variant", BAD)
def test_every_string_value_refuses_control_characters_and_surrounding_space(variant: str) -> None:
    spoil = BAD[variant]
    missed = []
    for path in LEAVES:
        config = full_config()
        value = at(config, path)
        if path[-1] == "caCertificate" and variant == "newline":
            continue  # a certificate is made of lines
        if path[-1] in SCRIPTS and variant in FREE:
            continue  # a script is made of lines, indented as its author likes
        if is_annotation(path) and variant in FREE:
            continue  # an annotation's value is any text (the test below)
        put(config, path, spoil(value))
        with pytest.raises(SpecError) as raised:
            load(config)
        if not any(issue.path == display(path) for issue in raised.value.issues):
            missed.append((display(path), [str(i) for i in raised.value.issues]))
    assert missed == []


@pytest.mark.parametrize("variant", ["newline", "tab", "trailing-space"])
def test_every_map_key_refuses_control_characters_and_surrounding_space(variant: str) -> None:
    spoil = BAD[variant]
    config = full_config()
    maps = {display(path[:-1]) for path in LEAVES if isinstance(at(config, path[:-1]), dict)}
    missed = []
    for path in {path[:-1] for path in LEAVES if isinstance(at(config, path[:-1]), dict)}:
        broken = copy.deepcopy(config)
        mapping = at(broken, path)
        key = next(iter(mapping))
        mapping[spoil(key)] = mapping.pop(key)
        with pytest.raises(SpecError) as raised:
            load(broken)
        if not any(issue.path.startswith(display(path)) for issue in raised.value.issues):
            missed.append(display(path))
    assert maps and missed == []


def test_a_certificate_keeps_its_lines_but_no_other_control_character() -> None:
    config = full_config()
    load(config)
    config["directory"]["caCertificate"] = CERTIFICATE.replace("MIIB", "MI\x07IB")
    with pytest.raises(SpecError) as raised:
        load(config)
    assert [issue.path for issue in raised.value.issues] == ["directory.caCertificate"]


def test_a_trailing_newline_no_longer_passes_an_anchored_pattern() -> None:
    config = full_config()
    config["workerPools"][0]["features"] = ["ib\n"]
    with pytest.raises(SpecError) as raised:
        load(config)
    [issue] = raised.value.issues
    assert issue.path == "workerPools[0].features[0]"
    assert "control character '\\n'" in issue.message


def test_annotation_values_keep_lines_tabs_and_spaces_but_no_other_control_character() -> None:
    """Kubernetes takes any string as an annotation's value (a JSON document, a PEM bundle);
    its key, and a label's value, stay as strict as Kubernetes has them."""
    annotations = [path for path in LEAVES if is_annotation(path)]
    assert len(annotations) == 3  # annotations, login.service and externalNodes.controllerService
    for path in annotations:
        config = full_config()
        text = '{\n\t"owner": "ml",\n\t"tier": 1\n}\n'
        put(config, path, text)
        assert load(config) is not None
        for spoil in (BAD["carriage-return"], BAD["nul"]):
            put(config, path, spoil(text))
            with pytest.raises(SpecError) as raised:
                load(config)
            assert [issue.path for issue in raised.value.issues] == [display(path)]
    config = full_config()
    config["labels"] = {"team": "ml\nops"}
    with pytest.raises(SpecError) as raised:
        load(config)
    assert [issue.path for issue in raised.value.issues] == ["labels.team"]
