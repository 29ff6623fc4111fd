"""Machines outside the cluster, beside a sandbox: containers that are none of the rendered
pods (an external accounting database, a directory server, a host that runs Slurm itself) on
the sandbox's podman network.

Each is the container `<sandbox>-outside-<name>`, at a fixed address among the subnet's last
fifteen (`plan.outside_addresses`: slot 0 is .240), which the plan never gives a pod, so a
stack file can name the address before anything runs. It carries the sandbox's label and
one naming it, and `sandbox down` removes it once the pods are gone (`Applier.down`); files
it needs (a data directory, a password file) belong under `directory(name)` in the sandbox
state, which `down --delete-data` removes with the rest. `up` neither starts nor waits for
one: whoever needs it starts it first. plan.py says what stays different from Kubernetes.

    outside = sandbox.outside()
    address = outside.start("db", image, slot=0, podman_args=["--volume", f"{data}:/data"])
    outside.exec("db", ["healthcheck.sh", "--connect"])
    outside.restart("db")  # a reboot: files and address stay
    outside.stop("db")  # removed; `sandbox down` removes every one
"""

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from slurm_stack.sandbox.plan import outside_addresses
from slurm_stack.sandbox.podman import (
    SANDBOX_LABEL,
    Podman,
    gateway_of,
    interface_with_address,
    mac_address,
    network_create_args,
    pin_bridge_address,
)

OUTSIDE_LABEL = f"{SANDBOX_LABEL}.outside"  # its value: the machine's name
STOP_SECONDS = 10  # SIGTERM, then SIGKILL after this long (podman's default)
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")


def outside_container(sandbox: str, name: str) -> str:
    """The container of outside machine ``name``: `<sandbox>-outside-<name>`."""
    return f"{sandbox}-outside-{name}"


def outside_address(subnet: str, slot: int) -> str:
    """The fixed address of the outside machine in ``slot`` (0 is the subnet's .240)."""
    addresses = outside_addresses(subnet)
    if not 0 <= slot < len(addresses):
        raise ValueError(f"outside slot {slot}: {subnet} has slots 0 to {len(addresses) - 1}")
    return addresses[slot]


def checked_name(name: str) -> str:
    """``name`` if it can name an outside machine: lower-case letters, digits and inner
    dashes (a DNS label of up to 40 characters), as its container name is made of it."""
    if not _NAME.match(name):
        raise ValueError(
            f"outside machine {name!r}: use lower-case letters, digits and inner dashes "
            "(at most 40)"
        )
    return name


def run_args(
    sandbox: str,
    name: str,
    image: str,
    *,
    network: str,
    address: str,
    command: Sequence[str] = (),
    podman_args: Sequence[str] = (),
) -> list[str]:
    """`podman run` for an outside machine: detached, on the sandbox's network at
    ``address`` (with the fixed MAC address a pod there would have: `podman.mac_address`),
    labelled for `sandbox down`; ``podman_args`` (volumes, capabilities, environment) go
    before the image, ``command`` after it (the image's own when empty)."""
    return [
        "run",
        "--detach",
        "--name",
        outside_container(sandbox, checked_name(name)),
        "--hostname",
        name,
        "--network",
        network,
        "--ip",
        address,
        "--mac-address",
        mac_address(address),
        "--label",
        f"{SANDBOX_LABEL}={sandbox}",
        "--label",
        f"{OUTSIDE_LABEL}={name}",
        *podman_args,
        image,
        *command,
    ]


def outside_machines(podman: Podman, sandbox: str) -> list[str]:
    """The containers of ``sandbox``'s outside machines that exist, running or not."""
    return sorted(
        str(entry["Names"][0])
        for entry in podman.labelled("container", OUTSIDE_LABEL)
        if (entry.get("Labels") or {}).get(SANDBOX_LABEL) == sandbox
    )


def remove_outside_machines(
    podman: Podman, sandbox: str, *, seconds: int | None = None
) -> list[str]:
    """Stop and remove every outside machine of ``sandbox``: SIGTERM, then SIGKILL after
    ``seconds`` (`STOP_SECONDS` when None; 0 kills at once). Returns their containers."""
    containers = outside_machines(podman, sandbox)
    if containers:
        wait = STOP_SECONDS if seconds is None else seconds
        podman.run(["rm", "--force", "--time", str(wait), *containers], check=False)
    return containers


class OutsideMachines:
    """The outside machines of one sandbox (`Sandbox.outside`)."""

    def __init__(self, sandbox: str, network: str, subnet: str, state_dir: Path, podman: Podman):
        self.sandbox, self.network, self.subnet = sandbox, network, subnet
        self.state_dir, self.podman = state_dir, podman

    def container(self, name: str) -> str:
        """The container of machine ``name``."""
        return outside_container(self.sandbox, checked_name(name))

    def directory(self, name: str) -> Path:
        """Where machine ``name``'s files belong in the sandbox state (made on first use):
        kept by `sandbox down`, removed by `down --delete-data`."""
        path = self.state_dir / "outside" / checked_name(name)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def address(self, slot: int) -> str:
        """The address of ``slot`` on this sandbox's subnet (`outside_address`)."""
        return outside_address(self.subnet, slot)

    def start(
        self,
        name: str,
        image: str,
        *,
        slot: int = 0,
        command: Sequence[str] = (),
        podman_args: Sequence[str] = (),
    ) -> str:
        """Run ``image`` as machine ``name`` at ``slot``'s address, replacing a container of
        that name; makes the sandbox's network when it does not exist yet (an `up` then uses
        it). Returns the address once podman has started it (what runs in it may not be
        ready yet: wait for it as it needs). A failed start raises `PodmanError`."""
        address = self.address(slot)
        self._ensure_network()
        self.podman.run(["rm", "--force", "--time", "0", self.container(name)], check=False)
        self.podman.run(
            run_args(
                self.sandbox,
                name,
                image,
                network=self.network,
                address=address,
                command=command,
                podman_args=podman_args,
            )
        )
        self._pin_bridge()
        return address

    def exec(
        self, name: str, command: Sequence[str], *, timeout: float | None = 60, user: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in machine ``name`` (never raises on its exit status)."""
        return self.podman.exec(self.container(name), command, timeout=timeout, user=user)

    def cut_off(self, name: str) -> None:
        """Take machine ``name`` off the network (a cable pulled): it runs on, unreachable."""
        self.podman.run(["network", "disconnect", self.network, self.container(name)])

    def reconnect(self, name: str, slot: int = 0) -> None:
        """Put machine ``name`` back on the network at ``slot``'s address and MAC address."""
        address = self.address(slot)
        self.podman.run(
            ["network", "connect", "--ip", address, "--mac-address", mac_address(address),
             self.network, self.container(name)]
        )  # fmt: skip

    def running(self, name: str) -> bool:
        """Whether machine ``name`` exists and runs."""
        return self.podman.running(self.container(name))

    def logs(self, name: str, tail: int = 40) -> str:
        """The last lines machine ``name`` printed."""
        return self.podman.logs(self.container(name), tail)

    def restart(self, name: str) -> None:
        """Restart machine ``name`` in place, as a reboot: SIGTERM (SIGKILL after
        `STOP_SECONDS`), then its command again, with its files and address."""
        self.podman.run(["restart", "--time", str(STOP_SECONDS), self.container(name)])

    def stop(self, name: str) -> None:
        """Stop and remove machine ``name`` (SIGTERM, SIGKILL after `STOP_SECONDS`); its
        files stay. Nothing happens when it does not exist."""
        self.podman.run(
            ["rm", "--force", "--time", str(STOP_SECONDS), self.container(name)], check=False
        )

    def names(self) -> list[str]:
        """The containers of this sandbox's outside machines that exist."""
        return outside_machines(self.podman, self.sandbox)

    def _ensure_network(self) -> None:
        if not self.podman.exists("network", self.network):
            self.podman.run(network_create_args(self.network, self.subnet, self.sandbox))

    def _pin_bridge(self) -> None:
        """The bridge's fixed MAC address, as a pod's start sets it (`pin_bridge_address`):
        this may be the network's first container."""
        bridge = interface_with_address(gateway_of(self.subnet))
        if bridge is not None:
            pin_bridge_address(bridge, self.subnet)
