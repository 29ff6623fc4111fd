"""The login Service: how SSH reaches the login pods, and what they see of the client."""

import copy
from typing import Any

import pytest

from slurm_stack.k8s.login import login_service
from slurm_stack.spec import load_spec

MINIMAL: dict[str, Any] = {
    "name": "mini",
    "jail": {"storageClass": "nfs"},
    "workerPools": [{"name": "cpu"}],
}


def _service(**service: Any) -> dict[str, Any]:
    raw = copy.deepcopy(MINIMAL)
    raw["login"] = {"service": service}
    return login_service(load_spec(raw))["spec"]


@pytest.mark.parametrize(
    "service",
    [
        {},  # LoadBalancer by default
        {"type": "LoadBalancer", "loadBalancerSourceRanges": ["198.51.100.0/24"]},
        {"type": "NodePort", "nodePort": 30022},
    ],
    ids=["load-balancer-default", "load-balancer-with-ranges", "node-port"],
)
def test_external_services_keep_the_client_address(service: dict[str, Any]) -> None:
    # Local: no hop to another node, so source ranges, NetworkPolicies and sshd's logs see the
    # client's address instead of a node's.
    assert _service(**service)["externalTrafficPolicy"] == "Local"


def test_cluster_ip_service_has_no_external_traffic_policy() -> None:
    # The API server refuses the field on a Service that is not reachable from outside.
    assert "externalTrafficPolicy" not in _service(type="ClusterIP")
