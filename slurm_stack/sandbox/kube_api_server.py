"""The sandbox's stand-in for the Kubernetes API server: the few reads the node-state
controller makes, answered from files the sandbox writes.

Runs in a container on the sandbox's network (standard library only):
``python3 kube_api_server.py STATE_DIR PORT``. STATE_DIR holds ``nodes.json``
(``{"<node>": {"unschedulable": bool, "ready": bool}}``), ``pods.json`` (a list of
``{"name", "namespace", "labels", "nodeName"}``), ``token`` (the one bearer token it
accepts) and ``server.crt``/``server.key`` (its TLS identity). Both JSON files are read on
every request, so a cordon is seen on the next one.

Serves ``GET /api/v1/nodes`` and ``GET /api/v1/namespaces/<ns>/pods[?labelSelector=k=v,...]``
as the API server shapes them (only the fields the controller reads); any other path is a
404, and a request without the token a 401, as the API server answers them.
"""

from __future__ import annotations

import json
import re
import ssl
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_PODS = re.compile(r"^/api/v1/namespaces/(?P<namespace>[a-z0-9-]+)/pods$")


def node_list(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    items = []
    for name, state in sorted(nodes.items()):
        ready = "True" if state.get("ready", True) else "False"
        items.append(
            {
                "metadata": {"name": name, "labels": state.get("labels", {})},
                "spec": {"unschedulable": True} if state.get("unschedulable") else {},
                "status": {"conditions": [{"type": "Ready", "status": ready}]},
            }
        )
    return {"kind": "NodeList", "apiVersion": "v1", "items": items}


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality selectors (``k=v,k2=v2``), the only kind the controller sends."""
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def pod_list(pods: list[dict[str, Any]], namespace: str, selector: str) -> dict[str, Any]:
    items = [
        {
            "metadata": {"name": p["name"], "namespace": namespace, "labels": p["labels"]},
            "spec": {"nodeName": p["nodeName"]},
        }
        for p in pods
        if p["namespace"] == namespace and selector_matches(selector, p["labels"])
    ]
    return {"kind": "PodList", "apiVersion": "v1", "items": items}


class Handler(BaseHTTPRequestHandler):
    state: Path

    def do_GET(self) -> None:
        token = (self.state / "token").read_text().strip()
        if self.headers.get("Authorization") != f"Bearer {token}":
            self.answer(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
            return
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/api/v1/nodes":
            self.answer(200, node_list(json.loads((self.state / "nodes.json").read_text())))
        elif match := _PODS.match(url.path):
            pods = json.loads((self.state / "pods.json").read_text())
            selector = query.get("labelSelector", [""])[0]
            self.answer(200, pod_list(pods, match["namespace"], selector))
        else:
            self.answer(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

    def answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main() -> None:
    state, port = Path(sys.argv[1]), int(sys.argv[2])
    Handler.state = state
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(state / "server.crt", state / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
