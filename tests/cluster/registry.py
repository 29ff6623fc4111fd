"""Local OCI registries for container jobs: Debian's docker-registry serving on the host (pods
reach it at their network's gateway), one open and one that wants credentials, each holding
a small busybox image the tests build with umoci and push with skopeo. The open one is reached
through a proxy that can stall a repository (`stalled`): a registry that takes a request and
does not answer it."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from slurm_stack.sandbox.session import subnet_for

REGISTRY_PORT = 5123  # open; the stack files' containers.insecureRegistries name both ports
AUTH_REGISTRY_PORT = 5124  # wants PULL_USER's credentials
# The open registry's docker-registry, on the host's loopback only: pods reach it through the
# proxy at REGISTRY_PORT, the tests push to it directly.
OPEN_BACKEND_PORT = 5125
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


def _direct(port: int) -> int:
    """Where the host's own clients reach the registry that pods reach at ``port``."""
    return OPEN_BACKEND_PORT if port == REGISTRY_PORT else port


def push(layout: Path, name: str, port: int = REGISTRY_PORT) -> None:
    """Push the image in ``layout`` to the registry at ``port`` as ``name`` (repo:tag)."""
    argv = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false"]
    if port == AUTH_REGISTRY_PORT:
        argv.append(f"--dest-creds={PULL_USER}:{PULL_PASSWORD}")
    target = f"docker://127.0.0.1:{_direct(port)}/{name}"
    subprocess.run([*argv, f"oci:{layout}:t", target], check=True, capture_output=True, timeout=60)


def manifest_digest(name: str) -> str:
    """The SHA-256 of the manifest the open registry serves for ``name`` (repo:tag), as
    ``skopeo inspect --raw`` gets it: what names the image in a node's cache."""
    raw = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false",
         f"docker://127.0.0.1:{OPEN_BACKEND_PORT}/{name}"],
        check=True, capture_output=True, timeout=60,
    ).stdout  # fmt: skip
    return hashlib.sha256(raw).hexdigest()


@dataclass
class Stall:
    """Requests for one repository that the open registry takes and does not answer."""

    repository: str
    blobs_only: bool
    held: list[str] = field(default_factory=list)  # "METHOD PATH" of each request taken
    released: threading.Event = field(default_factory=threading.Event)
    refusing: bool = False

    def holds(self, path: str) -> bool:
        prefix = f"/v2/{self.repository}/"
        return path.startswith(prefix + ("blobs/" if self.blobs_only else ""))

    def refuse(self) -> None:
        """From now on, until the block ends, answer its requests, those waiting and every
        later one, 404 Not Found: a pull of it fails, skopeo's retries too."""
        self.refusing = True
        self.released.set()


class _Proxy(ThreadingHTTPServer):
    """The open registry as pods reach it: each request passed to docker-registry, except a
    stalled repository's, held unanswered until the stall ends (or refuses), then answered 404."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, port: int, log: Path) -> None:
        super().__init__(("0.0.0.0", port), _ProxyHandler)
        self.stalls: list[Stall] = []
        self.log = log
        self.lock = threading.Lock()

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client gone: no matter
            super().handle_error(request, client_address)  # type: ignore[arg-type]

    def stall_for(self, request: str, path: str) -> Stall | None:
        with self.lock:
            with self.log.open("a") as log:
                log.write(f"{time.strftime('%H:%M:%S')} {request} {path}\n")
            for stall in self.stalls:
                if stall.holds(path) and (stall.refusing or not stall.released.is_set()):
                    stall.held.append(f"{request} {path}")
                    return stall
        return None


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        stall = self.server.stall_for(self.command, self.path)
        if stall is not None:
            stall.released.wait()
            self.close_connection = True
            self.send_error(404, "stalled by the test")  # to a client still waiting
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        backend = http.client.HTTPConnection("127.0.0.1", OPEN_BACKEND_PORT, timeout=60)
        try:
            backend.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():  # each of a repeated one (Accept)
                if name.lower() not in ("connection", "content-length"):
                    backend.putheader(name, value)
            backend.putheader("Content-Length", str(len(body or b"")))
            backend.endheaders(body)
            answer = backend.getresponse()
            data = answer.read()
        finally:
            backend.close()
        self.send_response(answer.status, answer.reason)
        skipped = ("connection", "keep-alive", "transfer-encoding", "content-length")
        for name, value in answer.getheaders():
            if name.lower() not in skipped:
                self.send_header(name, value)
        size = answer.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", size or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET


_proxy: _Proxy | None = None


@contextmanager
def stalled(repository: str, blobs_only: bool = False) -> Iterator[Stall]:
    """While the block runs, the open registry (as pods reach it) takes every request for
    ``repository`` (with ``blobs_only``, for its config and layers: its manifests answer)
    and does not answer it; when the block ends, it answers those still waiting 404 Not Found
    (skopeo retries a request that failed: the retry reaches the registry)."""
    if _proxy is None:
        pytest.fail("the open registry is not running (the image_registry fixture)")
    stall = Stall(repository, blobs_only)
    with _proxy.lock:
        _proxy.stalls.append(stall)
    try:
        yield stall
    finally:
        stall.released.set()
        with _proxy.lock:
            _proxy.stalls.remove(stall)


@contextmanager
def _proxied(directory: Path, port: int) -> Iterator[None]:
    global _proxy
    if _listening(port):
        pytest.fail(f"port {port} is taken: the container tests' registry needs it")
    proxy = _Proxy(port, directory / "proxy.log")
    server = threading.Thread(target=proxy.serve_forever, name="registry-proxy", daemon=True)
    server.start()
    _proxy = proxy
    try:
        yield
    finally:
        _proxy = None
        for stall in list(proxy.stalls):
            stall.released.set()
        proxy.shutdown()
        proxy.server_close()


@contextmanager
def _registry(directory: Path, port: int, layout: Path, auth: bool) -> Iterator[None]:
    listen = _direct(port)
    if _listening(listen):
        pytest.fail(f"port {listen} is taken: the container tests' registry needs it")
    directory.mkdir()
    address = "127.0.0.1" if listen != port else "0.0.0.0"
    config = [
        "version: 0.1",
        "log:\n  level: warn",
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'data'}",
        f"http:\n  addr: {address}:{listen}",
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
            while not _listening(listen):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"docker-registry did not start: {log_path.read_text()}")
                time.sleep(0.1)
            push(layout, TEST_IMAGE, port)
            if listen == port:
                yield
            else:
                with _proxied(directory, port):
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
