"""The node-state controller's Deployment as rendered: what it reads and how it is kept alive."""

import pytest

from slurm_stack.k8s.node_state import HEARTBEAT_FILE, node_state_deployment, worker_selector
from slurm_stack.spec import load_spec
from tests.test_render import dev_raw


@pytest.mark.parametrize(("interval", "stale"), [(10, 60), (30, 90)])
def test_the_controller_reads_the_api_and_is_restarted_when_its_loop_stops(
    interval: int, stale: int
) -> None:
    raw = dev_raw()
    raw["nodeState"] = {"enabled": True, "intervalSeconds": interval}
    spec = load_spec(raw)
    deployment = node_state_deployment(spec, "config")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two at once
    [controller] = pod["containers"]
    assert controller["command"][-1] == "node-state"
    settings = {e["name"]: e["value"] for e in controller["env"]}
    assert settings["NODE_STATE_NAMESPACE"] == spec.namespace
    assert settings["NODE_STATE_INTERVAL_SECONDS"] == str(interval)
    assert settings["NODE_STATE_POD_SELECTOR"] == worker_selector(spec)
    assert "app.kubernetes.io/component=worker" in worker_selector(spec).split(",")
    assert f"app.kubernetes.io/instance={spec.name}" in worker_selector(spec).split(",")
    assert controller["readinessProbe"]["exec"]["command"] == ["test", "-e", HEARTBEAT_FILE]
    liveness = controller["livenessProbe"]["exec"]["command"][-1]
    assert HEARTBEAT_FILE in liveness and liveness.endswith(f"-lt {stale}")
