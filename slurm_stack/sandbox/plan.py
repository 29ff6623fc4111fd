"""What podman runs for a rendered stack: pods, containers, files and host names.

Everything Kubernetes does that podman does not is translated here, in one place:
- a StatefulSet's replicas become pods named `<name>-<ordinal>`; a Deployment's single pod is
  named `<name>-0` (Kubernetes would add a random suffix);
- a Service becomes a host entry: `<svc>.<ns>.svc` names the IP of the first pod it selects
  (Kubernetes gives it a virtual IP that balances over all of them), and pods of headless
  Services also get `<pod>.<svc>.<ns>.svc`;
- volumes become directories under the sandbox state directory: emptyDir per pod, claims per
  claim name (claim templates per pod), ConfigMap and Secret files written with their modes;
- env values from `secretKeyRef` are resolved from the rendered Secret (Kubernetes injects them);
- native sidecars (init containers with restartPolicy Always) start first and keep running,
  other init containers run to completion before the main containers, as in a pod.
"""

import base64
import ipaddress
from dataclasses import dataclass, field
from typing import Any, Literal

Manifest = dict[str, Any]
Role = Literal["sidecar", "init", "main"]

# Start order by component label: each waits for the ones before it to be ready.
PHASES = {
    "database": 0,
    "accounting": 1,
    "controller": 2,
    "jail": 3,
    "login": 4,
    "worker": 4,
    "reconfigure": 5,
}


@dataclass(frozen=True)
class Mount:
    """A host directory or file mounted into a container."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class Container:
    """One container of a pod, with what its manifest asks for."""

    name: str
    image: str
    role: Role
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    user: int | None = None
    cap_add: tuple[str, ...] = ()
    privileged: bool = False
    apparmor_unconfined: bool = False
    mounts: tuple[Mount, ...] = ()


@dataclass(frozen=True)
class File:
    """A file the sandbox writes before starting pods (ConfigMap and Secret contents)."""

    path: str
    content: bytes
    mode: int


@dataclass(frozen=True)
class Pod:
    """A pod to run: long-running unless it belongs to a Job."""

    name: str
    ip: str
    component: str
    phase: int
    job: bool
    containers: tuple[Container, ...]


@dataclass(frozen=True)
class Plan:
    """Everything `sandbox up` creates, in start order."""

    subnet: str
    pods: tuple[Pod, ...]
    hosts: dict[str, str]
    files: tuple[File, ...] = field(default=())
    directories: tuple[str, ...] = field(default=())


def plan(manifests: list[Manifest], state_dir: str, subnet: str = "10.89.7.0/24") -> Plan:
    """The sandbox plan for ``manifests`` (rendered with secrets shown)."""
    by_kind: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        by_kind.setdefault(manifest["kind"], []).append(manifest)
    config_maps = {m["metadata"]["name"]: m for m in by_kind.get("ConfigMap", [])}
    secrets = {m["metadata"]["name"]: _secret_data(m) for m in by_kind.get("Secret", [])}

    templates = [
        (f"{m['metadata']['name']}-{i}", m, False)
        for kind in ("StatefulSet", "Deployment")
        for m in by_kind.get(kind, [])
        for i in range(m["spec"].get("replicas", 1) if kind == "StatefulSet" else 1)
    ] + [(m["metadata"]["name"], m, True) for m in by_kind.get("Job", [])]
    templates.sort(key=lambda item: item[0])
    network = ipaddress.ip_network(subnet)
    ips = {name: str(network[10 + i]) for i, (name, _, _) in enumerate(templates)}

    files: list[File] = []
    directories: set[str] = set()
    pods = []
    for name, workload, job in templates:
        template = workload["spec"]["template"]
        component = template["metadata"]["labels"]["app.kubernetes.io/component"]
        volumes = _volumes(
            name, workload, template["spec"], state_dir, config_maps, secrets, files, directories
        )
        containers = _containers(template["spec"], volumes, secrets)
        pods.append(Pod(name, ips[name], component, PHASES.get(component, 4), job, containers))
    pods.sort(key=lambda pod: (pod.phase, pod.name))
    hosts = _hosts(by_kind.get("Service", []), pods, templates, ips)
    return Plan(subnet, tuple(pods), hosts, tuple(files), tuple(sorted(directories)))


def _secret_data(secret: Manifest) -> dict[str, bytes]:
    data = {k: base64.b64decode(v) for k, v in secret.get("data", {}).items()}
    data.update({k: v.encode() for k, v in secret.get("stringData", {}).items()})
    return data


def _projected(
    entries: dict[str, bytes], items: list[Manifest] | None, default_mode: int
) -> list[tuple[str, bytes, int]]:
    if not items:
        return [(key, value, default_mode) for key, value in sorted(entries.items())]
    return [(item["path"], entries[item["key"]], item.get("mode", default_mode)) for item in items]


def _volumes(
    pod: str,
    workload: Manifest,
    pod_spec: Manifest,
    state_dir: str,
    config_maps: dict[str, Manifest],
    secrets: dict[str, dict[str, bytes]],
    files: list[File],
    directories: set[str],
) -> dict[str, str]:
    """Host path of each pod volume, recording the files and directories to create."""
    paths: dict[str, str] = {}
    for volume in pod_spec.get("volumes", []):
        name = volume["name"]
        if "emptyDir" in volume:
            paths[name] = f"{state_dir}/pods/{pod}/{name}"
        elif "persistentVolumeClaim" in volume:
            paths[name] = f"{state_dir}/claims/{volume['persistentVolumeClaim']['claimName']}"
        elif "hostPath" in volume:
            paths[name] = f"{state_dir}/hostpath{volume['hostPath']['path']}"
        elif "configMap" in volume or "secret" in volume:
            source = volume.get("configMap") or volume["secret"]
            if "configMap" in volume:
                entries = {
                    k: v.encode() for k, v in config_maps[source["name"]].get("data", {}).items()
                }
            else:
                entries = secrets[source["secretName"]]
            paths[name] = f"{state_dir}/pods/{pod}/{name}"
            for path, content, mode in _projected(
                entries, source.get("items"), source.get("defaultMode", 0o644)
            ):
                files.append(File(f"{paths[name]}/{path}", content, mode))
        else:
            raise ValueError(f"{pod}: volume {name} has a type the sandbox does not translate")
        directories.add(paths[name])
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        paths[claim["metadata"]["name"]] = f"{state_dir}/claims/{claim['metadata']['name']}-{pod}"
        directories.add(paths[claim["metadata"]["name"]])
    return paths


def _env(container: Manifest, secrets: dict[str, dict[str, bytes]]) -> tuple[tuple[str, str], ...]:
    values = []
    for entry in container.get("env", []):
        if "value" in entry:
            values.append((entry["name"], entry["value"]))
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            values.append((entry["name"], secrets[ref["name"]][ref["key"]].decode()))
    return tuple(values)


def _containers(
    pod_spec: Manifest, volumes: dict[str, str], secrets: dict[str, dict[str, bytes]]
) -> tuple[Container, ...]:
    out = []
    entries = [
        ("sidecar" if c.get("restartPolicy") == "Always" else "init", c)
        for c in pod_spec.get("initContainers", [])
    ] + [("main", c) for c in pod_spec["containers"]]
    for role, container in entries:
        context = container.get("securityContext", {})
        out.append(
            Container(
                name=container["name"],
                image=container["image"],
                role=role,  # type: ignore[arg-type]
                command=tuple(container.get("command", ())),
                args=tuple(container.get("args", ())),
                env=_env(container, secrets),
                user=context.get("runAsUser"),
                cap_add=tuple(context.get("capabilities", {}).get("add", ())),
                privileged=bool(context.get("privileged")),
                apparmor_unconfined=context.get("appArmorProfile", {}).get("type") == "Unconfined",
                mounts=tuple(
                    Mount(volumes[m["name"]], m["mountPath"], bool(m.get("readOnly")))
                    for m in container.get("volumeMounts", [])
                ),
            )
        )
    return tuple(out)


def _hosts(
    services: list[Manifest],
    pods: list[Pod],
    templates: list[tuple[str, Manifest, bool]],
    ips: dict[str, str],
) -> dict[str, str]:
    hosts = {pod.name: pod.ip for pod in pods if not pod.job}
    labels = {name: w["spec"]["template"]["metadata"]["labels"] for name, w, _ in templates}
    for service in services:
        meta, spec = service["metadata"], service["spec"]
        fqdn = f"{meta['name']}.{meta['namespace']}.svc"
        selected = sorted(
            name
            for name, pod_labels in labels.items()
            if name in hosts and all(pod_labels.get(k) == v for k, v in spec["selector"].items())
        )
        if selected:
            hosts[fqdn] = ips[selected[0]]
        if spec.get("clusterIP") == "None":
            for name in selected:
                hosts[f"{name}.{fqdn}"] = ips[name]
    return dict(sorted(hosts.items()))
