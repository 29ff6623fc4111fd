"""Local OCI registries for container jobs: Debian's docker-registry serving on the host (pods
reach it at their network's gateway), one open and one that wants credentials, each holding
a small busybox image the tests build with umoci and push with skopeo."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from slurm_stack.sandbox.session import subnet_for

REGISTRY_PORT = 5123  # open; the stack files' containers.insecureRegistries name both ports
AUTH_REGISTRY_PORT = 5124  # wants PULL_USER's credentials
PULL_USER, PULL_PASSWORD = "puller", "test-registry-password"
TEST_IMAGE = "test/busybox:1"
IMAGE_MARKER = "slurm-stack test image"
APPLETS = ("sh", "true", "id", "cat", "echo", "ls", "touch", "hostname", "mount", "grep")
TOOLS = ("docker-registry", "umoci", "skopeo", "busybox", "htpasswd")


def registry_for(sandbox: str, port: int = REGISTRY_PORT) -> str:
    """A registry's address as the pods of ``sandbox`` reach it."""
    gateway = subnet_for(sandbox).rsplit(".", 1)[0] + ".1"
    return f"{gateway}:{port}"


def docker_config(registry: str) -> str:
    """containerRegistryAuth for the registry that wants credentials, at ``registry``."""
    token = base64.b64encode(f"{PULL_USER}:{PULL_PASSWORD}".encode()).decode()
    return json.dumps({"auths": {registry: {"auth": token}}})


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def build_image(directory: Path, marker: str = IMAGE_MARKER) -> Path:
    """A busybox image whose /etc/image-marker says ``marker``, in an OCI layout in
    ``directory``; with a setuid-root copy of busybox, which must not raise anyone's uid."""
    rootfs = directory / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "etc").mkdir()
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy(busybox, rootfs / "bin" / "busybox")
    # Named busybox (it picks its applet by its own name), setuid root.
    (rootfs / "opt" / "suid").mkdir(parents=True)
    shutil.copy(busybox, rootfs / "opt" / "suid" / "busybox")
    (rootfs / "opt" / "suid" / "busybox").chmod(0o4755)
    for applet in APPLETS:
        (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "image-marker").write_text(marker + "\n")
    layout = directory / "layout"
    for argv in (
        ["umoci", "init", "--layout", str(layout)],
        ["umoci", "new", "--image", f"{layout}:t"],
        ["umoci", "insert", "--image", f"{layout}:t", str(rootfs), "/"],
    ):
        subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
    return layout


def push(layout: Path, name: str, port: int = REGISTRY_PORT) -> None:
    """Push the image in ``layout`` to the registry at ``port`` as ``name`` (repo:tag)."""
    argv = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false"]
    if port == AUTH_REGISTRY_PORT:
        argv.append(f"--dest-creds={PULL_USER}:{PULL_PASSWORD}")
    target = f"docker://127.0.0.1:{port}/{name}"
    subprocess.run([*argv, f"oci:{layout}:t", target], check=True, capture_output=True, timeout=60)


@contextmanager
def _registry(directory: Path, port: int, layout: Path, auth: bool) -> Iterator[None]:
    if _listening(port):
        pytest.fail(f"port {port} is taken: the container tests' registry needs it")
    directory.mkdir()
    config = [
        "version: 0.1",
        "log:\n  level: warn",
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'data'}",
        f"http:\n  addr: 0.0.0.0:{port}",
    ]
    if auth:
        htpasswd = directory / "htpasswd"
        subprocess.run(
            ["htpasswd", "-Bbc", str(htpasswd), PULL_USER, PULL_PASSWORD],
            check=True,
            capture_output=True,
        )
        config.append(f"auth:\n  htpasswd:\n    realm: test\n    path: {htpasswd}")
    (directory / "config.yml").write_text("\n".join(config) + "\n")
    log_path = directory / "registry.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            ["docker-registry", "serve", str(directory / "config.yml")], stdout=log, stderr=log
        )
        try:
            deadline = time.monotonic() + 20
            while not _listening(port):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"docker-registry did not start: {log_path.read_text()}")
                time.sleep(0.1)
            push(layout, TEST_IMAGE, port)
            yield
        finally:
            server.terminate()
            server.wait(timeout=10)


@contextmanager
def running_registries(directory: Path) -> Iterator[None]:
    """Both registries with the test image, until the block ends."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: run `bash scripts/setup-podman.sh` first")
    layout = build_image(directory)
    with ExitStack() as stack:
        stack.enter_context(_registry(directory / "open", REGISTRY_PORT, layout, auth=False))
        stack.enter_context(_registry(directory / "auth", AUTH_REGISTRY_PORT, layout, auth=True))
        yield
