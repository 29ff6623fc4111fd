"""What the program creates for hosts outside Kubernetes (tests/cluster/Pulumi.hybrid.yaml),
under the mock engine: the Services in front of slurmctld, the outputs a host joins from, the
NodeSet and partitions of an outside pool, and the join script. Its behaviour on real Slurm
is tests/cluster/test_hybrid.py's."""

import base64
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_stack.offline import ProgramRun, manifests, run_program
from slurm_stack.program import run
from slurm_stack.render import slurm_config_files
from slurm_stack.render.join_script import JoinError, render_join_script
from slurm_stack.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
STACK = ROOT / "tests" / "cluster" / "Pulumi.hybrid.yaml"
CLUSTER: dict[str, Any] = yaml.safe_load(STACK.read_text())["config"]["slurm-stack:cluster"]


def program_run(change=lambda c: None) -> ProgramRun:  # type: ignore[no-untyped-def]
    cluster = copy.deepcopy(CLUSTER)
    change(cluster)
    return run_program(run, config={"slurm-stack:cluster": json.dumps(cluster)})


@pytest.fixture(scope="module")
def hybrid() -> ProgramRun:
    return program_run()


def outside_services(result: ProgramRun) -> list[dict[str, Any]]:
    return [
        d
        for d in manifests(result.resources)
        if d["kind"] == "Service" and d["metadata"]["name"].endswith("-outside")
    ]


def test_one_load_balancer_per_controller_admits_only_the_outside_ranges(
    hybrid: ProgramRun,
) -> None:
    (service,) = outside_services(hybrid)
    assert service["metadata"]["name"] == "hybrid-controller-0-outside"
    assert service["spec"] == {
        "type": "LoadBalancer",
        "selector": {"statefulset.kubernetes.io/pod-name": "hybrid-controller-0"},
        "ports": [{"name": "slurmctld", "port": 6817, "targetPort": 6817, "protocol": "TCP"}],
        "externalTrafficPolicy": "Local",
        "loadBalancerSourceRanges": ["10.89.65.240/28"],
    }


def test_a_backup_controller_gets_a_load_balancer_of_its_own() -> None:
    def backup(cluster: dict[str, Any]) -> None:
        cluster["controller"].update(replicas=2, stateVolume={"size": "1Gi", "storageClass": "nfs"})

    result = program_run(backup)
    assert [s["spec"]["selector"] for s in outside_services(result)] == [
        {"statefulset.kubernetes.io/pod-name": "hybrid-controller-0"},
        {"statefulset.kubernetes.io/pod-name": "hybrid-controller-1"},
    ]
    hosts = [c["slurmctldHost"] for c in result.outputs["outsideControllers"]]
    assert hosts == ["hybrid-controller-0", "hybrid-controller-1"]


def test_the_outputs_say_how_to_join_and_the_key_is_a_secret(hybrid: ProgramRun) -> None:
    assert hybrid.outputs["outsideControllers"] == [
        {
            "slurmctldHost": "hybrid-controller-0",
            "inClusterAddress": "hybrid-controller.slurm-hybrid.svc",
            "address": "192.0.2.10",  # the mock engine's load balancer
        }
    ]
    assert hybrid.secret_outputs == {"outsideNodesAuthKey"}
    key = base64.b64decode(hybrid.outputs["outsideNodesAuthKey"])
    secret = next(
        d
        for d in manifests(hybrid.resources)
        if d["kind"] == "Secret" and "munge.key" in d.get("data", {})
    )
    assert base64.b64decode(secret["data"]["munge.key"]) == key


def test_without_outside_nodes_there_is_no_service_and_no_output() -> None:
    result = program_run(lambda c: c.pop("externalNodes"))
    assert not outside_services(result)
    assert not {"outsideControllers", "outsideNodesAuthKey"} & set(result.outputs)


def test_an_outside_pool_is_a_nodeset_in_the_default_partition_and_one_it_is_named_in() -> None:
    spec = load_spec(CLUSTER)
    conf = slurm_config_files(spec)["slurm.conf"]
    assert "NodeSet=metal Feature=metal" in conf.splitlines()
    assert any(line.startswith("PartitionName=main Nodes=cpu,metal ") for line in conf.splitlines())
    named = copy.deepcopy(CLUSTER)
    named["partitions"] = [
        {"name": "metal", "pools": ["metal"]},
        {"name": "pods", "pools": ["cpu"]},
    ]
    lines = slurm_config_files(load_spec(named))["slurm.conf"].splitlines()
    assert any(line.startswith("PartitionName=metal Nodes=metal Default=YES") for line in lines)


def test_declared_cpus_and_memory_give_the_partitions_default_memory_per_cpu() -> None:
    declared = copy.deepcopy(CLUSTER)
    declared["externalNodes"]["pools"][0].update(cpus=4, memory="8Gi")
    declared["partitions"] = [{"name": "metal", "pools": ["metal"]}]
    conf = slurm_config_files(load_spec(declared))["slurm.conf"]
    assert (
        "PartitionName=metal Nodes=metal Default=YES MaxTime=UNLIMITED State=UP DefMemPerCPU=2048"
        in conf
    )
    # Unknown until the host registers: no default from the stack.
    assert "DefMemPerCPU" not in slurm_config_files(load_spec(CLUSTER))["slurm.conf"]


OUTPUTS = {
    "outsideControllers": [
        {
            "slurmctldHost": "hybrid-controller-0",
            "inClusterAddress": "hybrid-controller.slurm-hybrid.svc",
            "address": "198.51.100.4",
        }
    ],
    "outsideNodesAuthKey": base64.b64encode(b"k" * 1024).decode(),
}


def test_the_join_script_carries_the_pool_the_controllers_and_the_users() -> None:
    script = render_join_script(load_spec(CLUSTER), "metal", OUTPUTS, None)
    assert "198.51.100.4 hybrid-controller.slurm-hybrid.svc # slurm-stack hybrid" in script
    assert "--conf-server hybrid-controller.slurm-hybrid.svc:6817" in script
    assert "--conf 'Feature=metal,bigmem Weight=1 CPUs=1'" in script
    assert 'case " bm1 bm2 " in' in script
    assert "useradd --uid 2000 --gid 2000 --create-home --home-dir /home/sandbox" in script
    assert "install -o munge -g munge -m 0400" in script
    # The key is never in a script made without --show-secrets.
    assert OUTPUTS["outsideNodesAuthKey"] not in script
    assert "SLURM_STACK_AUTH_KEY_FILE" in script
    with_key = render_join_script(
        load_spec(CLUSTER), "metal", OUTPUTS, OUTPUTS["outsideNodesAuthKey"]
    )
    assert OUTPUTS["outsideNodesAuthKey"] in with_key
    assert subprocess.run(["sh", "-n"], input=with_key, text=True).returncode == 0


def test_auth_slurm_puts_slurm_key_where_slurm_wants_it() -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["auth"] = "slurm"
    script = render_join_script(load_spec(cluster), "metal", OUTPUTS, None)
    assert 'install -o slurm -g slurm -m 0600 "$key" /etc/slurm/slurm.key' in script
    assert "munged" not in script


def test_the_stop_hook_carries_the_pools_drain_policy() -> None:
    script = render_join_script(load_spec(CLUSTER), "metal", OUTPUTS, None)
    assert "ExecStop=/usr/lib/slurm-stack/leave \\${SLURMD_NODE} requeue 0" in script
    waiting = copy.deepcopy(CLUSTER)
    waiting["externalNodes"]["pools"][0]["drain"] = {"policy": "wait"}
    script = render_join_script(load_spec(waiting), "metal", OUTPUTS, None)
    assert "ExecStop=/usr/lib/slurm-stack/leave \\${SLURMD_NODE} wait\n" in script
    assert "TimeoutStopSec=infinity" in script


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({}, "the stack's outputs have no outsideControllers"),
        (
            {"outsideControllers": [{**OUTPUTS["outsideControllers"][0], "address": ""}]},
            "the load balancer of hybrid-controller-0 has no address yet",
        ),
    ],
)  # fmt: skip
def test_missing_join_material_is_named(outputs: dict[str, Any], message: str) -> None:
    with pytest.raises(JoinError, match=message):
        render_join_script(load_spec(CLUSTER), "metal", outputs, None)


def test_the_cli_prints_the_script_and_refuses_a_key_it_was_not_given(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({**OUTPUTS, "outsideNodesAuthKey": "[secret]"}))
    base = [sys.executable, "-m", "slurm_stack", "join-script", "--config", str(STACK),
            "--project-dir", str(ROOT), "--outputs", str(outputs)]  # fmt: skip
    printed = subprocess.run(base, capture_output=True, text=True, cwd=ROOT)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith("#!/bin/sh\n")
    refused = subprocess.run([*base, "--show-secrets"], capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2
    assert "pulumi stack output --json --show-secrets" in refused.stderr
    unknown = subprocess.run([*base, "--pool", "gpu"], capture_output=True, text=True, cwd=ROOT)
    assert (
        unknown.returncode == 2 and "no outside pool 'gpu'; outside pools: metal" in unknown.stderr
    )


def test_the_declared_hosts_reach_the_config_jobs_sync() -> None:
    files = slurm_config_files(load_spec(CLUSTER))
    assert json.loads(files["outside.json"]) == {"hosts": ["bm1", "bm2"]}
    without = copy.deepcopy(CLUSTER)
    without.pop("externalNodes")
    assert "outside.json" not in slurm_config_files(load_spec(without))


def test_the_cli_names_the_stack_file_of_a_bad_config(tmp_path: Path) -> None:
    document = yaml.safe_load(STACK.read_text())
    document["config"]["slurm-stack:cluster"]["externalNodes"]["addressRanges"] = []
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(yaml.safe_dump(document))
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    refused = subprocess.run(
        [sys.executable, "-m", "slurm_stack", "join-script", "--config", str(stack),
         "--project-dir", str(ROOT), "--outputs", str(outputs)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert refused.returncode == 2
    assert f"error: {stack}: invalid stack config" in refused.stderr
    assert "slurm-stack:cluster.externalNodes.addressRanges" in refused.stderr


def test_systemd_reads_the_slurmd_drop_in_without_a_word(tmp_path: Path) -> None:
    """The drop-in under systemd (the sandbox's host runs none): systemd-analyze verify reads
    it over a unit shaped like Debian's slurmd.service, and says nothing (an unknown or
    misspelt key is only a warning there). The commands are swapped for /bin/true, which
    exists here; systemd runs ExecStop before it signals the service (systemd.service(5))."""
    import shutil

    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    script = render_join_script(load_spec(CLUSTER), "metal", OUTPUTS, None)
    drop_in = script.split("<<SLURM_STACK_UNIT\n", 1)[1].split("\nSLURM_STACK_UNIT", 1)[0]
    assert "ExecStop=/usr/lib/slurm-stack/leave" in drop_in
    drop_in = drop_in.replace("\\$", "$")
    for command in ("/usr/sbin/slurmd", "/usr/lib/slurm-stack/leave"):
        drop_in = drop_in.replace(command, "/bin/true")
    units = tmp_path
    (units / "slurmd.service.d").mkdir()
    (units / "slurmd.service.d" / "slurm-stack.conf").write_text(drop_in + "\n")
    (units / "slurmd.service").write_text(
        "[Unit]\nDescription=Slurm node daemon\nConditionPathExists=/etc/slurm/slurm.conf\n"
        "[Service]\nType=notify\nEnvironmentFile=-/etc/default/slurmd\n"
        "ExecStart=/bin/true -D -s $SLURMD_OPTIONS\n[Install]\nWantedBy=multi-user.target\n"
    )
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(units / "slurmd.service")],
        capture_output=True, text=True, env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units}:"},
    )  # fmt: skip
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr
