"""Reading the Kubernetes API from inside a pod, with the pod's ServiceAccount token.

Only GETs, with the standard library: the node-state controller lists nodes and pods and
needs no client library in the ops image. The address comes from the variables the kubelet
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
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with open(self.token_file, encoding="utf-8") as token:
                bearer = token.read().strip()
            context = ssl.create_default_context(cafile=self.ca_file)
        except OSError as exc:
            raise KubeApiError(f"ServiceAccount credentials: {exc}") from None
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {bearer}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=context) as answer:
                document = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise KubeApiError(f"GET {path}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise KubeApiError(f"GET {path}: {exc}") from None
        if not isinstance(document, dict):
            raise KubeApiError(f"GET {path}: not a JSON object")
        return document
