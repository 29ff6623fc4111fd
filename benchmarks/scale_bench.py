"""Controller scale benchmark: our rendered slurm.conf against a real slurmctld with thousands
of emulated dynamic nodes, side by side with a stock slurm.conf on the same machine.

    .venv/bin/python benchmarks/scale_bench.py [--nodes 500,1000,2000] [--jobs 5000]
        [--clients 4] [--complete-cap-seconds 1800] [--largest] [--keep-free-gib 6]
        [--rebuild] [--log-dir DIR]

Runs as root with podman; takes minutes per node count (docs/performance.md has the figures
and the machine they came from). Everything runs in one container per configuration and node
count, named scale-bench-<config>-<N>, on a private internal podman network (scale-bench),
from an image built on the worker image plus slurmctld and Debian's slurm-wlm-emulator
(localhost/scale-bench:26.05-0.1.0, built once and kept). In the container: one munged, the
ordinary slurmctld (/usr/sbin/slurmctld-wlm) and N slurmd processes (Debian's
slurmd-wlm-emulator; Debian builds Slurm with multiple-slurmd support, so each runs as its own
node with `-N <name>` on its own port).

Two configurations run at each N, ours first, then the baseline:
- ours: the slurm.conf, plugstack.conf, cgroup.conf and gres.conf that `python -m slurm_stack
  render` writes for benchmarks/Pulumi.scale.yaml with N replicas (configless, dynamic nodes
  `slurmd -Z --conf <the pool's node conf>` from the rendered StatefulSet, a NodeSet, the chroot
  SPANK plugin entering a jail, our Epilog). Adapted to run many nodes in one container:
  see ADAPTED, and SETUP_SH for the Epilog's process sweep, which is cut here.
- baseline: a minimal stock slurm.conf with a static node list of the same N nodes (1 CPU,
  the same RealMemory), no plugstack, no NodeSet, no Epilog, read from the local file.

Prints `name: value` lines; for each figure F of ours, also F_baseline and F_ratio
(ours/baseline):
- register_seconds_N: from launching the first slurmd until all N nodes are idle (slurmds
  started by 8 parallel launchers);
- reconfigure_seconds_N: a comment appended to slurm.conf, then `scontrol reconfigure` until
  every node's slurmd has restarted (new SlurmdStartTime) and responds; for ours also until
  every node's configless cache holds the new slurm.conf;
- submit_jobs_per_second_N: --jobs (default 5000) individual `sbatch --wrap true` calls from
  --clients (default 4) concurrent clients, into the partition set DOWN so none starts yet;
  jobs over the time until the last call returned;
- complete_jobs_per_second_N: the partition set UP, the jobs that left the queue over the
  time until no job is pending, running or completing, or until --complete-cap-seconds;
- jobs_left_N: jobs still queued when that cap stopped the wait (0: the queue emptied);
- failed_submissions_N: sbatch calls (of 3 tries each) that left no queued job;
- succeeded_jobs_N: jobs whose batch script exited 0 (slurmctld's log), to check that the
  jobs counted as complete really ran;
- slurmctld_rss_mib_N: slurmctld's resident memory after the jobs;
- slurm_conf_bytes_N: size of slurm.conf as rendered (ours: the ConfigMap's text, before the
  adaptation) or written (baseline);
- slurmd_mib_per_node_N: host memory one emulated slurmd takes (MemAvailable before launch
  minus after registration, over N); informational, no ratio;
- submit_vs_slurm_claim_percent_N / complete_vs_slurm_claim_percent_N: ours against the
  1,000 submissions and 500 executions per second of Slurm's overview (doc/html/slurm.shtml);
- capacity_nodes and capacity_limit: how many emulated nodes this machine holds with
  --keep-free-gib left free and under the kernel's pid_max, and which of the two binds;
- with --largest: register_seconds_<capacity> and slurmctld_rss_mib_<capacity> of ours (up
  to 10,000 nodes), registration only.
A node count that does not fit is skipped with `skipped_N: <reason>`.
"""

import argparse
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from slurm_stack.k8s.workers import SLURMD_CAPABILITIES

ROOT = Path(__file__).resolve().parent.parent
STACK_FILE = ROOT / "benchmarks" / "Pulumi.scale.yaml"
WORKER_IMAGE = "localhost/slurm-stack/worker:26.05-0.1.0"
IMAGE = "localhost/scale-bench:26.05-0.1.0"
NETWORK = "scale-bench"
# The rendered SlurmctldHost is `<cluster>-controller-0(<service>)`: the container takes that
# hostname and maps the service name to its own address, so that line runs unchanged.
HOSTNAME = "bench-controller-0"
NODE_PREFIX = "bench-cpu-"
FIRST_PORT = 20000  # node i listens on FIRST_PORT + i (below Linux's ephemeral ports)
LARGEST = 10000
SLURM_CLAIM_SUBMIT = 1000  # per second, doc/html/slurm.shtml ("Performance")
SLURM_CLAIM_EXECUTE = 500
# slurmd's connection threads (default 6): two keep one emulated node at 8 threads, and the
# kernel's pid_max counts threads. Same for both configurations; a command-line addition, not
# a slurm.conf line.
SLURMD_PARAMETERS = "conmgr_threads=2"
THREADS_PER_SLURMD = 8

CONTAINERFILE = f"""FROM {WORKER_IMAGE}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends slurmctld slurm-wlm-emulator \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""

# What differs from the rendered files, and why (ours only):
# - SlurmdSpoolDir and SlurmdPidFile get a `%n` (the node's name): here every slurmd shares
#   one filesystem, in Kubernetes each pod has its own.
# Nothing else in the files: SlurmctldHost resolves through the container's hostname and
# /etc/hosts, the plugstack's jail is the container's root bound at /mnt/jail, and the node
# conf and --conf-server are the StatefulSet's, plus each node's Port. The Epilog is the worker
# image's less its sweep for leftover processes (SETUP_SH says why).
ADAPTED = {
    "SlurmdSpoolDir": "/var/spool/slurmd/%n",
    "SlurmdPidFile": "/run/slurm/slurmd-%n.pid",
}

SETUP_SH = r"""set -eu
ip=$(hostname -i | awk '{print $1}')
echo "$ip $CONF_SERVER_HOST" >> /etc/hosts
install -d /etc/slurm && cp /bench/conf/* /etc/slurm/
install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm
install -d -o slurm -g slurm /run/slurm
install -d -m 0755 /var/spool/slurmd
# The jail the chroot plugin enters: the container's own root.
mkdir -p /mnt/jail && mount --bind / /mnt/jail
install -d -m 0700 /var/lib/slurm-stack/job-tmp /dev/shm/slurm-stack-jobs
useradd -m -u 5000 bench
# The worker image's Epilog without its sweep for leftover processes (`ps -e`, then kill the
# job user's processes no slurmstepd tracks): in a pod it reads that node's few processes, but
# here every node's processes share one pid namespace, so each job's Epilog would read all N
# slurmds' and kill the other nodes' (docs/performance.md). Its job directory cleanup stays,
# and slurmctld still waits for every Epilog as in the cluster.
sed -i '/^\[ "\$uid" != 0 \] || exit 0$/,$d' /usr/lib/slurm-stack/epilog
echo 'exit 0' >> /usr/lib/slurm-stack/epilog
if grep -q 'ps -e' /usr/lib/slurm-stack/epilog; then echo 'epilog sweep still there' >&2; exit 1; fi
# One munged for every daemon here (a pod has its own): more threads than its default 2.
install -d -o munge -g munge -m 0755 /run/munge
runuser -u munge -- munged --num-threads=32
/usr/sbin/slurmctld-wlm -L /var/log/slurm/slurmctld.log
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && exit 0; sleep 0.2; done
echo "slurmctld did not start" >&2; tail -20 /var/log/slurm/slurmctld.log >&2; exit 1
"""

# One slurmd, node number $1, unless less than KEEP_FREE_MIB is available. MODE dynamic:
# `slurmd -Z` with the pool's node conf; static: the node of the local slurm.conf.
START_ONE_SH = r"""i=$1
name="$NODE_PREFIX$i"
free=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
if [ "$free" -lt "$KEEP_FREE_MIB" ]; then
  echo "not starting $name: ${free} MiB available" >&2; exit 1
fi
if [ "$MODE" = dynamic ]; then
  exec slurmd -Z -N "$name" --conf-server "$CONF_SERVER" -L "/var/log/slurm/$name.log" \
    --conf "$NODE_CONF Port=$((FIRST_PORT + i))" --parameters "$SLURMD_PARAMETERS"
fi
exec slurmd -N "$name" -L "/var/log/slurm/$name.log" --parameters "$SLURMD_PARAMETERS"
"""

NOW = "date +%s.%N"

# Launch nodes 0..$1-1 with 8 launchers and wait until $1 nodes are idle (at most 900 s).
REGISTER_SH = rf"""n=$1
start=$({NOW})
seq 0 $((n - 1)) | xargs -P 8 -n 1 bash /bench/start_one.sh 2>/tmp/launch.err &
while :; do
  idle=$(sinfo -h -t idle -o %D 2>/dev/null | awk '{{s += $1}} END {{print s + 0}}')
  [ "$idle" -ge "$n" ] && break
  if [ "$(awk -v s="$start" -v now="$({NOW})" 'BEGIN {{print (now - s > 900)}}')" = 1 ]; then
    echo "timeout $idle"; exit 1
  fi
  sleep 0.2
done
echo "seconds $(awk -v s="$start" -v e="$({NOW})" 'BEGIN {{print e - s}}')"
wait
"""

# The node start times, `name start` per responding node.
NODE_STARTS = r"""scontrol show node -o 2>/dev/null | awk '
  /State=[^ ]*(DOWN|NOT_RESPONDING)/ { next }
  { for (i = 1; i <= NF; i++) {
      if ($i ~ /^NodeName=/) name = substr($i, 10)
      if ($i ~ /^SlurmdStartTime=/) start = substr($i, 17) }
    print name, start }'"""

# Reconfigure with a changed slurm.conf; wait until all $1 nodes restarted (and, with
# CHECK_CACHE, hold the new file in their configless cache).
RECONFIGURE_SH = rf"""n=$1 marker="# scale-bench reconfigure $({NOW})"
starts() {{ {NODE_STARTS}; }}
before=$(starts)
[ "$(wc -l <<<"$before")" -ge "$n" ] || {{ echo "only $(wc -l <<<"$before") nodes"; exit 1; }}
echo "$marker" >> /etc/slurm/slurm.conf
sleep 1.1  # a restarted slurmd's start time (whole seconds) must differ from the recorded one
start=$({NOW}) since=$(date +%Y-%m-%dT%H:%M:%S)
until scontrol reconfigure >/dev/null 2>&1; do sleep 0.2; done
while :; do
  if now=$(starts) && [ -n "$now" ]; then
    # A start time at or after the reconfigure (a restarted slurmctld may show none at first).
    restarted=$(awk -v t="$since" '$2 ~ /^[0-9]/ && $2 >= t' <<<"$now" | wc -l)
    cached=$n
    if [ "$CHECK_CACHE" = 1 ]; then
      cached=$(grep -lxF "$marker" /var/spool/slurmd/*/conf-cache/slurm.conf 2>/dev/null | wc -l)
    fi
    [ "$restarted" -ge "$n" ] && [ "$cached" -ge "$n" ] && break
  fi
  if [ "$(awk -v s="$start" -v now="$({NOW})" 'BEGIN {{print (now - s > 900)}}')" = 1 ]; then
    echo "timeout restarted=$restarted cached=$cached"; exit 1
  fi
  sleep 0.5
done
echo "seconds $(awk -v s="$start" -v e="$({NOW})" 'BEGIN {{print e - s}}')"
"""

# $1 jobs from $2 concurrent clients, each an `sbatch --wrap true` (3 tries), into the
# partition set DOWN (it queues them but starts none, so the nodes' work does not take CPU
# from the submissions); then the partition goes UP and this waits until no job is left (at
# most 1800 s). Root submits them for user bench (--uid), with no runuser per call.
# `succeeded`: jobs whose batch script exited 0, from slurmctld's log.
JOBS_SH = rf"""jobs=$1 clients=$2  # $3: --complete-cap-seconds
cd /tmp
scontrol update PartitionName=main State=DOWN
start=$({NOW})
seq "$jobs" | xargs -P "$clients" -n 50 bash -c '
  for _ in "$@"; do
    for try in 1 2 3; do
      sbatch --uid=bench -Q -o /dev/null --wrap true >/dev/null && break
      [ "$try" = 3 ] && echo failed
    done
  done' _ > /tmp/submit.failed
submitted=$({NOW})
until out=$(squeue -h -t PD -o %i 2>/dev/null); do sleep 0.5; done
queued=$(printf '%s\n' "$out" | grep -c .)
scontrol update PartitionName=main State=UP
released=$({NOW})
# Jobs done, by slurmctld's log (squeue times out now and then under load); none ran before.
finished() {{ grep -c '_job_complete: JobId=[0-9]* done$' /var/log/slurm/slurmctld.log; }}
while :; do
  [ "$(finished)" -ge "$queued" ] && break
  elapsed=$(awk -v s="$released" -v now="$({NOW})" 'BEGIN {{print int(now - s)}}')
  [ "$elapsed" -ge "${{3%.*}}" ] && break
  sleep 0.2
done
done_at=$({NOW})
echo "left $((queued - $(finished)))"
echo "failed $(wc -l < /tmp/submit.failed)"
ok='_job_complete: JobId=[0-9]* WEXITSTATUS 0$'
echo "succeeded $(grep -c "$ok" /var/log/slurm/slurmctld.log)"
echo "submit_seconds $(awk -v s="$start" -v e="$submitted" 'BEGIN {{print e - s}}')"
echo "queued $queued"
echo "complete_seconds $(awk -v s="$released" -v e="$done_at" 'BEGIN {{print e - s}}')"
"""


@dataclass(frozen=True)
class Config:
    """One side of the comparison: the files in /etc/slurm and how its slurmds start."""

    label: str
    files: dict[str, str]
    env: dict[str, str]
    conf_bytes: int
    check_cache: bool


@dataclass(frozen=True)
class Plan:
    """The command line's settings for every measurement."""

    jobs: int
    clients: int
    keep_free_mib: float
    log_dir: Path
    complete_cap_seconds: float


@dataclass(frozen=True)
class Figures:
    """What one configuration measured at one node count."""

    register_seconds: float
    reconfigure_seconds: float
    submit_jobs_per_second: float
    complete_jobs_per_second: float
    slurmctld_rss_mib: float
    slurm_conf_bytes: int
    slurmd_mib_per_node: float
    failed_submissions: int
    succeeded_jobs: int
    jobs_left: int


def run(cmd: list[str], check: bool = True, input_text: str | None = None) -> str:
    """A command's stdout; on failure (with check) its output goes to stderr first."""
    done = subprocess.run(cmd, input=input_text, capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {done.returncode}")
    return done.stdout


def emit(name: str, value: object) -> None:
    """One `name: value` line, at once."""
    if isinstance(value, float):
        value = f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    print(f"{name}: {value}", flush=True)


def ensure_image(rebuild: bool) -> None:
    """Build the benchmark image unless it exists (the first build takes a minute or two)."""
    exists = subprocess.run(["podman", "image", "exists", IMAGE]).returncode == 0
    if exists and not rebuild:
        return
    run(["podman", "build", "-t", IMAGE, "-f", "-", str(ROOT)], input_text=CONTAINERFILE)


def ensure_network() -> None:
    """A private internal network: no host networking, no way out, away from other clusters."""
    if subprocess.run(["podman", "network", "exists", NETWORK]).returncode != 0:
        run(["podman", "network", "create", "--internal", NETWORK])


def render_ours(nodes: int, workdir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The files and worker environment `slurm_stack render` makes for `nodes` replicas."""
    stack = yaml.safe_load(STACK_FILE.read_text())
    stack["config"]["slurm-stack:cluster"]["workerPools"][0]["replicas"] = nodes
    stack_file = workdir / "Pulumi.scale.yaml"
    stack_file.write_text(yaml.safe_dump(stack))
    out = workdir / "rendered"
    run(
        [
            sys.executable,
            "-m",
            "slurm_stack",
            "render",
            "--config",
            str(stack_file),
            "--out",
            str(out),
            "--project-dir",
            str(ROOT),
        ]
    )
    names = ("slurm.conf", "plugstack.conf", "cgroup.conf", "gres.conf")
    files = {name: (out / "configs" / name).read_text() for name in names}
    return files, worker_env(out / "manifests.yaml")


def worker_env(manifests: Path) -> dict[str, str]:
    """SLURMD_CONF_SERVER and SLURMD_NODE_CONF of the pool's StatefulSet."""
    for doc in yaml.safe_load_all(manifests.read_text()):
        if doc and doc.get("kind") == "StatefulSet" and doc["metadata"]["name"] == "bench-cpu":
            [slurmd] = doc["spec"]["template"]["spec"]["containers"]
            env = {e["name"]: e.get("value", "") for e in slurmd["env"]}
            return {k: env[k] for k in ("SLURMD_CONF_SERVER", "SLURMD_NODE_CONF")}
    raise RuntimeError("no StatefulSet bench-cpu in the rendered manifests")


def adapt(slurm_conf: str) -> str:
    """The rendered slurm.conf with the ADAPTED settings replaced (each must be there)."""
    lines = slurm_conf.splitlines()
    for key, value in ADAPTED.items():
        hits = [i for i, line in enumerate(lines) if line.startswith(f"{key}=")]
        if len(hits) != 1:
            raise RuntimeError(f"rendered slurm.conf has {len(hits)} {key} lines")
        lines[hits[0]] = f"{key}={value}  # scale-bench: one filesystem for all slurmds"
    return "\n".join(lines) + "\n"


def node_value(node_conf: str, key: str) -> str:
    """A `Key=value` of the node conf."""
    for part in node_conf.split():
        if part.startswith(f"{key}="):
            return part.split("=", 1)[1]
    raise RuntimeError(f"node conf {node_conf!r} has no {key}")


def ours(nodes: int) -> Config:
    """Our rendered configuration at `nodes` replicas."""
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        files, env = render_ours(nodes, Path(tmp))
    conf_bytes = len(files["slurm.conf"].encode())
    files["slurm.conf"] = adapt(files["slurm.conf"])
    server = env["SLURMD_CONF_SERVER"]
    return Config(
        label="ours",
        files=files,
        env={
            "MODE": "dynamic",
            "CONF_SERVER": server,
            "CONF_SERVER_HOST": server.split(":")[0],
            "NODE_CONF": env["SLURMD_NODE_CONF"],
        },
        conf_bytes=conf_bytes,
        check_cache=True,
    )


def baseline(nodes: int, node_conf: str) -> Config:
    """A minimal stock slurm.conf: the same nodes listed statically, nothing of ours."""
    last = nodes - 1
    conf = "\n".join(
        [
            "# Stock slurm.conf for the scale benchmark's baseline: only what this container",
            "# needs (pid files and spool per node, no cgroups, no mailer) and the nodes.",
            "ClusterName=base",
            f"SlurmctldHost={HOSTNAME}",
            "SlurmUser=slurm",
            "StateSaveLocation=/var/spool/slurmctld",
            "SlurmdSpoolDir=/var/spool/slurmd/%n",
            "SlurmdPidFile=/run/slurm/slurmd-%n.pid",
            "SlurmctldPidFile=/run/slurm/slurmctld.pid",
            "ProctrackType=proctrack/linuxproc",
            "MailProg=/bin/true",
            f"NodeName={NODE_PREFIX}[0-{last}] NodeHostname={HOSTNAME} NodeAddr={HOSTNAME} "
            f"Port={FIRST_PORT}-{FIRST_PORT + last} CPUs=1 "
            f"RealMemory={node_value(node_conf, 'RealMemory')}",
            "PartitionName=main Nodes=ALL Default=YES MaxTime=UNLIMITED State=UP",
            "",
        ]
    )
    return Config(
        label="baseline",
        files={"slurm.conf": conf},
        env={"MODE": "static", "CONF_SERVER": "", "CONF_SERVER_HOST": HOSTNAME, "NODE_CONF": ""},
        conf_bytes=len(conf.encode()),
        check_cache=False,
    )


def container_name(config: Config, nodes: int) -> str:
    return f"scale-bench-{config.label}-{nodes}"


def write_scripts(config: Config, bench_dir: Path, keep_free_mib: float) -> None:
    """The container's /bench: its configuration, environment and scripts."""
    conf_dir = bench_dir / "conf"
    conf_dir.mkdir(parents=True)
    for name, text in config.files.items():
        (conf_dir / name).write_text(text)
    env = {
        **config.env,
        "NODE_PREFIX": NODE_PREFIX,
        "FIRST_PORT": str(FIRST_PORT),
        "SLURMD_PARAMETERS": SLURMD_PARAMETERS,
        "CHECK_CACHE": "1" if config.check_cache else "0",
        "KEEP_FREE_MIB": str(int(keep_free_mib)),
    }
    exports = "".join(f"export {key}={shell_quote(value)}\n" for key, value in env.items())
    scripts = {
        "setup.sh": SETUP_SH,
        "start_one.sh": START_ONE_SH,
        "register.sh": REGISTER_SH,
        "reconfigure.sh": RECONFIGURE_SH,
        "jobs.sh": JOBS_SH,
    }
    for name, body in scripts.items():
        (bench_dir / name).write_text(exports + body)
    bench_dir.chmod(0o755)


def shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def start_container(name: str, bench_dir: Path) -> None:
    """The container all daemons of one measurement run in (the worker pod's capabilities)."""
    remove_container(name)
    caps = ",".join(SLURMD_CAPABILITIES)
    run(
        [
            "podman", "run", "-d", "--init", "--name", name,
            "--network", NETWORK, "--hostname", HOSTNAME,
            "--pids-limit", "-1", "--cap-drop", "ALL", "--cap-add", caps,
            "-v", f"{bench_dir}:/bench:ro",
            "--entrypoint", "sleep", IMAGE, "infinity",
        ]
    )  # fmt: skip
    in_container(name, "setup.sh")


def remove_container(name: str) -> None:
    run(["podman", "rm", "-f", "-t", "0", name], check=False)


def in_container(name: str, script: str, *args: object) -> dict[str, str]:
    """Run one of /bench's scripts; its `key value` output lines as a dict."""
    out = run(["podman", "exec", name, "bash", f"/bench/{script}", *map(str, args)])
    result = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        result[key] = value
    if "timeout" in result:
        raise RuntimeError(f"{script} timed out: {result['timeout']}")
    return result


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def threads_in_use() -> int:
    """Threads on the machine (the second number of /proc/loadavg's fourth field)."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])


def slurmctld_rss_mib(name: str) -> float:
    out = run(
        ["podman", "exec", name, "sh", "-c", "grep VmRSS /proc/$(pgrep -o slurmctld-wlm)/status"]
    )
    return int(out.split()[1]) / 1024


def measure(config: Config, nodes: int, plan: Plan, full: bool) -> Figures:
    """Registration, reconfigure and jobs for one configuration in a fresh container."""
    name = container_name(config, nodes)
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        bench_dir = Path(tmp)
        write_scripts(config, bench_dir, plan.keep_free_mib)
        try:
            start_container(name, bench_dir)
            before = mem_available_mib()
            register = float(in_container(name, "register.sh", nodes)["seconds"])
            per_node = (before - mem_available_mib()) / nodes
            reconfigure = submit = complete = math.nan
            failed = succeeded = left = 0
            if full:
                reconfigure = float(in_container(name, "reconfigure.sh", nodes)["seconds"])
                result = in_container(
                    name, "jobs.sh", plan.jobs, plan.clients, plan.complete_cap_seconds
                )
                failed = plan.jobs - int(result["queued"])
                succeeded = int(result["succeeded"])
                submit = plan.jobs / float(result["submit_seconds"])
                left = int(result["left"])
                done = int(result["queued"]) - left
                complete = done / float(result["complete_seconds"])
            rss = slurmctld_rss_mib(name)
        finally:
            plan.log_dir.mkdir(parents=True, exist_ok=True)
            log = plan.log_dir / f"{name}-slurmctld.log"
            run(["podman", "cp", f"{name}:/var/log/slurm/slurmctld.log", str(log)], check=False)
            remove_container(name)
    return Figures(
        register,
        reconfigure,
        submit,
        complete,
        rss,
        config.conf_bytes,
        per_node,
        failed,
        succeeded,
        left,
    )


def capacity(keep_free_mib: float, mib_per_node: float) -> tuple[int, str]:
    """Emulated nodes that fit now: memory above keep_free and threads under pid_max."""
    by_memory = int((mem_available_mib() - keep_free_mib) / mib_per_node)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    # Room for slurmctld, the jobs' processes and everything else on the machine.
    by_threads = (pid_max - threads_in_use() - 4000) // THREADS_PER_SLURMD
    if by_memory <= by_threads:
        return by_memory, f"memory ({keep_free_mib / 1024:.0f} GiB kept free)"
    return by_threads, f"threads (pid_max {pid_max}, {THREADS_PER_SLURMD} per slurmd)"


def report(nodes: int, ours_figures: Figures, base: Figures) -> None:
    """`name: value` lines of one node count, ours, the baseline and their ratio."""
    for field in (
        "register_seconds",
        "reconfigure_seconds",
        "submit_jobs_per_second",
        "complete_jobs_per_second",
        "slurmctld_rss_mib",
        "slurm_conf_bytes",
    ):
        mine, theirs = getattr(ours_figures, field), getattr(base, field)
        emit(f"{field}_{nodes}", mine)
        emit(f"{field}_{nodes}_baseline", theirs)
        emit(f"{field}_{nodes}_ratio", mine / theirs if theirs else math.nan)
    emit(f"slurmd_mib_per_node_{nodes}", ours_figures.slurmd_mib_per_node)
    emit(f"slurmd_mib_per_node_{nodes}_baseline", base.slurmd_mib_per_node)
    emit(f"failed_submissions_{nodes}", ours_figures.failed_submissions)
    emit(f"failed_submissions_{nodes}_baseline", base.failed_submissions)
    emit(f"succeeded_jobs_{nodes}", ours_figures.succeeded_jobs)
    emit(f"succeeded_jobs_{nodes}_baseline", base.succeeded_jobs)
    emit(f"jobs_left_{nodes}", ours_figures.jobs_left)
    emit(f"jobs_left_{nodes}_baseline", base.jobs_left)
    emit(
        f"submit_vs_slurm_claim_percent_{nodes}",
        100 * ours_figures.submit_jobs_per_second / SLURM_CLAIM_SUBMIT,
    )
    emit(
        f"complete_vs_slurm_claim_percent_{nodes}",
        100 * ours_figures.complete_jobs_per_second / SLURM_CLAIM_EXECUTE,
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="500,1000,2000", help="node counts, comma-separated")
    parser.add_argument("--jobs", type=int, default=5000, help="sbatch calls per run")
    parser.add_argument("--clients", type=int, default=4, help="concurrent sbatch clients")
    parser.add_argument(
        "--largest", action="store_true", help="then register as many nodes as fit (<= 10,000)"
    )
    parser.add_argument("--keep-free-gib", type=float, default=6.0)
    parser.add_argument(
        "--complete-cap-seconds",
        type=float,
        default=1800,
        help="stop waiting for the queue to empty after this long; the rate counts jobs done",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the benchmark image")
    parser.add_argument(
        "--log-dir", default="/tmp/scale-bench-logs", help="where each run's slurmctld.log goes"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    keep_free = args.keep_free_gib * 1024
    plan = Plan(args.jobs, args.clients, keep_free, Path(args.log_dir), args.complete_cap_seconds)
    ensure_image(args.rebuild)
    ensure_network()
    mib_per_node = 6.0  # until the first run measures it
    for nodes in [int(n) for n in args.nodes.split(",")]:
        fits, limit = capacity(keep_free, mib_per_node)
        if nodes > fits:
            emit(f"skipped_{nodes}", f"{fits} nodes fit now, limited by {limit}")
            continue
        mine = ours(nodes)
        base = baseline(nodes, mine.env["NODE_CONF"])
        ours_figures = measure(mine, nodes, plan, full=True)
        base_figures = measure(base, nodes, plan, full=True)
        mib_per_node = max(mib_per_node, ours_figures.slurmd_mib_per_node)
        report(nodes, ours_figures, base_figures)
    fits, limit = capacity(keep_free, mib_per_node)
    emit("capacity_nodes", fits)
    emit("capacity_limit", limit)
    if args.largest:
        nodes = min(LARGEST, fits // 500 * 500)
        figures = measure(ours(nodes), nodes, plan, full=False)
        emit(f"register_seconds_{nodes}", figures.register_seconds)
        emit(f"slurmctld_rss_mib_{nodes}", figures.slurmctld_rss_mib)
        emit(f"slurmd_mib_per_node_{nodes}", figures.slurmd_mib_per_node)


if __name__ == "__main__":
    main()
