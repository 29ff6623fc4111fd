"""`siteScripts`: what is refused before anything is created, and the files and slurm.conf
lines the rest becomes (tests/cluster/test_site_scripts.py boots them on real Slurm)."""

from typing import Any

import pytest
import yaml

from slurm_stack.k8s.controller import controller_statefulset
from slurm_stack.k8s.site_files import site_files_config_map
from slurm_stack.k8s.workers import pool_statefulset
from slurm_stack.render import slurm_config_files
from slurm_stack.spec import SpecError, load_spec
from slurm_stack.spec.lua import lua_syntax_problem
from tests.conftest import ROOT

SITE_STACK = ROOT / "tests" / "cluster" / "Pulumi.site.yaml"
SCRIPT = "#!/bin/sh\ntrue\n"


def _raw(**site: Any) -> dict[str, Any]:
    raw = yaml.safe_load(SITE_STACK.read_text())["config"]["slurm-stack:cluster"]
    raw["siteScripts"] = site
    return raw


def _issues(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as raised:
        load_spec(raw)
    return {issue.path: issue.message for issue in raised.value.issues}


def test_lua_is_checked_by_lua_5_1_which_slurms_plugins_run() -> None:
    assert lua_syntax_problem("return 7 / 2", "job_submit.lua") is None
    # Floor division came with Lua 5.3: a 5.4 checker would pass it, Slurm's plugin would not.
    assert lua_syntax_problem("return 7 // 2", "job_submit.lua") == (
        "job_submit.lua:1: unexpected symbol near '/'"
    )
    assert lua_syntax_problem("x = 1", "job_submit.lua") is None  # compiled, never run


def test_broken_lua_is_refused_with_its_line_and_key() -> None:
    issues = _issues(_raw(jobSubmitLua="function f()\n  return 1\n", cliFilterLua="x = = 1"))
    assert "job_submit.lua:3: 'end' expected" in issues["siteScripts.jobSubmitLua"]
    assert "not valid Lua 5.1" in issues["siteScripts.jobSubmitLua"]
    assert "cli_filter.lua:1: unexpected symbol near '='" in issues["siteScripts.cliFilterLua"]


def test_a_script_without_a_shebang_or_with_a_taken_name_is_refused() -> None:
    issues = _issues(
        _raw(
            prolog=[{"name": "a", "content": "echo hi"}],
            epilog=[{"name": "b", "content": SCRIPT}, {"name": "b", "content": SCRIPT}],
        )
    )
    assert "starts with '#!'" in issues["siteScripts.prolog[0].content"]
    assert "given more than once: ['b']" in issues["siteScripts.epilog"]
    issues = _issues(_raw(prolog=[{"name": "Bad/Name", "content": SCRIPT}]))
    assert "siteScripts.prolog[0].name" in issues


def test_a_slurm_conf_extra_line_may_not_set_what_a_script_sets() -> None:
    raw = _raw(prolog=[{"name": "a", "content": SCRIPT}], cliFilterLua="return 0")
    raw["controller"]["slurmConfExtra"] = ["Prolog=/etc/slurm/prolog", "CliFilterPlugins=lua"]
    issues = _issues(raw)
    assert issues["controller.slurmConfExtra[0]"] == (
        "Prolog is set by siteScripts.prolog; give the script there and drop this line"
    )
    assert "siteScripts.cliFilterLua" in issues["controller.slurmConfExtra[1]"]
    # Without the script, the line is the user's to give.
    raw = _raw()
    raw["controller"]["slurmConfExtra"] = ["Prolog=/etc/slurm/prolog"]
    load_spec(raw)


def test_scripts_become_files_beside_slurm_conf_named_relatively() -> None:
    spec = load_spec(yaml.safe_load(SITE_STACK.read_text())["config"]["slurm-stack:cluster"])
    files = slurm_config_files(spec)
    assert files["prolog-mark"].startswith("#!/bin/sh\n")
    assert files["epilog-unmark"].startswith("#!/bin/sh\n")
    assert "slurm_job_submit" in files["job_submit.lua"]
    lines = [line for line in files["slurm.conf"].splitlines() if line and line[0] != "#"]
    # Relative paths: configless slurmctld sends them to every slurmd with the config.
    assert "Prolog=prolog-mark" in lines and "JobSubmitPlugins=lua" in lines
    # The site's Epilog runs after slurm-stack's, which cleans the node whatever it does.
    epilogs = [line for line in lines if line.startswith("Epilog=")]
    assert epilogs == ["Epilog=/usr/lib/slurm-stack/epilog", "Epilog=epilog-unmark"]
    assert "CliFilterPlugins=lua" in lines and "TaskProlog=task-prolog" in lines
    assert files["task-prolog"].startswith("#!/bin/sh\n")


def test_slurmctlds_scripts_are_mounted_executable_where_slurm_conf_names_them() -> None:
    spec = load_spec(yaml.safe_load(SITE_STACK.read_text())["config"]["slurm-stack:cluster"])
    conf = slurm_config_files(spec)["slurm.conf"].splitlines()
    directory = "/etc/slurm-stack/slurmctld-scripts"
    assert f"PrologSlurmctld={directory}/prolog-slurmctld-log" in conf
    assert f"EpilogSlurmctld={directory}/epilog-slurmctld-log" in conf
    pod = controller_statefulset(spec, "0123456789")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "slurmctld-scripts"]
    assert volume["configMap"]["items"] == [
        {"key": "epilog-slurmctld-log", "path": "epilog-slurmctld-log", "mode": 0o755},
        {"key": "prolog-slurmctld-log", "path": "prolog-slurmctld-log", "mode": 0o755},
    ]
    [slurmctld] = pod["containers"]
    assert {"name": "slurmctld-scripts", "mountPath": directory, "readOnly": True} in slurmctld[
        "volumeMounts"
    ]
    plain = load_spec(_raw())
    pod = controller_statefulset(plain, "0123456789")["spec"]["template"]["spec"]
    assert "slurmctld-scripts" not in [v["name"] for v in pod["volumes"]]


def test_task_scripts_need_slurm_25_11() -> None:
    raw = _raw(taskProlog={"name": "env", "content": SCRIPT})
    raw["slurmVersion"] = "24.11"
    issues = _issues(raw)
    assert "needs Slurm 25.11 or newer" in issues["siteScripts.taskProlog"]


def test_without_scripts_nothing_changes() -> None:
    raw = _raw()
    files = slurm_config_files(load_spec(raw))
    assert sorted(files) == ["cgroup.conf", "gres.conf", "plugstack.conf", "slurm.conf"]
    assert "Prolog=" not in files["slurm.conf"] and "JobSubmitPlugins" not in files["slurm.conf"]


def test_site_files_are_one_configmap_updated_in_place_and_mounted_where_scripts_run() -> None:
    spec = load_spec(yaml.safe_load(SITE_STACK.read_text())["config"]["slurm-stack:cluster"])
    config_map = site_files_config_map(spec)
    assert config_map is not None
    assert config_map["metadata"]["name"] == "site-site-files"
    assert "immutable" not in config_map  # the kubelet refreshes it in running pods
    assert config_map["data"] == {"greeting": "hello from the site"}
    mount = {"name": "site-files", "mountPath": "/etc/slurm-stack/site-files", "readOnly": True}
    [pool] = spec.worker_pools
    worker = pool_statefulset(spec, pool)["spec"]["template"]["spec"]
    controller = controller_statefulset(spec, "0123456789")["spec"]["template"]["spec"]
    for pod in (worker, controller):
        [main] = pod["containers"]
        assert mount in main["volumeMounts"]
        assert {"name": "site-files", "configMap": {"name": "site-site-files"}} in pod["volumes"]
    plain = load_spec(_raw())
    assert site_files_config_map(plain) is None
    [pool] = plain.worker_pools
    assert "site-files" not in str(pool_statefulset(plain, pool))


def test_site_files_are_refused_when_named_twice_or_too_big_for_a_configmap() -> None:
    issues = _issues(_raw(files=[{"name": "a", "content": "x"}, {"name": "a", "content": "y"}]))
    assert "given more than once: ['a']" in issues["siteScripts.files"]
    issues = _issues(_raw(files=[{"name": "big", "content": "x" * 1_100_000}]))
    assert "their ConfigMap holds at most 1024000" in issues["siteScripts.files"]
