"""The sandbox's stand-in for the Kubernetes API server: the reads of the node-state
controller and the elastic scaler's scale and pod deletes, answered from files the sandbox
writes, each request authorized by the stack's RBAC objects.

Runs in a container on the sandbox's network (standard library only, with kube_rbac.py
beside it): ``python3 kube_api_server.py STATE_DIR PORT``. STATE_DIR, written by the sandbox
(kube_api.py) and read on every request, holds:
- ``tokens.json``: ``{"<token>": {"namespace": ns, "name": account}}``, a token for each
  ServiceAccount whose pods mount one;
- ``rbac.json``: the stack's Role, ClusterRole, RoleBinding and ClusterRoleBinding objects;
- ``nodes.json``: ``{"<node>": {"unschedulable": bool, "ready": bool, "labels": {...}}}``;
- ``pods.json``: a list of ``{"name", "namespace", "labels", "nodeName", "grace"}``, the pods
  that exist;
- ``statefulsets.json``: ``{"<ns>": {"<name>": {"selector": str, "replicas": int}}}``;
- ``server.crt``/``server.key``: its TLS identity;
- ``live/``, the one directory it writes (mounted read-write), shared with the sandbox's
  StatefulSet controller (statefulset_controller.py): ``live/statefulsets/<ns>/<name>``, a
  StatefulSet's ``spec.replicas`` (``{"replicas": N}``), and ``live/deletions/<ns>/<pod>``,
  a pod deleted and not yet started again.

Serves, as the API server shapes them (the fields its clients read):
- ``GET /api/v1/nodes`` and ``GET /api/v1/namespaces/<ns>/pods[?labelSelector=k=v,...]``;
- ``DELETE /api/v1/namespaces/<ns>/pods/<name>``: the pod, marked for deletion;
- ``GET`` and ``PATCH /apis/apps/v1/namespaces/<ns>/statefulsets/<name>/scale``: an
  ``autoscaling/v1`` Scale; a patch is a merge or strategic merge patch of it.
A request without a known token is a 401; one its account's RBAC does not allow a 403 (before
the path is looked at, as the API server authorizes before it routes); another path a 404, a
known path with another method a 405, a bad patch a 400 or 422, as the API server answers them.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import ssl
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

try:
    from slurm_stack.sandbox import kube_rbac
except ImportError:  # in the stand-in's container, where it is mounted beside this script
    # The same module under the name it has there, which only resolves in the container.
    import kube_rbac  # type: ignore[no-redef,import-not-found]

_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
_PODS = re.compile(rf"^/api/v1/namespaces/(?P<namespace>{_NAME})/pods$")
_POD = re.compile(rf"^/api/v1/namespaces/(?P<namespace>{_NAME})/pods/(?P<name>{_NAME})$")
_SCALE = re.compile(
    rf"^/apis/apps/v1/namespaces/(?P<namespace>{_NAME})/statefulsets/(?P<name>{_NAME})/scale$"
)
PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
INT32 = 2**31
_writes = threading.Lock()  # a patch reads, merges and writes a StatefulSet's size


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Any:
    """A Status object, as the API server answers an error."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }
    if not details:
        del body["details"]
    return body


class ApiError(Exception):
    """An error answer: its HTTP code and Status body."""

    def __init__(self, code: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", ""))
        self.code, self.body = code, body


def not_found(resource: str, group: str, name: str) -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    details = {"name": name, "group": group, "kind": resource}
    return ApiError(
        404,
        status(
            404,
            "NotFound",
            f'{qualified} "{name}" not found',
            {k: v for k, v in details.items() if v},
        ),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, status(400, "BadRequest", message))


def node_list(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A NodeList of the stand-in nodes."""
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
    """A PodList of the pods of ``namespace`` that ``selector`` selects."""
    items = [
        {
            "metadata": {"name": p["name"], "namespace": namespace, "labels": p["labels"]},
            "spec": {"nodeName": p["nodeName"]},
        }
        for p in pods
        if p["namespace"] == namespace and selector_matches(selector, p["labels"])
    ]
    return {"kind": "PodList", "apiVersion": "v1", "items": items}


def scale(namespace: str, name: str, replicas: int, existing: int, selector: str) -> dict[str, Any]:
    """The ``autoscaling/v1`` Scale of a StatefulSet (``spec.replicas`` left out at 0, as
    the API server's omitempty leaves it)."""
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas} if replicas else {},
        "status": {"replicas": existing, "selector": selector},
    }


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` merged into ``target`` (a null removes a key)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _json_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value that does not fit (a number with itself)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {json.dumps(value)}"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), "value")


def patched_replicas(current: dict[str, Any], content_type: str, body: bytes, name: str) -> int:
    """The replicas a patch of Scale ``current`` asks for; raises ApiError as the API server
    refuses the patch (415 for a patch type it does not take here, 400 for one that does not
    decode into a Scale, 422 for a negative size)."""
    media = content_type.split(";")[0].strip().lower()
    if media not in PATCH_TYPES:
        accepted = ", ".join(PATCH_TYPES)
        raise ApiError(
            415,
            status(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {accepted}",
            ),
        )
    try:
        patch = json.loads(body or b"null")
    except ValueError as error:
        raise bad_request(f"error decoding patch: {error}") from None
    if not isinstance(patch, dict):
        raise bad_request(f"error decoding patch: cannot apply a {_json_type(patch)} as a patch")
    merged = merge_patch(current, patch)
    prefix = 'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal'
    meta = merged.get("metadata", {})
    if isinstance(meta, dict) and meta.get("name", name) != name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({name})"
        )
    spec = merged.get("spec", {})
    if not isinstance(spec, dict):
        raise bad_request(
            f"{prefix} {_json_type(spec)} into Go struct field Scale.spec of type v1.ScaleSpec"
        )
    replicas = spec.get("replicas", 0)
    integer = isinstance(replicas, int) and not isinstance(replicas, bool)
    if not integer or not -INT32 <= replicas < INT32:
        raise bad_request(
            f"{prefix} {_json_type(replicas)} into Go struct field ScaleSpec.spec.replicas of "
            "type int32"
        )
    if replicas < 0:
        reason = f"Invalid value: {replicas}: must be greater than or equal to 0"
        raise ApiError(
            422,
            status(
                422,
                "Invalid",
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: {reason}',
                {
                    "name": name,
                    "group": "autoscaling",
                    "kind": "Scale",
                    "causes": [
                        {"reason": "FieldValueInvalid", "message": reason, "field": "spec.replicas"}
                    ],
                },
            ),
        )
    return replicas


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path: Path, document: Any) -> None:
    """Write ``path`` whole (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    partial.write_text(json.dumps(document) + "\n")
    partial.chmod(0o644)
    partial.rename(path)


class ApiState:
    """The state directory, as the handlers read and write it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, name: str, default: Any) -> Any:
        try:
            return json.loads((self.root / name).read_text())
        except FileNotFoundError:
            return default

    def user(self, authorization: str | None) -> kube_rbac.User | None:
        """The ServiceAccount a bearer token is; None for no token or an unknown one."""
        scheme, _, token = (authorization or "").partition(" ")
        account = self.read("tokens.json", {}).get(token.strip()) if scheme == "Bearer" else None
        if not account:
            return None
        return kube_rbac.service_account_user(account["namespace"], account["name"])

    def authorizer(self) -> kube_rbac.Authorizer:
        return kube_rbac.Authorizer(self.read("rbac.json", []))

    def pods(self) -> list[dict[str, Any]]:
        return list(self.read("pods.json", []))

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        for pod in self.pods():
            if pod["namespace"] == namespace and pod["name"] == name:
                return pod
        raise not_found("pods", "", name)

    def statefulset(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.read("statefulsets.json", {}).get(namespace, {}).get(name)
        if found is None:
            raise not_found("statefulsets", "apps", name)
        return dict(found)

    def size_file(self, namespace: str, name: str) -> Path:
        return self.root / "live" / "statefulsets" / namespace / name

    def replicas(self, namespace: str, name: str) -> int:
        """A StatefulSet's spec.replicas: its size's file, else its manifest's."""
        known = self.statefulset(namespace, name)
        try:
            return int(json.loads(self.size_file(namespace, name).read_text())["replicas"])
        except (OSError, ValueError, KeyError, TypeError):
            return int(known.get("replicas", 1))

    def get_scale(self, namespace: str, name: str) -> dict[str, Any]:
        known = self.statefulset(namespace, name)
        prefix = f"{name}-"
        existing = sum(
            1
            for pod in self.pods()
            if pod["namespace"] == namespace
            and pod["name"].startswith(prefix)
            and pod["name"][len(prefix) :].isdigit()
        )
        replicas = self.replicas(namespace, name)
        return scale(namespace, name, replicas, existing, known.get("selector", ""))

    def patch_scale(
        self, namespace: str, name: str, content_type: str, body: bytes
    ) -> dict[str, Any]:
        with _writes:
            current = self.get_scale(namespace, name)
            replicas = patched_replicas(current, content_type, body, name)
            write_json(self.size_file(namespace, name), {"replicas": replicas})
        return self.get_scale(namespace, name)

    def delete_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """Mark a pod for deletion (the StatefulSet controller stops it and starts it again);
        the pod as the API server answers a graceful delete."""
        pod = self.pod(namespace, name)
        request = self.root / "live" / "deletions" / namespace / name
        with _writes:
            if not request.exists():
                write_json(request, {"requested": now()})
        grace = int(pod.get("grace", 30))
        return {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": pod["labels"],
                "deletionTimestamp": now(),
                "deletionGracePeriodSeconds": grace,
            },
            "spec": {"nodeName": pod["nodeName"], "terminationGracePeriodSeconds": grace},
            "status": {"phase": "Running"},
        }


def route(
    state: ApiState, method: str, path: str, query: dict[str, list[str]], body: bytes, headers: Any
) -> tuple[int, dict[str, Any]]:
    """The answer to an authorized request."""
    if path == "/api/v1/nodes":
        if method != "GET":
            return _not_allowed()
        return 200, node_list(state.read("nodes.json", {}))
    if match := _PODS.match(path):
        if method != "GET":
            return _not_allowed()
        selector = query.get("labelSelector", [""])[0]
        return 200, pod_list(state.pods(), match["namespace"], selector)
    if match := _POD.match(path):
        if method != "DELETE":
            return _not_allowed()
        return 200, state.delete_pod(match["namespace"], match["name"])
    if match := _SCALE.match(path):
        if method == "GET":
            return 200, state.get_scale(match["namespace"], match["name"])
        if method == "PATCH":
            content_type = headers.get("Content-Type", "")
            return 200, state.patch_scale(match["namespace"], match["name"], content_type, body)
        return _not_allowed()
    return 404, status(404, "NotFound", "the server could not find the requested resource")


def _not_allowed() -> tuple[int, dict[str, Any]]:
    return 405, status(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


class Handler(BaseHTTPRequestHandler):
    """Authenticates, authorizes and routes each request."""

    state: ApiState

    def do_GET(self) -> None:
        self.handle_request("GET")

    def do_PATCH(self) -> None:
        self.handle_request("PATCH")

    def do_DELETE(self) -> None:
        self.handle_request("DELETE")

    def do_POST(self) -> None:
        self.handle_request("POST")

    def do_PUT(self) -> None:
        self.handle_request("PUT")

    def handle_request(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        user = self.state.user(self.headers.get("Authorization"))
        if user is None:
            self.answer(401, status(401, "Unauthorized", "Unauthorized"))
            return
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        request = kube_rbac.parse_request(method, url.path, query)
        if not self.state.authorizer().allows(user, request):
            self.answer(403, kube_rbac.forbidden_status(user, request))
            return
        try:
            self.answer(*route(self.state, method, url.path, query, body, self.headers))
        except ApiError as error:
            self.answer(error.code, error.body)

    def answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def serve(state: Path, host: str, port: int) -> ThreadingHTTPServer:
    """The server over TLS (``server.crt``/``server.key`` of ``state``), not yet serving."""
    handler = type("BoundHandler", (Handler,), {"state": ApiState(state)})
    server = ThreadingHTTPServer((host, port), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(state / "server.crt", state / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


def main() -> None:
    state, port = Path(sys.argv[1]), int(sys.argv[2])
    serve(state, "0.0.0.0", port).serve_forever()


if __name__ == "__main__":
    main()
