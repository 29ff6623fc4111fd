"""Constrained field types shared by the spec models, each with an error that says what is valid."""

import ipaddress
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated

from cronsim import CronSim, CronSimError
from pydantic import AfterValidator

from slurm_stack.spec.quantity import parse_quantity
from slurm_stack.spec.slurm_options import EXAMPLE, parse_line
from slurm_stack.spec.ssh_keys import ssh_key_problem

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GRES_TYPE = re.compile(r"^[A-Za-z0-9_]+$")
_SSHD_LINE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9]*)\s+(?P<value>\S.*)$")
_IMAGE_NAME = r"[a-z0-9]+([._/-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
_IMAGE_REF = re.compile(
    rf"^(?P<name>{_IMAGE_NAME})"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(@(?P<digest>[^@]*))?$"
)
_IMAGE_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_IMAGE_REGISTRY = re.compile(rf"^{_IMAGE_NAME}$")


def dns_label(value: str) -> str:
    """A Kubernetes DNS-1123 label, which is also a valid Slurm node, NodeSet and feature name."""
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS label: use 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


# Kubernetes reserves the prefix for its own namespaces (kube-system, kube-public,
# kube-node-lease): objects there share the control plane's, and its admission rules.
# `default` is taken: Kubernetes creates it for users' objects (those that name no namespace),
# and it holds nothing of the control plane's but the `kubernetes` Service, a name no object
# of slurm-stack's takes (each is `<cluster>-<part>`).
SYSTEM_NAMESPACE_PREFIX = "kube-"


def cluster_namespace(value: str) -> str:
    """The cluster's namespace: a DNS label that is not one of Kubernetes' own."""
    dns_label(value)
    if value.startswith(SYSTEM_NAMESPACE_PREFIX):
        raise ValueError(
            f"{value!r} is a Kubernetes system namespace (the prefix {SYSTEM_NAMESPACE_PREFIX!r}"
            " is reserved for them), where the cluster's pods and Secrets would sit beside the "
            "control plane's: use a namespace of the cluster's own, e.g. 'slurm'"
        )
    return value


# Kubernetes' own name rules (apimachinery pkg/util/validation: IsQualifiedName,
# IsValidLabelValue, IsDNS1123Subdomain, IsConfigMapKey), which the API server applies to
# what the spec passes through.
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def dns_subdomain(value: str) -> str:
    """A DNS-1123 subdomain, as Kubernetes names storage classes (and label key prefixes)."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS subdomain: at most 253 lowercase letters, digits, '-' and "
            "'.', each dot-separated part starting and ending with a letter or digit"
        )
    return value


def qualified_name(value: str) -> str:
    """A label, annotation or node selector key: `name` or `prefix/name`."""
    parts = value.split("/")
    if len(parts) > 2:
        raise ValueError(f"{value!r} is not a label or annotation key: at most one '/'")
    name = parts[-1]
    if len(parts) == 2:
        try:
            dns_subdomain(parts[0])
        except ValueError as error:
            raise ValueError(f"the prefix of {value!r}: {error}") from None
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        raise ValueError(
            f"{value!r} is not a label or annotation key: a name of 1-63 letters, digits, '-', "
            "'_' and '.', starting and ending with a letter or digit, optionally after a DNS "
            "prefix and '/' (example: 'example.com/team')"
        )
    return value


def label_value(value: str) -> str:
    """A label or node selector value: empty, or up to 63 characters as a key's name part."""
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        raise ValueError(
            f"{value!r} is not a label value: at most 63 letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit (or empty)"
        )
    return value


def secret_data_key(value: str) -> str:
    """A key of a Secret's data, as Kubernetes allows it."""
    if len(value) > 253 or not _CONFIG_KEY.fullmatch(value) or value in (".", ".."):
        raise ValueError(
            f"{value!r} cannot be a key of a Secret: use letters, digits, '-', '_' and '.'"
        )
    return value


MAX_CLUSTER_NAME = 30


def cluster_name(value: str) -> str:
    """A DNS label short enough that every derived object name fits 63 characters."""
    dns_label(value)
    if len(value) > MAX_CLUSTER_NAME:
        raise ValueError(
            f"{value!r} is {len(value)} characters long; use at most {MAX_CLUSTER_NAME} "
            "characters so that derived object names fit Kubernetes' 63-character limit"
        )
    return value


def quantity(value: str) -> str:
    """A Kubernetes quantity string, kept as written."""
    parse_quantity(value)
    return value


def absolute_path(value: str) -> str:
    """An absolute, normalised path other than '/' (a mount point)."""
    if not value.startswith("/") or value == "/" or "//" in value or value.endswith("/"):
        raise ValueError(f"{value!r} must be an absolute path like '/scratch' (not '/')")
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError(f"{value!r} must not contain '.' or '..' components")
    return value


# Node directories a hostPath submount may neither be, lie under, nor contain: a pod that
# mounts one can read the node's credentials or every pod's Secrets, or take over the node
# through its container runtime. Paths are compared as written: symlinks on the node
# (/var/run -> /run) cannot be resolved here, so both spellings are listed.
_NODE_DIRECTORIES = {
    "/etc": "the node's configuration (its credentials, /etc/shadow, /etc/kubernetes)",
    "/proc": "the node's process and kernel interface",
    "/sys": "the node's kernel interface",
    "/dev": "the node's devices",
    "/boot": "the node's kernel and boot loader",
    "/root": "the home of the node's root",
    "/run": "the node's runtime state, with the container runtime's sockets",
    "/var/run": "the node's runtime state, with the container runtime's sockets",
    "/var/lib/kubelet": "the kubelet's state, with every pod's Secrets",
    "/var/lib/docker": "the container runtime's storage",
    "/var/lib/containerd": "the container runtime's storage",
    "/var/lib/containers": "the container runtime's storage",
    "/var/lib/etcd": "etcd's data, the whole cluster's state and Secrets",
}


def host_directory(value: str) -> str:
    """A node directory a pod may mount: an absolute path that is not, is not under, and
    does not contain one of the node's system directories."""
    if value == "/":
        raise ValueError(
            "'/' is the node's whole filesystem: mount a directory made for the cluster, such "
            "as '/mnt/nvme/slurm-scratch'"
        )
    absolute_path(value)
    for directory, what in _NODE_DIRECTORIES.items():
        if value == directory or value.startswith(directory + "/"):
            problem = (
                f"{value!r} is {what}"
                if value == directory
                else (f"{value!r} is under {directory}, {what}")
            )
        elif directory.startswith(value + "/"):
            problem = f"{value!r} contains {directory}, {what}"
        else:
            continue
        raise ValueError(
            f"{problem}: a pod that mounts it can take over the node; mount a directory made "
            "for the cluster, such as '/mnt/nvme/slurm-scratch'"
        )
    return value


def slurm_key_value(value: str) -> str:
    """One ``Key=Value`` line for slurm.conf, a dynamic node's --conf or a partition line, as
    Slurm's parser reads it (slurm_options.parse_line). Which keys and values the chosen Slurm
    version takes, and which keys slurm-stack sets itself, the rules check
    (rules.slurm_lines)."""
    if "\n" in value:
        raise ValueError(f"{value!r} is not a single 'Key=Value' line {EXAMPLE}")
    parse_line(value)
    return value.strip()


def sshd_line(value: str) -> str:
    """One ``Keyword value`` line for sshd_config."""
    if not _SSHD_LINE.fullmatch(value.strip()) or "\n" in value:
        raise ValueError(
            f"{value!r} is not a single 'Keyword value' line (example: 'MaxSessions 20')"
        )
    return value.strip()


def gres_type(value: str) -> str:
    """A GRES type name as Slurm accepts it ("h100", "a100_80g")."""
    if not _GRES_TYPE.fullmatch(value):
        raise ValueError(f"{value!r} is not a GRES type: use letters, digits and '_' (e.g. 'h100')")
    return value


def image_ref(value: str) -> str:
    """A pinned container image reference: a tag other than 'latest', a digest, or both
    (`registry/name:tag`, `registry/name@sha256:<hex>`, `registry/name:tag@sha256:<hex>`)."""
    match = _IMAGE_REF.fullmatch(value)
    if not match:
        raise ValueError(
            f"{value!r} is not an image reference like 'registry/name:tag' or "
            "'registry/name@sha256:<64 hex digits>'"
        )
    if match["digest"] is not None and not _IMAGE_DIGEST.fullmatch(match["digest"]):
        raise ValueError(
            f"{value!r} has a malformed digest {match['digest']!r}: give 'sha256:' and 64 "
            "lowercase hex digits, as `podman image inspect --format '{{.Digest}}'` or "
            "`crane digest` print it"
        )
    if not match["digest"] and match["tag"] in (None, "latest"):
        raise ValueError(f"{value!r} is not pinned: give a version tag (not 'latest') or a digest")
    return value


def image_tag(value: str) -> str:
    """An image tag other than 'latest'."""
    if "sha256:" in value:
        raise ValueError(
            f"{value!r} is a digest, which names one image, not a tag for all of them: pin each "
            "image by digest under images.<component> (e.g. images.worker: "
            "'registry.example.com/slurm-stack/worker@sha256:<hex>')"
        )
    if not re.fullmatch(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", value) or value == "latest":
        raise ValueError(f"{value!r} is not a pinned image tag (e.g. '26.05-0.1.0', not 'latest')")
    return value


def image_registry(value: str) -> str:
    """Where the project's images live: a registry and repository path, with no tag or digest
    (`<registry>/<component>:<tag>` is built from it)."""
    if not _IMAGE_REGISTRY.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a registry path like 'registry.example.com/slurm-stack' (lowercase, "
            "no tag or digest: pin an image by digest under images.<component>)"
        )
    return value


def ssh_public_key(value: str) -> str:
    """One OpenSSH public key line that sshd can read (slurm_stack.spec.ssh_keys)."""
    if problem := ssh_key_problem(value.strip()):
        raise ValueError(problem)
    return value.strip()


def cidr(value: str) -> str:
    """An IPv4 or IPv6 network in CIDR form."""
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR range like '203.0.113.0/24'") from exc
    return value


_MESSAGE_SIZE = re.compile(r"^(?P<number>[1-9][0-9]*)(?P<unit>[KMGT]i?)?$", re.IGNORECASE)
_MESSAGE_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def message_size(value: str) -> str:
    """An all_reduce_perf message size (`-b`/`-e`): a whole number, optionally K, M, G or T,
    which all_reduce_perf reads as powers of 1024 (not a Kubernetes quantity)."""
    if not _MESSAGE_SIZE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an all_reduce_perf message size: a whole number with an optional "
            "K, M, G or T suffix (powers of 1024), e.g. '512M' or '8G'"
        )
    return value


def message_size_bytes(value: str) -> int:
    """The bytes of a :func:`message_size`."""
    match = _MESSAGE_SIZE.fullmatch(value)
    assert match is not None, value
    return int(match["number"]) * _MESSAGE_SIZE_UNITS[(match["unit"] or "")[:1].lower()]


# A CronJob's schedule is parsed by robfig/cron v3's ParseStandard: five fields (minute,
# hour, day of month, month, day of week 0-6, `?` meaning `*` in the day fields; three-letter
# month and day names) or a descriptor. It has no `L`, `W` or `#`, which cronsim accepts.
_CRON_DESCRIPTORS = (
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
)
_GO_DURATION = re.compile(r"([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+")
_CRON_NAMES = re.compile(
    r"JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT"
)


def cron_schedule(value: str) -> str:
    """A CronJob schedule as Kubernetes takes it: five fields or an `@` descriptor."""
    example = "five fields such as '0 3 * * 0', or @daily, @weekly, @every 6h"
    if value.startswith("@"):
        every = value.removeprefix("@every ")
        if value in _CRON_DESCRIPTORS or (every != value and _GO_DURATION.fullmatch(every)):
            return value
        raise ValueError(f"{value!r} is not a cron descriptor: use {example}")
    fields = value.split()
    if len(fields) != 5:
        raise ValueError(f"{value!r} is not a five-field cron schedule: use {example}")
    for field_text in fields:
        if re.search("[A-Z#]", _CRON_NAMES.sub("", field_text.upper())):
            raise ValueError(
                f"{value!r}: {field_text!r} uses L, W or '#', which Kubernetes' cron does not "
                f"know: use {example}"
            )
    if any(int(n) > 6 for n in re.findall(r"[0-9]+", fields[4].split("/")[0])):
        raise ValueError(f"{value!r}: days of the week are 0-6 (Sunday is 0) in Kubernetes' cron")
    try:
        CronSim(" ".join(f.replace("?", "*") for f in fields), datetime(2000, 1, 1))
    except CronSimError as error:
        raise ValueError(
            f"{value!r} is not a valid cron schedule ({error}): use {example}"
        ) from None
    return value


def partition_option(value: str) -> str:
    """A `Key=Value` option of a partition's line; the keys the line already carries are
    refused by rules.slurm_lines, with the version's other partition options."""
    return slurm_key_value(value)


def key_of(line: str) -> str:
    """The key of a 'Key=Value' or 'Keyword value' line."""
    return re.split(r"[=\s]", line.strip(), maxsplit=1)[0]


def setting_value(lines: Iterable[str], key: str) -> str | None:
    """The value of the first 'Key=Value' line of ``key`` (any case) among ``lines``; None
    when no line sets it."""
    for line in lines:
        if key_of(line).lower() == key.lower():
            return line.split("=", 1)[1].strip() if "=" in line else ""
    return None


DnsLabel = Annotated[str, AfterValidator(dns_label)]
ClusterNamespace = Annotated[str, AfterValidator(cluster_namespace)]
ClusterName = Annotated[str, AfterValidator(cluster_name)]
Quantity = Annotated[str, AfterValidator(quantity)]
AbsolutePath = Annotated[str, AfterValidator(absolute_path)]
HostDirectory = Annotated[str, AfterValidator(host_directory)]
SlurmKeyValue = Annotated[str, AfterValidator(slurm_key_value)]
PartitionOption = Annotated[str, AfterValidator(partition_option)]
SshdLine = Annotated[str, AfterValidator(sshd_line)]
GresType = Annotated[str, AfterValidator(gres_type)]
ImageRef = Annotated[str, AfterValidator(image_ref)]
ImageTag = Annotated[str, AfterValidator(image_tag)]
ImageRegistry = Annotated[str, AfterValidator(image_registry)]
SshPublicKey = Annotated[str, AfterValidator(ssh_public_key)]
Cidr = Annotated[str, AfterValidator(cidr)]
DnsSubdomain = Annotated[str, AfterValidator(dns_subdomain)]
QualifiedName = Annotated[str, AfterValidator(qualified_name)]
SecretDataKey = Annotated[str, AfterValidator(secret_data_key)]
CronSchedule = Annotated[str, AfterValidator(cron_schedule)]
MessageSize = Annotated[str, AfterValidator(message_size)]
