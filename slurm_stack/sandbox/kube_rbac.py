"""Kubernetes RBAC for the sandbox's stand-in API: who a request is, what it asks, and whether
the stack's Roles, ClusterRoles and their bindings allow it.

Standard library only: the stand-in server (kube_api_server.py) imports it in its container,
where it is mounted beside the server's script.

As the API server does it (kubernetes/kubernetes, staging/src/k8s.io/apiserver/pkg/endpoints/
request/requestinfo.go for the request's attributes, plugin/pkg/auth/authorizer/rbac for the
decision): a request's path gives its API group, namespace, resource, name and subresource,
its method and path its verb (GET on a collection is `list`, on an object `get`, with
`?watch=true` `watch`; DELETE on a collection `deletecollection`). A rule allows it when its
verbs, apiGroups and resources (`statefulsets/scale` for a subresource, `*` for any, `*/scale`
for a subresource of any) include the request's, and its resourceNames (none: any) its name.
A ClusterRoleBinding grants its ClusterRole everywhere; a RoleBinding grants its Role or
ClusterRole in its own namespace. What stays different: no aggregated ClusterRoles (an
`aggregationRule` grants nothing), no rule for non-resource URLs (`/version`, discovery:
refused), and none of the API server's default roles and bindings (`system:*`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
# Paths below /api/v1/namespaces/<ns>/ that are the namespace's own subresources, not a
# resource in it (requestinfo.go's namespaceSubresources).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class User:
    """An authenticated user: its name and groups."""

    name: str
    groups: tuple[str, ...] = ()


def service_account_user(namespace: str, account: str) -> User:
    """The user a ServiceAccount's token authenticates as, with the groups the API server
    gives it."""
    return User(
        f"system:serviceaccount:{namespace}:{account}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@dataclass(frozen=True)
class Request:
    """A request's attributes as RBAC sees them (the API server's RequestInfo)."""

    verb: str
    path: str
    resource_request: bool = False
    api_group: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def combined_resource(self) -> str:
        """``resource/subresource``, or the resource alone."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def parse_request(method: str, path: str, query: Mapping[str, Sequence[str]] = {}) -> Request:
    """A request's attributes from its method, path (no query) and query parameters."""
    parts = [part for part in path.strip("/").split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return Request(_non_resource_verb(method), path)
    watch = False
    if rest and rest[0] == "watch":  # the legacy /api/v1/watch/... form
        watch, rest = True, rest[1:]
    if not rest:
        return Request(_non_resource_verb(method), path)  # discovery: /api/v1, /apis/apps/v1
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD"):
        watched = watch or query.get("watch", [""])[0] in ("1", "true")
        verb = "watch" if watched else ("get" if name else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Request(verb, path, True, group, namespace, resource, subresource, name)


def _non_resource_verb(method: str) -> str:
    return "get" if method in ("GET", "HEAD") else _VERBS.get(method, method.lower())


def rule_allows(rule: Mapping[str, Any], request: Request) -> bool:
    """Whether one PolicyRule allows a resource request."""
    if not request.resource_request:
        return False  # nonResourceURLs are not evaluated here
    verbs = rule.get("verbs") or []
    groups = rule.get("apiGroups") or []
    names = rule.get("resourceNames") or []
    return (
        ("*" in verbs or request.verb in verbs)
        and ("*" in groups or request.api_group in groups)
        and _resource_matches(rule.get("resources") or [], request)
        and (not names or request.name in names)
    )


def _resource_matches(resources: Iterable[str], request: Request) -> bool:
    for resource in resources:
        if resource in ("*", request.combined_resource):
            return True
        if request.subresource and resource == f"*/{request.subresource}":
            return True
    return False


class Authorizer:
    """RBAC over a fixed set of Role, ClusterRole, RoleBinding and ClusterRoleBinding
    objects (any other kind is ignored)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._roles: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        self._cluster_roles: dict[str, list[Mapping[str, Any]]] = {}
        self._bindings: list[Mapping[str, Any]] = []
        self._cluster_bindings: list[Mapping[str, Any]] = []
        for manifest in objects:
            kind, meta = manifest.get("kind"), manifest.get("metadata") or {}
            if kind == "Role":
                key = (meta.get("namespace", "default"), meta.get("name", ""))
                self._roles[key] = list(manifest.get("rules") or [])
            elif kind == "ClusterRole":
                self._cluster_roles[meta.get("name", "")] = list(manifest.get("rules") or [])
            elif kind == "RoleBinding":
                self._bindings.append(manifest)
            elif kind == "ClusterRoleBinding":
                self._cluster_bindings.append(manifest)

    def allows(self, user: User, request: Request) -> bool:
        """Whether a binding that names ``user`` grants a rule that allows ``request``."""
        return any(rule_allows(rule, request) for rule in self.rules_for(user, request.namespace))

    def rules_for(self, user: User, namespace: str) -> list[Mapping[str, Any]]:
        """Every rule granted to ``user`` in ``namespace`` ("": cluster-wide only)."""
        rules: list[Mapping[str, Any]] = []
        for binding in self._cluster_bindings:
            if _names(binding, user, ""):
                rules += self._role_rules(binding.get("roleRef") or {}, None)
        for binding in self._bindings:
            bound_in = (binding.get("metadata") or {}).get("namespace", "default")
            if namespace and bound_in == namespace and _names(binding, user, bound_in):
                rules += self._role_rules(binding.get("roleRef") or {}, bound_in)
        return rules

    def _role_rules(self, ref: Mapping[str, Any], namespace: str | None) -> list[Mapping[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            return self._cluster_roles.get(ref.get("name", ""), [])
        if ref.get("kind") == "Role" and namespace is not None:
            return self._roles.get((namespace, ref.get("name", "")), [])
        return []  # a ClusterRoleBinding cannot bind a Role


def _names(binding: Mapping[str, Any], user: User, binding_namespace: str) -> bool:
    """Whether one of the binding's subjects is ``user`` (a ServiceAccount subject without a
    namespace is in the binding's own, as the API server reads it)."""
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), subject.get("name", "")
        if kind == "User" and name == user.name:
            return True
        if kind == "Group" and name in user.groups:
            return True
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or binding_namespace
            if namespace and user.name == f"system:serviceaccount:{namespace}:{name}":
                return True
    return False


def qualified_resource(request: Request) -> str:
    """The resource as the API server names it in errors: `statefulsets.apps`, `pods`."""
    return f"{request.resource}.{request.api_group}" if request.api_group else request.resource


def forbidden_message(user: User, request: Request) -> str:
    """The message of the API server's 403 for ``request``."""
    if not request.resource_request:
        reason = f"User {_quoted(user.name)} cannot {request.verb} path {_quoted(request.path)}"
        return f"forbidden: {reason}"
    scope = (
        f"in the namespace {_quoted(request.namespace)}"
        if request.namespace
        else "at the cluster scope"
    )
    reason = (
        f"User {_quoted(user.name)} cannot {request.verb} resource "
        f"{_quoted(request.combined_resource)} in API group {_quoted(request.api_group)} {scope}"
    )
    subject = qualified_resource(request)
    if request.name:
        subject += f" {_quoted(request.name)}"
    return f"{subject} is forbidden: {reason}"


def forbidden_status(user: User, request: Request) -> dict[str, Any]:
    """The API server's Status body of a 403 for ``request``."""
    details: dict[str, Any] = {}
    if request.resource_request:
        details = {"name": request.name, "group": request.api_group, "kind": request.resource}
        details = {key: value for key, value in details.items() if value}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": forbidden_message(user, request),
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def _quoted(text: str) -> str:
    """A string as Go's %q writes the names here (they hold no characters it escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
