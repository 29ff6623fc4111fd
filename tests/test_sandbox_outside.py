"""Machines outside the cluster beside a sandbox (slurm_stack/sandbox/outside.py): their podman
arguments, names and addresses, and that `sandbox down` removes them after the pods (pure: a
recording podman runs nothing)."""

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from slurm_stack.sandbox.apply import Applier, network_name
from slurm_stack.sandbox.outside import (
    OUTSIDE_LABEL,
    OutsideMachines,
    outside_container,
    remove_outside_machines,
    run_args,
)
from slurm_stack.sandbox.podman import SANDBOX_LABEL, Podman, mac_address
from slurm_stack.sandbox.state import SandboxState

SUBNET = "10.89.7.0/24"


class RecordingPodman(Podman):
    """Lists ``containers`` for label queries, has no pods, and records every command."""

    def __init__(self, containers: Sequence[dict[str, object]] = ()) -> None:
        super().__init__()
        self.containers = list(containers)
        self.commands: list[list[str]] = []

    def labelled(self, kind: str, label: str) -> list[dict[str, object]]:
        if kind == "pod":
            return []
        key, _, value = label.partition("=")
        return [
            e
            for e in self.containers
            if key in e["Labels"] and (not value or e["Labels"][key] == value)  # type: ignore[operator,index]
        ]

    def run(self, args: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(args))
        return subprocess.CompletedProcess(list(args), 0, "", "")


def container(name: str, sandbox: str, outside: str | None) -> dict[str, object]:
    """One container as `podman ps --all --format json` lists it, trimmed."""
    labels = {SANDBOX_LABEL: sandbox, **({OUTSIDE_LABEL: outside} if outside else {})}
    return {"Names": [name], "Labels": labels}


def test_an_outside_machine_runs_on_the_sandboxs_network_at_its_fixed_address() -> None:
    args = run_args(
        "extdb",
        "db",
        "localhost/slurm-stack/mariadb:26.05-0.1.0",
        network="slurm-stack-extdb",
        address="10.89.7.240",
        command=["mariadbd", "--port=3306"],
        podman_args=["--volume", "/data:/var/lib/mysql"],
    )
    assert args[:2] == ["run", "--detach"]
    assert args[args.index("--name") + 1] == outside_container("extdb", "db") == "extdb-outside-db"
    assert args[args.index("--network") + 1] == "slurm-stack-extdb"
    assert args[args.index("--ip") + 1] == "10.89.7.240"
    assert args[args.index("--mac-address") + 1] == mac_address("10.89.7.240")
    assert f"{SANDBOX_LABEL}=extdb" in args and f"{OUTSIDE_LABEL}=db" in args
    # Podman's own options before the image, the command after it.
    image = args.index("localhost/slurm-stack/mariadb:26.05-0.1.0")
    assert args.index("--volume") < image
    assert args[image + 1 :] == ["mariadbd", "--port=3306"]


@pytest.mark.parametrize("name", ["", "DB", "db_1", "-db", "db-", "a" * 41, "db/x"])
def test_an_outside_machine_needs_a_name_a_container_name_can_hold(name: str) -> None:
    with pytest.raises(ValueError, match="outside machine"):
        run_args("extdb", name, "image", network="n", address="10.89.7.240")


def test_start_replaces_a_machine_of_that_name_and_makes_the_network(tmp_path: Path) -> None:
    podman = RecordingPodman()
    podman.exists = lambda kind, name: False  # type: ignore[method-assign]
    outside = OutsideMachines("extdb", "slurm-stack-extdb", SUBNET, tmp_path, podman)
    assert outside.start("db", "image", slot=2) == "10.89.7.242"
    network, removed, started = podman.commands
    assert network[:2] == ["network", "create"] and network[-1] == "slurm-stack-extdb"
    assert removed == ["rm", "--force", "--time", "0", "extdb-outside-db"]
    assert started[0] == "run" and started[started.index("--ip") + 1] == "10.89.7.242"
    assert outside.directory("db") == tmp_path / "outside" / "db"
    assert outside.directory("db").is_dir()


def test_down_removes_only_this_sandboxs_outside_machines_after_its_pods(tmp_path: Path) -> None:
    listed = [
        container("extdb-outside-db", "extdb", "db"),
        container("extdb-outside-host", "extdb", "host"),
        container("other-outside-db", "other", "db"),
        container("extdb-controller-0--slurmctld", "extdb", None),  # a pod's: not outside
    ]
    podman = RecordingPodman(listed)
    assert remove_outside_machines(podman, "extdb") == ["extdb-outside-db", "extdb-outside-host"]
    assert podman.commands == [
        ["rm", "--force", "--time", "10", "extdb-outside-db", "extdb-outside-host"]
    ]

    podman = RecordingPodman(listed)
    Applier("extdb", SandboxState(tmp_path), podman, lambda _: None).down(graceful=False)
    assert podman.commands == [
        ["rm", "--force", "--time", "0", "extdb-outside-db", "extdb-outside-host"],
        ["network", "rm", "--force", network_name("extdb")],
    ]
