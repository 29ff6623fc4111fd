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

from slurm_stack import paths
from slurm_stack.spec.models import ClusterSpec

JOB_SUBMIT_LUA = "job_submit.lua"
CLI_FILTER_LUA = "cli_filter.lua"
TASK_PROLOG = "task-prolog"
TASK_EPILOG = "task-epilog"


def prolog_file(name: str) -> str:
    """The file (and Prolog= value) of a site Prolog script."""
    return f"prolog-{name}"


def epilog_file(name: str) -> str:
    """The file (and Epilog= value) of a site Epilog script."""
    return f"epilog-{name}"


def prolog_slurmctld_file(name: str) -> str:
    """The file of a site PrologSlurmctld script."""
    return f"prolog-slurmctld-{name}"


def epilog_slurmctld_file(name: str) -> str:
    """The file of a site EpilogSlurmctld script."""
    return f"epilog-slurmctld-{name}"


def slurmctld_script_files(spec: ClusterSpec) -> dict[str, str]:
    """File name -> content of the scripts slurmctld runs itself. slurmctld runs them by the
    path slurm.conf gives (it resolves no relative one), so the controller pod mounts them,
    executable, at paths.SLURMCTLD_SCRIPTS_DIR."""
    site = spec.site_scripts
    files = {prolog_slurmctld_file(s.name): s.content for s in site.prolog_slurmctld}
    return files | {epilog_slurmctld_file(s.name): s.content for s in site.epilog_slurmctld}


def site_files(spec: ClusterSpec) -> dict[str, str]:
    """File name -> content of every site script."""
    site = spec.site_scripts
    files = {prolog_file(s.name): s.content for s in site.prolog}
    files |= {epilog_file(s.name): s.content for s in site.epilog}
    files |= slurmctld_script_files(spec)
    for script, file in ((site.task_prolog, TASK_PROLOG), (site.task_epilog, TASK_EPILOG)):
        if script is not None:
            files[file] = script.content
    if site.job_submit_lua is not None:
        files[JOB_SUBMIT_LUA] = site.job_submit_lua
    if site.cli_filter_lua is not None:
        files[CLI_FILTER_LUA] = site.cli_filter_lua
    return files


def site_settings(spec: ClusterSpec) -> list[tuple[str, str]]:
    """slurm.conf lines for the site scripts, in the order they run. They come after
    slurm-stack's own Epilog line, so that a failing site Epilog cannot keep the node from
    being cleaned (Slurm stops at the first Epilog that fails)."""
    site = spec.site_scripts
    settings = [("Prolog", prolog_file(s.name)) for s in site.prolog]
    settings += [("Epilog", epilog_file(s.name)) for s in site.epilog]
    settings += [
        ("PrologSlurmctld", f"{paths.SLURMCTLD_SCRIPTS_DIR}/{prolog_slurmctld_file(s.name)}")
        for s in site.prolog_slurmctld
    ]
    settings += [
        ("EpilogSlurmctld", f"{paths.SLURMCTLD_SCRIPTS_DIR}/{epilog_slurmctld_file(s.name)}")
        for s in site.epilog_slurmctld
    ]
    if site.task_prolog is not None:
        settings.append(("TaskProlog", TASK_PROLOG))
    if site.task_epilog is not None:
        settings.append(("TaskEpilog", TASK_EPILOG))
    if site.job_submit_lua is not None:
        settings.append(("JobSubmitPlugins", "lua"))
    if site.cli_filter_lua is not None:
        settings.append(("CliFilterPlugins", "lua"))
    return settings
