"""The sandbox's CLI session without podman: which stack file runs a cluster (and refusing
another one of the same name), the login hint, and pods shown as `kubectl get pods` shows them."""

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from slurm_stack import cli
from slurm_stack.sandbox import session
from slurm_stack.sandbox.apply import SandboxError, finished_job_pods
from slurm_stack.sandbox.plan import Container, Plan, Pod
from slurm_stack.sandbox.podman import Podman
from slurm_stack.sandbox.session import (
    ROLE_LABEL,
    Collision,
    ContainerState,
    Sandbox,
    cli_command,
    collision_message,
    find_collision,
    format_table,
    kube_status,
    pod_containers,
    pod_rows,
    python_command,
    source_args,
)
from slurm_stack.sandbox.state import SandboxRecord, SandboxState, load_records
from slurm_stack.spec import load_spec
from slurm_stack.stackfile import project_name, stack_file
from tests.conftest import DEV_STACK

# -- fakes ---------------------------------------------------------------------------------


class FakePodman(Podman):
    """Answers `pod ps`/`ps --all` label queries from recorded JSON; runs nothing else."""

    def __init__(
        self,
        pods: Sequence[dict[str, object]] = (),
        containers: Sequence[dict[str, object]] = (),
        sinfo: str = "",
    ) -> None:
        super().__init__()
        self.pods, self.containers, self.sinfo = list(pods), list(containers), sinfo
        self.queries: list[tuple[str, str]] = []

    def labelled(self, kind: str, label: str) -> list[dict[str, object]]:
        self.queries.append((kind, label))
        entries = self.pods if kind == "pod" else self.containers
        key, _, value = label.partition("=")
        return [
            e
            for e in entries
            if key in e["Labels"] and (not value or e["Labels"][key] == value)  # type: ignore[operator,index]
        ]

    def run(self, args: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        if args[0] == "exec" and "sinfo" in args:
            return subprocess.CompletedProcess(list(args), 0, self.sinfo, "")
        raise AssertionError(f"podman {' '.join(args)} must not run here")


def pod_entry(name: str, cluster: str, status: str = "Degraded") -> dict[str, object]:
    """One pod as `podman pod ps --format json` (podman 4.3) lists it, trimmed."""
    return {
        "Cgroup": "/libpod_parent",
        "Containers": [],
        "Created": "2025-06-10T09:12:31.482117361Z",
        "Id": "5b3c" + "0" * 60,
        "InfraId": "8d21" + "0" * 60,
        "Name": name,
        "Namespace": "",
        "Networks": [f"slurm-stack-{cluster}"],
        "Status": status,
        "Labels": {
            "slurm-stack.io/sandbox": cluster,
            "slurm-stack.io/component": "worker",
            "slurm-stack.io/fingerprint": "0f3a5c1e9b2d4a70",
            "slurm-stack.io/termination-grace-seconds": "30",
        },
    }


def container_entry(
    name: str, role: str, state: str, exit_code: int = 0, created: int = 1749546751
) -> dict[str, object]:
    """One container as `podman ps --all --format json` (podman 4.3) lists it, trimmed."""
    return {
        "AutoRemove": False,
        "Command": ["/usr/lib/slurm-stack/entrypoint"],
        "CreatedAt": "3 minutes ago",
        "Exited": state == "exited",
        "ExitedAt": 1749546790 if state == "exited" else -62135596800,
        "ExitCode": exit_code,
        "Id": "a1" * 32,
        "Image": "localhost/slurm-stack/base:25.05",
        "IsInfra": False,
        "Labels": {ROLE_LABEL: role},
        "Names": [name],
        "Pid": 4242 if state == "running" else 0,
        "Pod": "",
        "PodName": "",
        "State": state,
        "Status": "Up 3 minutes" if state == "running" else f"Exited ({exit_code}) 2 minutes ago",
        "Created": created,
    }


def write_stack(path: Path, cluster: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"config": {"slurm-stack:cluster": {"name": cluster}}}))
    return path


# -- which stack file runs a cluster ---------------------------------------------------------


def record(state: Path, stack: str, cluster: str) -> SandboxRecord:
    return SandboxRecord(state, stack, cluster)


BASE = Path("/var/lib/slurm-stack/sandbox")
DEV = record(BASE / "dev", "/home/ann/slurm-stack/Pulumi.dev.yaml", "dev")


def test_the_same_name_from_another_stack_file_is_refused_naming_the_running_one() -> None:
    ours = record(BASE / "x", "/home/ann/other/Pulumi.x.yaml", "dev")
    running = {"dev": ["dev-controller-0", "dev-cpu-0"]}
    collision = find_collision(ours, [DEV], running)
    assert collision == Collision("cluster", DEV)
    message = collision_message(collision, ours, "up")
    assert "/home/ann/slurm-stack/Pulumi.dev.yaml" in message  # the running one's stack file
    assert "sandbox down --config /home/ann/slurm-stack/Pulumi.dev.yaml" in message
    assert "another `name` in /home/ann/other/Pulumi.x.yaml" in message
    # Stopping it from the other file would stop the running one's pods: refused too.
    assert find_collision(ours, [DEV], running, stopping=True) == Collision("cluster", DEV)


def test_no_collision_with_itself_or_with_a_stopped_sandbox() -> None:
    assert find_collision(DEV, [DEV], {"dev": ["dev-controller-0"]}) is None
    ours = record(BASE / "x", "/home/ann/other/Pulumi.x.yaml", "dev")
    assert find_collision(ours, [DEV], {"dev": []}) is None  # `down` ran: nothing runs
    other = record(BASE / "prod", "/home/ann/Pulumi.prod.yaml", "prod")  # unrelated, running
    assert find_collision(DEV, [DEV, other], {"dev": ["dev-cpu-0"], "prod": ["p-0"]}) is None


def test_a_copy_of_the_stack_file_may_stop_the_sandbox_but_not_replace_it() -> None:
    # The same stack name (state directory) and cluster from a copy elsewhere: the real-cluster
    # tests write their stack file afresh each run and clean up what a killed run left.
    copy = record(BASE / "dev", "/tmp/run2/Pulumi.dev.yaml", "dev")
    running = {"dev": ["dev-controller-0"]}
    assert find_collision(copy, [DEV], running, stopping=True) is None
    collision = find_collision(copy, [DEV], running)
    assert collision == Collision("stack-file", DEV)
    assert "another file name" in collision_message(collision, copy, "up")


def test_another_cluster_in_the_same_state_directory_is_refused() -> None:
    ours = record(BASE / "dev", "/home/bob/Pulumi.dev.yaml", "bob")
    for stopping in (False, True):  # `down --delete-data` would delete its volumes
        collision = find_collision(ours, [DEV], {"dev": ["dev-cpu-0"]}, stopping=stopping)
        assert collision == Collision("state", DEV)
    message = collision_message(Collision("state", DEV), ours, "up")
    assert "stack name (Pulumi.<stack>.yaml) picks the state directory" in message
    # The same file, its cluster renamed while running: down from it would miss the old pods.
    renamed = record(BASE / "dev", DEV.stack_file, "dev2")
    message = collision_message(Collision("state", DEV), renamed, "up")
    assert "set its `name` back to 'dev'" in message


def test_a_cluster_started_before_records_counts_unless_its_pods_are_this_sandboxs() -> None:
    ours = record(BASE / "x", "/home/ann/other/Pulumi.x.yaml", "dev")
    running = {"dev": ["dev-controller-0"]}
    collision = find_collision(ours, [], running)
    assert collision == Collision("unrecorded", None)
    assert "sandbox down, with the --stack or --config" in collision_message(collision, ours, "up")
    assert find_collision(ours, [], running, known_pods={"dev-controller-0": "10.89.1.3"}) is None


def test_state_records_round_trip_and_broken_ones_are_skipped(tmp_path: Path) -> None:
    stack = write_stack(tmp_path / "a" / "Pulumi.dev.yaml", "dev")
    saved = SandboxState(tmp_path / "state" / "dev").save_record(stack, "dev", "slurm-stack")
    assert saved == SandboxRecord(tmp_path / "state" / "dev", str(stack.resolve()), "dev")
    (tmp_path / "state" / "broken").mkdir()
    (tmp_path / "state" / "broken" / "sandbox.json").write_text("{not json")
    (tmp_path / "state" / "old").mkdir()  # a sandbox from before records: no file
    (tmp_path / "state" / "a-file").write_text("")
    assert load_records(tmp_path / "state") == [saved]
    assert load_records(tmp_path / "missing") == []


def test_up_refuses_a_name_another_stack_file_runs_before_touching_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    base = tmp_path / "state"
    monkeypatch.setattr(session, "DEFAULT_ROOT", base)  # the CLI's state
    first = write_stack(tmp_path / "Pulumi.dev.yaml", "dev")
    SandboxState(base / "dev").save_record(first, "dev", "slurm-stack")
    podman = FakePodman(pods=[pod_entry("dev-controller-0", "dev")])
    other = write_stack(tmp_path / "other" / "Pulumi.x.yaml", "dev")
    sandbox = Sandbox(Path("other/Pulumi.x.yaml"), state_base=base, podman=podman)
    with pytest.raises(SandboxError) as refused:
        sandbox.up(build=False)
    message = str(refused.value)
    assert f"started from {first} (state {base / 'dev'})" in message
    assert f"refusing `sandbox up` from {other}" in message
    assert "-m slurm_stack sandbox down --stack dev" in message  # its stack file is in cwd
    assert not (base / "x").exists()  # nothing rendered, nothing recorded
    assert ("pod", "slurm-stack.io/sandbox=dev") in podman.queries
    with pytest.raises(SandboxError, match="refusing `sandbox down`"):
        sandbox.down()
    # Once the first one is down, the second may start: it is recorded as running "dev".
    podman.pods.clear()
    sandbox.claim("up")
    assert SandboxState(base / "x").load_record() == SandboxRecord(
        base / "x", str(other.resolve()), "dev"
    )


def test_a_sandbox_kept_beside_the_clis_is_found_and_named(tmp_path: Path) -> None:
    # The real-cluster tests and the benchmarks keep theirs in other state bases.
    tests = tmp_path / "test-sandbox"
    first = write_stack(tmp_path / "pytest-1" / "Pulumi.itest.yaml", "itest")
    SandboxState(tests / "itest").save_record(first, "itest", "slurm-stack")
    mine = write_stack(tmp_path / "mine" / "Pulumi.itest.yaml", "itest")
    podman = FakePodman(pods=[pod_entry("itest-controller-0", "itest")])
    sandbox = Sandbox(mine, state_base=tmp_path / "sandbox", podman=podman)
    with pytest.raises(SandboxError) as refused:
        sandbox.claim("run-cronjob")
    message = str(refused.value)
    assert f"started from {first} (state {tests / 'itest'})" in message
    assert (
        "podman pod rm --force $(podman pod ps --quiet --filter "
        "label=slurm-stack.io/sandbox=itest)" in message
    )


def test_a_copy_of_the_stack_file_may_clean_up_after_a_killed_run(tmp_path: Path) -> None:
    base = tmp_path / "state"
    first = write_stack(tmp_path / "run1" / "Pulumi.itest.yaml", "itest")
    SandboxState(base / "itest").save_record(first, "itest", "slurm-stack")
    copy = write_stack(tmp_path / "run2" / "Pulumi.itest.yaml", "itest")
    podman = FakePodman(pods=[pod_entry("itest-controller-0", "itest")])
    sandbox = Sandbox(copy, state_base=base, podman=podman)
    sandbox.refuse_collision("down", stopping=True)  # what tests/cluster's boot_stack runs
    with pytest.raises(SandboxError, match="would replace its pods"):
        sandbox.claim("up")


# -- the login hint ------------------------------------------------------------------------


def hint_plan() -> Plan:
    login = Pod("dev-login-0", "10.89.7.9", "login", 4, False, ())
    return Plan("10.89.7.0/24", (login,), {})


def parsed_source(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The stack file and project the CLI selects for ``argv`` (its own parser)."""
    seen = []
    monkeypatch.setattr(cli, "_sandbox", lambda args: seen.append(args) or 0)
    assert cli.main(argv) == 0
    args = seen[0]
    return (args.config or stack_file(args.stack, args.project_dir)), project_name(args.project_dir)


def test_login_hint_repeats_the_users_config_argument_with_the_venv_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_stack(tmp_path / "other" / "Pulumi.x.yaml", "x")
    python = tmp_path / ".venv" / "bin" / "python"
    monkeypatch.setattr(sys, "executable", str(python))
    sandbox = Sandbox(Path("other/Pulumi.x.yaml"), state_base=tmp_path / "state")
    sandbox._plan = hint_plan()
    login, ssh = sandbox.login_hint(cwd=tmp_path, sudo=False).splitlines()
    assert (
        login == "log in:  .venv/bin/python -m slurm_stack sandbox ssh --config other/Pulumi.x.yaml"
    )
    assert ssh.startswith("   or:   ssh -i ") and ssh.endswith(" sandbox@10.89.7.9")
    # The CLI's `sandbox ssh` takes these arguments and selects the same stack file.
    argv = login.split(" -m slurm_stack ")[1].split()
    file, _ = parsed_source(argv, monkeypatch)
    assert file.resolve() == (tmp_path / "other" / "Pulumi.x.yaml").resolve()
    # Under sudo both lines need it: the sandbox and its key are root's.
    login, ssh = sandbox.login_hint(cwd=tmp_path, sudo=True).splitlines()
    assert login.startswith("log in:  sudo .venv/bin/python -m slurm_stack sandbox ssh ")
    assert ssh.startswith("   or:   sudo ssh -i ")


def test_a_stack_named_in_the_project_directory_keeps_its_stack_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Pulumi.yaml").write_text("name: slurm-stack\n")
    dev = write_stack(tmp_path / "Pulumi.dev.yaml", "dev")  # `--stack dev`: cwd / name
    assert source_args(dev, "slurm-stack", tmp_path) == ["--stack", "dev"]
    assert source_args(Path("Pulumi.dev.yaml"), "slurm-stack", tmp_path) == [
        "--config",
        "Pulumi.dev.yaml",
    ]
    # `--stack s --project-dir proj` with another project name comes back as it was given.
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "Pulumi.yaml").write_text("name: hpc\n")
    given = write_stack(Path("proj") / "Pulumi.s.yaml", "s")
    args = source_args(given, "hpc", tmp_path)
    assert args == ["--stack", "s", "--project-dir", "proj"]
    file, project = parsed_source(["sandbox", "ssh", *args], monkeypatch)
    assert (file, project) == (given, "hpc")


def test_the_interpreter_is_named_as_this_process_ran_it(tmp_path: Path) -> None:
    assert python_command(str(tmp_path / ".venv/bin/python"), tmp_path) == ".venv/bin/python"
    assert python_command("/usr/bin/python3", tmp_path) == "/usr/bin/python3"
    assert python_command(str(tmp_path / "python"), tmp_path) == "./python"
    command = cli_command(
        "down",
        Path("/srv/a b/Pulumi.dev.yaml"),
        cwd=tmp_path,
        executable=str(tmp_path / ".venv/bin/python"),
        sudo=False,
    )
    assert (
        command
        == ".venv/bin/python -m slurm_stack sandbox down --config '/srv/a b/Pulumi.dev.yaml'"
    )


# -- pods as Kubernetes shows them ---------------------------------------------------------


def c(name: str, role: str, state: str = "", exit_code: int = 0) -> ContainerState:
    return ContainerState(name, role, state, exit_code)


def test_a_running_pod_whose_init_containers_exited_is_running() -> None:
    # podman calls this pod "Degraded": wait-for-jail exited (0) as init containers do.
    login = [
        c("munge", "sidecar", "running"),
        c("sackd", "sidecar", "running"),
        c("wait-for-jail", "init", "exited"),
        c("sshd", "main", "running"),
    ]
    assert kube_status(login) == ("3/3", "Running")
    sidecar_down = [c("munge", "sidecar", "exited", 1), *login[1:]]
    assert kube_status(sidecar_down) == ("2/3", "Running")


def test_job_pods_complete_or_fail_by_their_main_containers_exit_code() -> None:
    assert kube_status([c("populate", "main", "exited")]) == ("0/1", "Completed")
    assert kube_status([c("populate", "main", "exited", 2)]) == ("0/1", "Error")
    users = [c("munge", "sidecar", "running"), c("sync-users", "main", "exited")]
    assert kube_status(users) == ("1/2", "Completed")


def listed_pod(name: str, job: bool, **states: str) -> dict[str, object]:
    """A pod as `podman pod ps --format json` lists it, infra container included."""
    return {
        "Name": name,
        "Labels": {"slurm-stack.io/job": "true"} if job else {},
        "Containers": [
            {"Names": f"{name[:8]}-infra", "Status": "running"},
            *({"Names": f"{name}--{c}", "Status": state} for c, state in states.items()),
        ],
    }


def test_a_job_pod_is_finished_once_none_of_its_containers_runs() -> None:
    pods = [
        listed_pod("c-users-1", True, munge="exited", sync="exited"),
        listed_pod("c-users-2", True, munge="running", sync="exited"),  # its sidecar not yet
        listed_pod("c-users-3", True, munge="running", sync="running"),
        listed_pod("c-login-0", False, munge="exited", sshd="exited"),  # no Job's pod
    ]
    assert finished_job_pods(pods) == {"c-users-1"}


def test_pods_still_starting_show_their_init_progress_or_pending() -> None:
    worker = [c("munge", "sidecar", "running"), c("wait-for-jail", "init", "running")]
    assert kube_status([*worker, c("slurmd", "main")]) == ("1/2", "Init:1/2")
    assert kube_status([c("munge", "sidecar", "created"), c("slurmd", "main")]) == (
        "0/2",
        "Init:0/1",
    )
    failed = [c("munge", "sidecar", "running"), c("wait-for-jail", "init", "exited", 1)]
    assert kube_status([*failed, c("slurmd", "main")]) == ("1/2", "Init:Error")
    assert kube_status([c("mariadb", "main", "created")]) == ("0/1", "Pending")
    assert kube_status([c("mariadb", "main")]) == ("0/1", "Pending")


def test_a_main_container_that_stops_shows_as_kubernetes_would() -> None:
    crashed = [c("munge", "sidecar", "running"), c("slurmctld", "main", "exited", 137)]
    assert kube_status(crashed) == ("1/2", "Error")
    assert kube_status([c("a", "main", "running"), c("b", "main", "exited")]) == (
        "1/2",
        "NotReady",
    )
    assert kube_status([c("slurmd", "main", "stopping")]) == ("0/1", "Terminating")


HEADER = ("NAME", "READY", "STATUS")
DEV_PLANNED = {
    "dev-controller-0": [("munge", "sidecar"), ("slurmctld", "main")],
    "dev-cpu-0": [("munge", "sidecar"), ("wait-for-jail", "init"), ("slurmd", "main")],
    "dev-cpu-1": [("munge", "sidecar"), ("wait-for-jail", "init"), ("slurmd", "main")],
    "dev-login-0": [
        ("munge", "sidecar"),
        ("sackd", "sidecar"),
        ("wait-for-jail", "init"),
        ("sshd", "main"),
    ],
}
PODS = [pod_entry(name, "dev") for name in ("dev-login-0", "dev-cpu-1", "dev-controller-0")]
PODS.append(pod_entry("dev-cpu-0", "dev", status="Running"))
CONTAINERS = [
    container_entry("dev-controller-0--munge", "sidecar", "running"),
    container_entry("dev-controller-0--slurmctld", "main", "running"),
    container_entry("dev-cpu-0--munge", "sidecar", "running"),
    container_entry("dev-cpu-0--wait-for-jail", "init", "running"),
    container_entry("dev-cpu-1--munge", "sidecar", "running"),
    container_entry("dev-cpu-1--wait-for-jail", "init", "exited"),
    container_entry("dev-cpu-1--slurmd", "main", "exited", 1),
    container_entry("dev-cpu-10--slurmd", "main", "running"),  # another pod's, same prefix
    container_entry("dev-login-0--sshd", "main", "running", created=1749546760),
    container_entry("dev-login-0--wait-for-jail", "init", "exited", created=1749546755),
    container_entry("dev-login-0--sackd", "sidecar", "running"),
    container_entry("dev-login-0--munge", "sidecar", "running"),
]


def test_podmans_listing_becomes_kubectls_table() -> None:
    rows = pod_rows(PODS, CONTAINERS, DEV_PLANNED)
    assert rows == [
        ("dev-controller-0", "2/2", "Running"),
        ("dev-cpu-0", "1/2", "Init:1/2"),  # slurmd not created yet: it counts, not ready
        ("dev-cpu-1", "1/2", "Error"),
        ("dev-login-0", "3/3", "Running"),  # podman: Degraded
    ]
    assert format_table(rows, HEADER).splitlines() == [
        "NAME               READY   STATUS",
        "dev-controller-0   2/2     Running",
        "dev-cpu-0          1/2     Init:1/2",
        "dev-cpu-1          1/2     Error",
        "dev-login-0        3/3     Running",
    ]


def test_containers_follow_the_plans_order_and_podmans_without_a_plan() -> None:
    login = pod_containers("dev-login-0", CONTAINERS, DEV_PLANNED["dev-login-0"])
    assert [x.name.split("--")[1] for x in login] == ["munge", "sackd", "wait-for-jail", "sshd"]
    # A pod the plan no longer has: its containers as podman has them, roles from labels.
    unplanned = pod_containers("dev-login-0", CONTAINERS)
    assert [(x.name.split("--")[1], x.role) for x in unplanned] == [
        ("sackd", "sidecar"),
        ("munge", "sidecar"),
        ("wait-for-jail", "init"),
        ("sshd", "main"),
    ]


def test_status_shows_pods_as_kubernetes_then_sinfo(tmp_path: Path) -> None:
    podman = FakePodman(PODS, CONTAINERS, sinfo="NODELIST   NODES PARTITION STATE\n")
    sandbox = Sandbox(DEV_STACK, state_base=tmp_path / "sandbox", podman=podman)
    cluster = yaml.safe_load(DEV_STACK.read_text())["config"]["slurm-stack:cluster"]
    sandbox._spec = load_spec(cluster)
    sandbox._plan = Plan(
        "10.89.7.0/24",
        tuple(
            Pod(
                name,
                "10.89.7.2",
                name.split("-")[1],
                2,
                False,
                tuple(
                    Container(container, "img", role)
                    for container, role in containers  # type: ignore[arg-type]
                ),
            )
            for name, containers in DEV_PLANNED.items()
        ),
        {},
    )
    # Pods of this name that no sandbox recorded starting: said, then shown all the same.
    assert sandbox.status().splitlines()[1] == (
        "warning: cluster 'dev' runs from a stack file this sandbox has no record of, not from "
        "this one"
    )
    sandbox.state.save_record(DEV_STACK, "dev", "slurm-stack")
    lines = sandbox.status().splitlines()
    state = tmp_path / "sandbox" / "dev"
    assert lines[0] == (
        f"sandbox dev (stack file {DEV_STACK}, network slurm-stack-dev, state {state})"
    )
    assert lines[1:6] == format_table(pod_rows(PODS, CONTAINERS, DEV_PLANNED), HEADER).splitlines()
    assert "Degraded" not in "\n".join(lines)
    assert lines[-1].startswith("NODELIST")
    assert ("pod", "slurm-stack.io/sandbox=dev") in podman.queries
    assert ("container", ROLE_LABEL) in podman.queries
