"""The site's scripts (`siteScripts`): the files they become beside slurm.conf, and the
slurm.conf lines that name them.

Every file lives in the cluster's Slurm config ConfigMap, so it is part of the config hash and
rolls out as a slurm.conf change does. Prolog and Epilog scripts are named by paths relative to
slurm.conf: in configless mode slurmctld then sends them to each slurmd with the config, and
slurmd writes them executable into its config cache (Slurm's fetch_config.c ships relative
Prolog/Epilog paths, since 23.11; several of each since 24.05; TaskProlog and TaskEpilog
since 25.11), and again on every `scontrol reconfigure`. slurmctld reads job_submit.lua from
the directory of slurm.conf and loads it again when it changes; cli_filter.lua reaches the
login pods' clients through sackd, which fetches it with the config.
"""

from dataclasses import dataclass

from slurm_stack import paths
from slurm_stack.spec.models import ClusterSpec


@dataclass(frozen=True)
class SiteEntry:
    """One site script: its file beside slurm.conf and the slurm.conf line naming it (the
    value omitted for a Lua plugin's file, which Slurm finds by its fixed name)."""

    key: str
    value: str
    file: str
    content: str

    @property
    def run_by_slurmctld(self) -> bool:
        """slurmctld runs it by the absolute path slurm.conf gives (it resolves no relative
        one), so the controller pod mounts it, executable, at paths.SLURMCTLD_SCRIPTS_DIR."""
        return self.key in ("PrologSlurmctld", "EpilogSlurmctld")


def site_entries(spec: ClusterSpec) -> list[SiteEntry]:
    """Every site script, in the order slurm.conf lists them, which is the order they run.
    They come after slurm-stack's own Epilog line, so that a failing site Epilog cannot keep
    the node from being cleaned (Slurm stops at the first Epilog that fails)."""
    site = spec.site_scripts
    entries = []
    for key, prefix, scripts in (
        ("Prolog", "prolog", site.prolog),
        ("Epilog", "epilog", site.epilog),
        ("PrologSlurmctld", "prolog-slurmctld", site.prolog_slurmctld),
        ("EpilogSlurmctld", "epilog-slurmctld", site.epilog_slurmctld),
    ):
        for script in scripts:
            file = f"{prefix}-{script.name}"
            # Prolog/Epilog relative: configless slurmctld ships them (see the module's doc).
            value = f"{paths.SLURMCTLD_SCRIPTS_DIR}/{file}" if "Slurmctld" in key else file
            entries.append(SiteEntry(key, value, file, script.content))
    for key, file, task_script in (
        ("TaskProlog", "task-prolog", site.task_prolog),
        ("TaskEpilog", "task-epilog", site.task_epilog),
    ):
        if task_script is not None:
            entries.append(SiteEntry(key, file, file, task_script.content))
    for key, file, lua in (
        ("JobSubmitPlugins", "job_submit.lua", site.job_submit_lua),
        ("CliFilterPlugins", "cli_filter.lua", site.cli_filter_lua),
    ):
        if lua is not None:
            entries.append(SiteEntry(key, "lua", file, lua))
    return entries


def site_files(spec: ClusterSpec) -> dict[str, str]:
    """File name -> content of every site script, for the config ConfigMap."""
    return {entry.file: entry.content for entry in site_entries(spec)}


def site_settings(spec: ClusterSpec) -> list[tuple[str, str]]:
    """slurm.conf lines for the site scripts, in the order they run."""
    return [(entry.key, entry.value) for entry in site_entries(spec)]


def slurmctld_script_files(spec: ClusterSpec) -> list[str]:
    """The files of the scripts slurmctld runs itself, for the controller pod's mount."""
    return sorted(entry.file for entry in site_entries(spec) if entry.run_by_slurmctld)
