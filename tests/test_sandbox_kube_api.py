"""The sandbox's stand-in Kubernetes nodes: what a test or `sandbox kube-node` sets is what
the stand-in API lists, in the shape of a real NodeList."""

from pathlib import Path

import pytest

from slurm_stack.cli import _node_labels
from slurm_stack.sandbox.kube_api import SandboxKubeApi
from slurm_stack.sandbox.kube_api_server import node_list


def stand_in(tmp_path: Path) -> SandboxKubeApi:
    api = SandboxKubeApi("t", "t-net", "10.89.0.0/24", tmp_path, None)  # type: ignore[arg-type]
    api.dir.mkdir(parents=True, exist_ok=True)
    api._write_nodes({"node-a": {"unschedulable": False, "ready": True}})
    return api


def test_labels_are_set_removed_and_listed_like_a_node_lists_them(tmp_path: Path) -> None:
    api = stand_in(tmp_path)
    api.set_node("node-a", labels={"example.com/leaf": "leaf-a", "zone": "z1"})
    api.set_node("node-a", labels={"zone": None}, unschedulable=True)
    [item] = node_list(api.nodes())["items"]
    assert item["metadata"] == {"name": "node-a", "labels": {"example.com/leaf": "leaf-a"}}
    assert item["spec"] == {"unschedulable": True}
    with pytest.raises(KeyError, match="no stand-in node node-b"):
        api.set_node("node-b", ready=False)


def test_kube_node_labels_read_like_kubectl_label() -> None:
    assert _node_labels(["a=1", "example.com/b=", "c-"]) == {
        "a": "1",
        "example.com/b": "",
        "c": None,
    }
    with pytest.raises(KeyError, match="want KEY=VALUE"):
        _node_labels(["a"])
