"""The elastic scaler's ServiceAccount token, mounted in the slurmctld container alone.

The pod keeps `automountServiceAccountToken: false`, which would give every container the
token; the same volume, declared here, goes to the one container whose programs use it.
What the token may do is k8s/elastic.py's Role.
"""

from slurm_stack.k8s.common import Manifest
from slurm_stack.spec.models import ClusterSpec

TOKEN_VOLUME = "kube-api-access"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The kubelet's own lifetime for a projected ServiceAccount token; it rotates the file.
TOKEN_SECONDS = 3607


def api_access_volumes(spec: ClusterSpec) -> list[Manifest]:
    """With elastic pools: the ServiceAccount volume as the kubelet's automount makes it
    (token, the cluster's CA, the namespace), declared so that one container alone mounts it."""
    if not spec.elastic_pools:
        return []
    return [
        {
            "name": TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                }
                            ]
                        }
                    },
                ]
            },
        }
    ]


def api_access_mounts(spec: ClusterSpec) -> list[Manifest]:
    """The token where Kubernetes clients look for it, for slurmctld's programs."""
    if not spec.elastic_pools:
        return []
    return [{"name": TOKEN_VOLUME, "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}]
