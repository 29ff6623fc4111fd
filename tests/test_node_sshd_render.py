"""sshd on nodes (workerPools[].sshd) as the program renders it: which pools run it, with what
config, keys and Slurm settings, and what login pods get to reach them. tests/cluster/
test_cgroups.py boots it on real Slurm."""

import json
from typing import Any

import pytest
import yaml

from slurm_stack import naming, paths
from slurm_stack.offline import ProgramRun, run_program
from slurm_stack.program import run
from slurm_stack.render.services import render_node_ssh_config
from slurm_stack.render.slurm import render_slurm_conf
from slurm_stack.spec import load_spec
from tests.conftest import DEV_STACK
from tests.helpers import by_content, by_name, containers, kube


def sshd_raw() -> dict[str, Any]:
    """The dev stack with cgroup enforcement, sshd on pool `cpu` and a second pool without."""
    raw = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    raw["cgroups"] = {"enforce": True}
    raw["workerPools"][0]["sshd"] = True
    raw["workerPools"].append({"name": "cpu-big", "replicas": 1, "sshd": True})
    raw["workerPools"].append({"name": "plain", "replicas": 1})
    return raw


@pytest.fixture(scope="module")
def sshd_run() -> ProgramRun:
    return run_program(run, config={"slurm-stack:cluster": json.dumps(sshd_raw())})


def pod_spec(run_: ProgramRun, name: str) -> dict[str, Any]:
    return by_name(run_, "apps/v1:StatefulSet", name).inputs["spec"]["template"]["spec"]


def test_only_pools_with_sshd_run_it_with_their_config_and_the_nodes_keys(
    sshd_run: ProgramRun,
) -> None:
    config = by_content(sshd_run, "kubernetes:core/v1:ConfigMap", "dev-node-sshd-config")
    sshd_config = config.inputs["data"]["node_sshd_config"]
    assert "UsePAM yes" in sshd_config.splitlines()
    assert f"ChrootDirectory {paths.JAIL_DIR}" in sshd_config.splitlines()
    for pool in ("dev-cpu", "dev-cpu-big"):
        slurmd = containers(by_name(sshd_run, "apps/v1:StatefulSet", pool))["slurmd"]
        settings = {e["name"]: e.get("value") for e in slurmd["env"]}
        assert settings["NODE_SSHD_CONFIG"] == f"{paths.SSHD_CONFIG_DIR}/sshd_config"
        assert {"name": "ssh", "containerPort": 22} in slurmd["ports"]
        volumes = {v["name"]: v for v in pod_spec(sshd_run, pool)["volumes"]}
        assert volumes["sshd-config"]["configMap"]["name"] == config.inputs["metadata"]["name"]
        keys = volumes["host-keys"]["secret"]
        assert keys == {"secretName": "dev-node-ssh-host-keys", "defaultMode": 0o400}
    plain = containers(by_name(sshd_run, "apps/v1:StatefulSet", "dev-plain"))["slurmd"]
    assert "NODE_SSHD_CONFIG" not in {e["name"] for e in plain["env"]}
    assert "host-keys" not in {v["name"] for v in pod_spec(sshd_run, "dev-plain")["volumes"]}


def test_login_pods_get_the_nodes_public_keys_and_never_their_private_ones(
    sshd_run: ProgramRun,
) -> None:
    login = pod_spec(sshd_run, "dev-login")
    volumes = {v["name"]: v for v in login["volumes"]}
    items = volumes["node-host-keys"]["secret"]["items"]
    assert volumes["node-host-keys"]["secret"]["secretName"] == "dev-node-ssh-host-keys"
    assert items and all(item["key"].endswith(".pub") for item in items)
    assert volumes["host-keys"]["secret"]["secretName"] == "dev-ssh-host-keys"
    secrets = {s.inputs["metadata"]["name"]: s for s in kube(sshd_run, "core/v1:Secret")}
    node_keys, login_keys = secrets["dev-node-ssh-host-keys"], secrets["dev-ssh-host-keys"]
    assert "stringData" in node_keys.secret_inputs
    node_private = node_keys.inputs["stringData"]["ssh_host_ed25519_key"]
    assert node_private != login_keys.inputs["stringData"]["ssh_host_ed25519_key"]
    sshd = containers(by_name(sshd_run, "apps/v1:StatefulSet", "dev-login"))["sshd"]
    settings = {e["name"]: e.get("value") for e in sshd["env"]}
    assert settings["NODE_SSH_CONFIG_TARGET"] == paths.NODE_SSH_CONFIG_IN_JAIL
    assert settings["NODE_KNOWN_HOSTS_TARGET"] == paths.NODE_KNOWN_HOSTS_IN_JAIL
    assert settings["NODE_HOST_KEY_ALIAS"] == "dev-nodes"


def test_sessions_reach_each_pools_nodes_by_their_dns_names_longest_pool_first() -> None:
    spec = load_spec(sshd_raw())
    text = render_node_ssh_config(spec)
    hosts = [line.split()[1] for line in text.splitlines() if line.startswith("Host ")]
    assert hosts == ["dev-cpu-big-*", "dev-cpu-*"]  # pool `plain` runs no sshd
    assert "Host dev-cpu-* !*.*" in text.splitlines()
    service = naming.pool_name(spec.name, "cpu")
    assert f"    HostName %h.{service}.{spec.namespace}.svc" in text.splitlines()
    assert f"    GlobalKnownHostsFile {paths.NODE_KNOWN_HOSTS_IN_JAIL}" in text.splitlines()


def test_jobs_get_an_extern_step_only_where_a_pool_runs_sshd() -> None:
    with_sshd = render_slurm_conf(load_spec(sshd_raw())).splitlines()
    assert "PrologFlags=Contain" in with_sshd
    assert "ProctrackType=proctrack/cgroup" in with_sshd
    raw = sshd_raw()
    for pool in raw["workerPools"]:
        pool.pop("sshd", None)
    assert not any(
        line.startswith("PrologFlags") for line in render_slurm_conf(load_spec(raw)).splitlines()
    )


def test_a_stack_without_node_sshd_renders_none_of_it() -> None:
    dev = run_program(
        run,
        config={
            "slurm-stack:cluster": json.dumps(
                yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
            )
        },
    )
    names = {r.inputs["metadata"]["name"] for r in kube(dev, "core/v1:Secret")}
    assert "dev-node-ssh-host-keys" not in names
    login = containers(by_name(dev, "apps/v1:StatefulSet", "dev-login"))["sshd"]
    assert not any(e["name"].startswith("NODE_") for e in login["env"])
