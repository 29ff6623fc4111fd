"""The site's read-only files for its scripts (`siteScripts.files`): one ConfigMap, mounted
where the scripts run (worker and controller pods)."""

from slurm_stack import naming, paths
from slurm_stack.k8s.common import CONFIG_FILES_LABEL, Manifest, metadata
from slurm_stack.spec.models import ClusterSpec

COMPONENT = "site-files"
VOLUME = "site-files"


def site_files_config_map(spec: ClusterSpec) -> Manifest | None:
    """Not immutable and not renamed on change: the kubelet refreshes it in running pods, so
    a changed file restarts nothing. None without files."""
    if not spec.site_scripts.files:
        return None
    name = naming.site_files_config_map_name(spec.name)
    return {
        "metadata": metadata(spec, name, COMPONENT, extra_labels={CONFIG_FILES_LABEL: "true"}),
        "data": {f.name: f.content for f in sorted(spec.site_scripts.files, key=lambda f: f.name)},
    }


def site_files_volumes(spec: ClusterSpec) -> list[Manifest]:
    """The ConfigMap as a pod volume, when the site has files."""
    if not spec.site_scripts.files:
        return []
    name = naming.site_files_config_map_name(spec.name)
    return [{"name": VOLUME, "configMap": {"name": name}}]


def site_files_mounts(spec: ClusterSpec) -> list[Manifest]:
    """Where the scripts find the files, read-only."""
    if not spec.site_scripts.files:
        return []
    return [{"name": VOLUME, "mountPath": paths.SITE_FILES_DIR, "readOnly": True}]
