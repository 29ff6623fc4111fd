"""A local OCI registry for container jobs: Debian's docker-registry serving on the host at
REGISTRY_PORT (pods reach it at their network's gateway), holding a small busybox image that
the tests build with umoci and push with skopeo."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from slurm_stack.sandbox.session import subnet_for

REGISTRY_PORT = 5123  # the stack files' containers.insecureRegistries name it
TEST_IMAGE = "test/busybox:1"
IMAGE_MARKER = "slurm-stack test image"
APPLETS = ("sh", "true", "id", "cat", "echo", "ls", "touch", "hostname", "mount", "grep")
TOOLS = ("docker-registry", "umoci", "skopeo", "busybox")


def registry_for(sandbox: str) -> str:
    """The registry's address as the pods of ``sandbox`` reach it."""
    gateway = subnet_for(sandbox).rsplit(".", 1)[0] + ".1"
    return f"{gateway}:{REGISTRY_PORT}"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _build_and_push(directory: Path) -> None:
    rootfs = directory / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "etc").mkdir()
    shutil.copy(shutil.which("busybox") or "/bin/busybox", rootfs / "bin" / "busybox")
    for applet in APPLETS:
        (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "image-marker").write_text(IMAGE_MARKER + "\n")
    layout = directory / "layout"
    for argv in (
        ["umoci", "init", "--layout", str(layout)],
        ["umoci", "new", "--image", f"{layout}:t"],
        ["umoci", "insert", "--image", f"{layout}:t", str(rootfs), "/"],
        [
            "skopeo", "copy", "--quiet", "--dest-tls-verify=false",
            f"oci:{layout}:t", f"docker://127.0.0.1:{REGISTRY_PORT}/{TEST_IMAGE}",
        ],
    ):  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)


@contextmanager
def running_registry(directory: Path) -> Iterator[None]:
    """docker-registry on 0.0.0.0:REGISTRY_PORT with the test image, until the block ends."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: run `bash scripts/setup-podman.sh` first")
    if _listening(REGISTRY_PORT):
        pytest.fail(f"port {REGISTRY_PORT} is taken: the container tests' registry needs it")
    config = directory / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'data'}\n"
        f"http:\n  addr: 0.0.0.0:{REGISTRY_PORT}\n"
    )
    log = (directory / "registry.log").open("w")
    server = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while not _listening(REGISTRY_PORT):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"docker-registry did not start: {(directory / 'registry.log').read_text()}"
                )
            time.sleep(0.1)
        _build_and_push(directory)
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
