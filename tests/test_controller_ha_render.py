"""A backup controller (`controller.replicas: 2`): what is rendered for it, and that one
controller renders as before. The failover itself is booted in tests/cluster/test_controller_ha.py;
what only a real cluster shows (a ReadWriteMany class, pod DNS, anti-affinity) is pinned here."""

from typing import Any

from slurm_stack.k8s.common import conf_server
from slurm_stack.k8s.controller import (
    controller_pods_service,
    controller_statefulset,
    state_pvc,
)
from slurm_stack.render import slurm_config_files
from slurm_stack.spec import load_spec


def _raw(**controller: Any) -> dict[str, Any]:
    return {
        "name": "ha",
        "namespace": "slurm-ha",
        "jail": {"storageClass": "cephfs"},
        "workerPools": [{"name": "cpu", "replicas": 2}],
        "controller": {"stateVolume": {"size": "5Gi", "storageClass": "cephfs"}, **controller},
    }


def _conf_lines(spec: Any) -> list[str]:
    return slurm_config_files(spec)["slurm.conf"].splitlines()


def test_both_controllers_are_listed_in_order_by_their_pods_names() -> None:
    spec = load_spec(_raw(replicas=2, takeoverAfterSeconds=30))
    hosts = [line for line in _conf_lines(spec) if line.startswith("SlurmctldHost=")]
    assert hosts == [
        "SlurmctldHost=ha-controller-0(ha-controller-0.ha-controller-pods.slurm-ha.svc)",
        "SlurmctldHost=ha-controller-1(ha-controller-1.ha-controller-pods.slurm-ha.svc)",
    ]
    assert "SlurmctldTimeout=30" in _conf_lines(spec)
    # Workers and login pods fetch the config from whichever answers, primary first.
    assert conf_server(spec) == (
        "ha-controller-0.ha-controller-pods.slurm-ha.svc:6817,"
        "ha-controller-1.ha-controller-pods.slurm-ha.svc:6817"
    )


def test_the_pods_share_a_read_write_many_state_claim_and_are_named_by_a_headless_service() -> None:
    spec = load_spec(_raw(replicas=2))
    assert state_pvc(spec)["spec"]["accessModes"] == ["ReadWriteMany"]
    assert state_pvc(spec)["spec"]["storageClassName"] == "cephfs"
    service = controller_pods_service(spec)
    assert service["metadata"]["name"] == "ha-controller-pods"
    assert service["spec"]["clusterIP"] == "None"
    # The primary must be found by name while it starts, before it is ready.
    assert service["spec"]["publishNotReadyAddresses"] is True
    statefulset = controller_statefulset(spec, "abc")["spec"]
    assert statefulset["replicas"] == 2
    assert statefulset["serviceName"] == "ha-controller-pods"
    claims = [v for v in statefulset["template"]["spec"]["volumes"] if v["name"] == "state"]
    assert claims == [
        {"name": "state", "persistentVolumeClaim": {"claimName": "ha-controller-state"}}
    ]
    anti = statefulset["template"]["spec"]["affinity"]["podAntiAffinity"]
    [term] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_one_controller_renders_as_before() -> None:
    spec = load_spec(_raw())
    hosts = [line for line in _conf_lines(spec) if line.startswith("SlurmctldHost=")]
    assert hosts == ["SlurmctldHost=ha-controller-0(ha-controller.slurm-ha.svc)"]
    assert not any(line.startswith("SlurmctldTimeout") for line in _conf_lines(spec))
    assert conf_server(spec) == "ha-controller.slurm-ha.svc:6817"
    assert state_pvc(spec)["spec"]["accessModes"] == ["ReadWriteOnce"]
    statefulset = controller_statefulset(spec, "abc")["spec"]
    assert (statefulset["replicas"], statefulset["serviceName"]) == (1, "ha-controller")
    assert "affinity" not in statefulset["template"]["spec"]


def test_the_liveness_probe_asks_for_this_pods_own_slurmctld() -> None:
    from tests.conftest import ROOT

    entrypoint = (ROOT / "images" / "base" / "entrypoint").read_text()
    probe = next(
        line for line in entrypoint.splitlines() if line.startswith("role_probe_slurmctld")
    )
    assert 'grep -qF " at $(hostname) is UP"' in probe


def _liveness(raw: dict[str, Any]) -> dict[str, Any]:
    container = controller_statefulset(load_spec(raw), "abc")["spec"]["template"]["spec"][
        "containers"
    ][0]
    probe: dict[str, Any] = container["livenessProbe"]
    return probe


def _liveness_timeout(raw: dict[str, Any]) -> int:
    return int(_liveness(raw)["timeoutSeconds"])


def test_the_liveness_probe_waits_for_every_controllers_ping() -> None:
    """`scontrol ping` asks each controller in turn, each for up to MessageTimeout (10 s by
    default): a frozen peer must not fail the probe of the controller that serves."""
    assert _liveness_timeout(_raw()) == 15
    assert _liveness_timeout(_raw(replicas=2, takeoverAfterSeconds=30)) == 25
    slower = _raw(replicas=2, takeoverAfterSeconds=30, slurmConfExtra=["MessageTimeout=20"])
    assert _liveness_timeout(slower) == 45
    # A controller that does not answer is restarted after four failures, 30 s apart.
    assert (_liveness(slower)["periodSeconds"], _liveness(slower)["failureThreshold"]) == (30, 4)
