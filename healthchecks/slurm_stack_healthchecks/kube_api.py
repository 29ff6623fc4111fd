"""Reading the Kubernetes API from inside a pod, with the pod's ServiceAccount token.

With the standard library: the node-state controller lists nodes and pods, and the elastic
scaler reads and patches StatefulSets' scale subresource; neither image carries a client
library. The address comes from the variables the kubelet
sets in every pod (KUBERNETES_SERVICE_HOST/PORT), the token and the cluster's CA from the
ServiceAccount volume; the token is read on every request, since the kubelet rotates it.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeApiError(Exception):
    """The API did not answer, or answered with an error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class KubeApi:
    """An API server and the credentials to read it."""

    base_url: str
    token_file: str
    ca_file: str
    timeout: float = 10.0

    @classmethod
    def in_cluster(cls, environ: Mapping[str, str], timeout: float = 10.0) -> KubeApi:
        """The API server as a pod reaches it; raises KeyError without the kubelet's variables."""
        host = environ["KUBERNETES_SERVICE_HOST"]
        port = environ["KUBERNETES_SERVICE_PORT"]
        if ":" in host:  # IPv6
            host = f"[{host}]"
        return cls(
            f"https://{host}:{port}",
            f"{SERVICE_ACCOUNT_DIR}/token",
            f"{SERVICE_ACCOUNT_DIR}/ca.crt",
            timeout,
        )

    def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The JSON object at ``path``; raises :class:`KubeApiError`."""
        if params:
            path += "?" + urllib.parse.urlencode(params)
        return self.request("GET", path)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386) to the object at ``path``; its new state."""
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str) -> dict[str, Any]:
        """Delete the object at ``path``; the API's answer."""
        return self.request("DELETE", path)

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """One request; its JSON answer. Raises :class:`KubeApiError` (``.status`` holds the
        HTTP status where the API answered)."""
        try:
            with open(self.token_file, encoding="utf-8") as token:
                bearer = token.read().strip()
            context = ssl.create_default_context(cafile=self.ca_file)
        except OSError as exc:
            raise KubeApiError(f"ServiceAccount credentials: {exc}") from None
        headers = {"Authorization": f"Bearer {bearer}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=context) as answer:
                document = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise KubeApiError(
                f"{method} {path}: HTTP {exc.code} {_status_message(exc) or exc.reason}",
                exc.code,
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise KubeApiError(f"{method} {path}: {exc}") from None
        if not isinstance(document, dict):
            raise KubeApiError(f"{method} {path}: not a JSON object")
        return document


def _status_message(error: urllib.error.HTTPError) -> str:
    """The message of the API's Status answer, if it sent one."""
    try:
        status = json.load(error)
    except (OSError, ValueError):
        return ""
    return str(status.get("message", "")) if isinstance(status, dict) else ""
