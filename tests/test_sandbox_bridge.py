"""The sandbox network's bridge keeps the MAC address the sandbox gives it (podman.py)."""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_stack.sandbox.podman import (
    gateway_of,
    interface_with_address,
    mac_address,
    pin_bridge_address,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="making links needs root and ip(8)"
)
BRIDGE, PORT = "sstest-br0", "sstest-p0"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def address(interface: str) -> str:
    return Path(f"/sys/class/net/{interface}/address").read_text().strip()


@pytest.fixture
def bridge() -> Iterator[str]:
    ip("link", "add", BRIDGE, "type", "bridge")
    try:
        yield BRIDGE
    finally:
        subprocess.run(["ip", "link", "del", PORT], capture_output=True, check=False)
        ip("link", "del", BRIDGE)


def add_port(mac: str) -> None:
    # A veth pair: one end is the port, as a pod's is (this kernel has no dummy links).
    ip("link", "add", PORT, "address", mac, "type", "veth", "peer", "name", f"{PORT}p")
    ip("link", "set", PORT, "master", BRIDGE)


def test_without_a_pinned_address_a_new_port_changes_the_bridges(bridge: str) -> None:
    # What the pin is for: Linux gives the bridge its lowest port's address.
    add_port("00:00:5e:00:53:01")
    assert address(bridge) == "00:00:5e:00:53:01"


def test_a_pinned_bridge_keeps_the_gateways_address_as_ports_come(bridge: str) -> None:
    pin_bridge_address(bridge, "10.89.41.0/24")
    assert address(bridge) == mac_address("10.89.41.1") == "02:53:0a:59:29:01"
    add_port("00:00:5e:00:53:01")
    assert address(bridge) == "02:53:0a:59:29:01"
    pin_bridge_address(bridge, "10.89.41.0/24")  # set once: a second call changes nothing
    assert address(bridge) == "02:53:0a:59:29:01"


def test_no_bridge_yet_is_left_for_later() -> None:
    pin_bridge_address("sstest-none", "10.89.41.0/24")
    assert not Path("/sys/class/net/sstest-none").exists()


def test_the_bridge_is_found_by_the_gateway_address_it_holds(bridge: str) -> None:
    # What the sandbox looks its network's bridge up by (one `ip` call, not a podman one).
    gateway = gateway_of("198.51.100.0/24")
    assert gateway == "198.51.100.1"
    assert interface_with_address(gateway) is None
    ip("addr", "add", f"{gateway}/24", "dev", bridge)
    assert interface_with_address(gateway) == bridge
    assert interface_with_address("198.51.100.2") is None
