"""Provider stand-ins: the state each mocked resource type returns.

Outputs echo the inputs (as the real providers do for everything they do not compute) plus the
values the real providers compute, so `.apply` code downstream sees realistic data. Every
computed value derives from a hash of the resource URN: two runs of one program are identical.
Secret-ness is not decided here; the engine marks outputs secret the way the Pulumi engine does
(the request's `additionalSecretOutputs`, and any output whose input was secret).
"""

import base64
import copy
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks

from slurm_stack.offline.keys import private_key_outputs

# A documentation address (RFC 5737): never reachable, never contacted.
LOAD_BALANCER_IP = "192.0.2.10"

# Kubernetes kinds that have no namespace.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "APIService",
        "CSIDriver",
        "CSINode",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "IngressClass",
        "MutatingWebhookConfiguration",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PriorityClass",
        "RuntimeClass",
        "StorageClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)

_DEFAULT_SPECIAL = "!@#$%&*()-_=+[]{}<>:?"

Outputs = dict[str, Any]


def seed_of(urn: str) -> bytes:
    """The seed every computed value of the resource `urn` derives from."""
    return hashlib.sha256(urn.encode()).digest()


def _derived_bytes(urn: str, purpose: str, length: int) -> bytes:
    return hashlib.shake_256(f"{purpose}\0{urn}".encode()).digest(length)


def _derived_uuid(urn: str, purpose: str) -> str:
    return str(uuid.UUID(bytes=_derived_bytes(urn, purpose, 16), version=4))


def kubernetes_kind(type_: str) -> tuple[str, str] | None:
    """(apiVersion, kind) of a `kubernetes:<group>/<version>:<Kind>` token, else None."""
    parts = type_.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes" or "/" not in parts[1]:
        return None
    group, version = parts[1].split("/", 1)
    api_version = version if group in ("core", "") else f"{group}/{version}"
    return api_version, parts[2]


LoadBalancerAddress = Callable[[Mapping[str, Any]], str | None]
"""Where a stand-in cloud puts a LoadBalancer Service (given its spec); None: the default."""


def _kubernetes(
    type_: str, name: str, urn: str, inputs: Outputs, balancer: LoadBalancerAddress | None = None
) -> tuple[str, Outputs]:
    kind = (kubernetes_kind(type_) or ("", ""))[1]
    state = copy.deepcopy(inputs)
    meta = state.setdefault("metadata", {})
    # pulumi-kubernetes auto-names with the logical name and a random suffix.
    meta.setdefault("name", f"{name}-{_derived_bytes(urn, 'autoname', 4).hex()}")
    if kind not in CLUSTER_SCOPED_KINDS:
        meta.setdefault("namespace", "default")
    meta.setdefault("uid", _derived_uuid(urn, "uid"))
    if kind == "Service":
        spec = state.setdefault("spec", {})
        if "clusterIP" not in spec:
            octets = _derived_bytes(urn, "cluster-ip", 2)
            spec["clusterIP"] = f"10.96.{octets[0]}.{max(octets[1], 1)}"
        if spec.get("type") == "LoadBalancer":
            address = (balancer(spec) if balancer else None) or LOAD_BALANCER_IP
            state["status"] = {"loadBalancer": {"ingress": [{"ip": address}]}}
    namespace = meta.get("namespace")
    return (f"{namespace}/{meta['name']}" if namespace else meta["name"]), state


def _random_bytes(_: str, urn: str, inputs: Outputs) -> Outputs:
    # The provider replaces the resource, with new bytes, when its keepers change.
    keepers = inputs.get("keepers") or {}
    purpose = "bytes" + (json.dumps(keepers, sort_keys=True) if keepers else "")
    data = _derived_bytes(urn, purpose, int(inputs["length"]))
    return {"base64": base64.b64encode(data).decode(), "hex": data.hex()}


def _random_id(_: str, urn: str, inputs: Outputs) -> Outputs:
    data = _derived_bytes(urn, "id", int(inputs["byteLength"]))
    prefix = inputs.get("prefix", "")
    return {
        "b64Std": prefix + base64.b64encode(data).decode(),
        "b64Url": prefix + base64.urlsafe_b64encode(data).decode().rstrip("="),
        "dec": prefix + str(int.from_bytes(data)),
        "hex": prefix + data.hex(),
    }


def _random_text(_: str, urn: str, inputs: Outputs) -> Outputs:
    """RandomPassword / RandomString: honours the character classes and their minimums."""
    rng = random.Random(seed_of(urn))
    special = inputs.get("overrideSpecial", _DEFAULT_SPECIAL)
    classes = [
        (inputs.get("lower", True), string.ascii_lowercase, inputs.get("minLower", 0)),
        (inputs.get("upper", True), string.ascii_uppercase, inputs.get("minUpper", 0)),
        (
            inputs.get("numeric", inputs.get("number", True)),
            string.digits,
            inputs.get("minNumeric", 0),
        ),
        (inputs.get("special", True), special, inputs.get("minSpecial", 0)),
    ]
    enabled = [(chars, minimum) for on, chars, minimum in classes if on and chars]
    alphabet = "".join(chars for chars, _ in enabled)
    result = [rng.choice(chars) for chars, minimum in enabled for _ in range(int(minimum))]
    result += [rng.choice(alphabet) for _ in range(int(inputs["length"]) - len(result))]
    rng.shuffle(result)
    return {"result": "".join(result)}


def _random_uuid(_: str, urn: str, inputs: Outputs) -> Outputs:
    return {"result": _derived_uuid(urn, "uuid")}


def _random_integer(_: str, urn: str, inputs: Outputs) -> Outputs:
    low, high = int(inputs["min"]), int(inputs["max"])
    value = low + int.from_bytes(_derived_bytes(urn, "integer", 8)) % (high - low + 1)
    return {"result": value}


def _private_key(_: str, urn: str, inputs: Outputs) -> Outputs:
    curve = inputs.get("ecdsaCurve", "P224")
    bits = int(inputs.get("rsaBits", 2048))
    outputs = private_key_outputs(
        seed_of(urn), inputs["algorithm"], ecdsa_curve=curve, rsa_bits=bits
    )
    return {"ecdsaCurve": curve, "rsaBits": bits, **outputs}


_COMPUTED: dict[str, Callable[[str, str, Outputs], Outputs]] = {
    "random:index/randomBytes:RandomBytes": _random_bytes,
    "random:index/randomId:RandomId": _random_id,
    "random:index/randomPassword:RandomPassword": _random_text,
    "random:index/randomString:RandomString": _random_text,
    "random:index/randomUuid:RandomUuid": _random_uuid,
    "random:index/randomInteger:RandomInteger": _random_integer,
    "tls:index/privateKey:PrivateKey": _private_key,
}


RandomSalt = Callable[[str], str]
"""A salt for a `random:` resource's value, by URN: where the values must differ from one
deployment to the next (the sandbox's), as the random provider's do; none: derived from the
URN alone, the same on every run (goldens)."""


def mock_state(
    type_: str,
    name: str,
    urn: str,
    inputs: Outputs,
    balancer: LoadBalancerAddress | None = None,
    salt: str = "",
) -> tuple[str, Outputs]:
    """The (id, outputs) a provider would return for creating a custom resource; a
    LoadBalancer Service's address comes from ``balancer`` where it gives one; a computed
    value derives from the URN and ``salt``."""
    if kubernetes_kind(type_):
        return _kubernetes(type_, name, urn, inputs, balancer)
    state = copy.deepcopy(inputs)
    if type_ in _COMPUTED:
        state |= _COMPUTED[type_](name, f"{urn}\0{salt}" if salt else urn, inputs)
    if type_.startswith("pulumi:providers:"):
        return _derived_uuid(urn, "id"), state
    if type_ == "tls:index/privateKey:PrivateKey":
        # The tls provider's ID is the SHA-1 of the public key PEM.
        sha1 = hashlib.sha1(state["publicKeyPem"].encode(), usedforsecurity=False)
        return sha1.hexdigest(), state
    return f"{name}-{_derived_bytes(urn, 'id', 4).hex()}", state


UNREADABLE_OUTPUTS: Mapping[str, Any] = {"@unreadable": True}
"""`previous_outputs` of a backend that cannot answer readStackOutputs."""


class OfflineMocks(Mocks):
    """`pulumi.runtime.Mocks` over `mock_state`, for reads and invokes of the stock monitor.

    ``previous_outputs`` are the stack outputs of the last update, as the engine's
    `pulumi:pulumi:readStackOutputs` gives them (none: a stack that was never updated;
    `UNREADABLE_OUTPUTS`: a backend that cannot say, and the invoke fails)."""

    def __init__(self, previous_outputs: Mapping[str, Any] | None = None) -> None:
        self.unreadable = previous_outputs is UNREADABLE_OUTPUTS
        self.previous_outputs = {} if self.unreadable else dict(previous_outputs or {})

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict]:
        """Reads (`Resource.get`) have no URN here: seed from type, name and id instead."""
        seed = f"read::{args.typ}::{args.name}::{args.resource_id}"
        return mock_state(args.typ, args.name, seed, args.inputs)

    def call(self, args: MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        """A stack's outputs for readStackOutputs; other invokes return nothing."""
        if args.token == "pulumi:pulumi:readStackOutputs":
            if self.unreadable:  # the engine answers a failed invoke with its failures
                return {}, [("name", "this backend keeps no stack outputs")]
            name = args.args.get("name")
            return {"name": name, "outputs": self.previous_outputs, "secretOutputNames": []}, []
        return {}, []
