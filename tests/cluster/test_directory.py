"""Users from an LDAP directory on the real cluster: a real OpenLDAP server (Debian's slapd).

The directory holds lara and leo (group mlteam) and otto (not in it), with SSH keys in
`sshPublicKey`. The stack points `directory` at it over ldaps:// with the test CA's
certificate, a bind DN and `loginGroups: [mlteam]`: lara and leo log in with their directory
keys, `id` resolves on the login node and in jobs on every worker, files they write carry
their uid; otto cannot log in. Switching the stack to plain ldap:// restarts no pod and
logins keep working.
"""

import base64
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from slurm_stack.sandbox.apply import network_name
from slurm_stack.sandbox.podman import network_create_args
from slurm_stack.sandbox.session import subnet_for
from slurm_stack.spec.models import IMAGE_REVISION
from tests.cluster.conftest import STACK, Cluster, boot_stack, tear_down, wait_for
from tests.cluster.secret_scan import leaks, stack_secrets
from tests.cluster.test_rest_api import api_url, latest

HERE = Path(__file__).resolve().parent
NAME = "ldapdir"
BASE_DN = "dc=example,dc=org"
READER_PASSWORD = "reader-password-of-the-directory"  # long enough to be scanned for
USERS = {"lara": 41001, "leo": 41002, "otto": 41003}
MLTEAM_GID = 42000


def ssha(password: str) -> str:
    """An OpenLDAP {SSHA} hash."""
    salt = os.urandom(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def config_ldif() -> str:
    return f"""dn: cn=config
objectClass: olcGlobal
cn: config
olcDisallows: bind_anon
olcTLSCACertificateFile: /ldap-init/ca.crt
olcTLSCertificateFile: /ldap-init/server.crt
olcTLSCertificateKeyFile: /ldap-init/server.key

dn: cn=module{{0}},cn=config
objectClass: olcModuleList
cn: module{{0}}
olcModulePath: /usr/lib/ldap
olcModuleLoad: back_mdb

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

include: file:///etc/ldap/schema/core.ldif
include: file:///etc/ldap/schema/cosine.ldif
include: file:///etc/ldap/schema/nis.ldif
include: file:///etc/ldap/schema/inetorgperson.ldif

dn: cn=openssh-lpk,cn=schema,cn=config
objectClass: olcSchemaConfig
cn: openssh-lpk
olcAttributeTypes: ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey'
  DESC 'OpenSSH public key' EQUALITY octetStringMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
olcObjectClasses: ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey'
  DESC 'OpenSSH public key holder' SUP top AUXILIARY MAY ( sshPublicKey $ uid ) )

dn: olcDatabase={{-1}}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {{-1}}frontend

dn: olcDatabase={{0}}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {{0}}config
olcAccess: {{0}}to * by * none

dn: olcDatabase={{1}}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {{1}}mdb
olcDbDirectory: /var/lib/ldap
olcSuffix: {BASE_DN}
olcRootDN: cn=admin,{BASE_DN}
olcRootPW: {ssha(os.urandom(12).hex())}
olcDbMaxSize: 268435456
olcAccess: {{0}}to attrs=userPassword by anonymous auth by * none
olcAccess: {{1}}to * by dn.exact=cn=reader,{BASE_DN} read by * none
"""


def data_ldif(keys: dict[str, str]) -> str:
    entries = [
        f"dn: {BASE_DN}\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example",
        f"dn: ou=people,{BASE_DN}\nobjectClass: organizationalUnit\nou: people",
        f"dn: ou=groups,{BASE_DN}\nobjectClass: organizationalUnit\nou: groups",
        f"dn: cn=reader,{BASE_DN}\nobjectClass: organizationalRole\n"
        f"objectClass: simpleSecurityObject\ncn: reader\nuserPassword: {ssha(READER_PASSWORD)}",
    ]
    for name, uid in USERS.items():
        entries.append(
            f"dn: uid={name},ou=people,{BASE_DN}\nobjectClass: inetOrgPerson\n"
            f"objectClass: posixAccount\nobjectClass: ldapPublicKey\nuid: {name}\ncn: {name}\n"
            f"sn: {name}\nuidNumber: {uid}\ngidNumber: {uid}\nhomeDirectory: /home/{name}\n"
            f"loginShell: /bin/bash\nsshPublicKey: {keys[name]}"
        )
        entries.append(
            f"dn: cn={name},ou=groups,{BASE_DN}\nobjectClass: posixGroup\ncn: {name}\n"
            f"gidNumber: {uid}"
        )
    entries.append(
        f"dn: cn=mlteam,ou=groups,{BASE_DN}\nobjectClass: posixGroup\ncn: mlteam\n"
        f"gidNumber: {MLTEAM_GID}\nmemberUid: lara\nmemberUid: leo"
    )
    return "\n\n".join(entries) + "\n"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("ldap-keys")
    out = {}
    for name in USERS:
        key = directory / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)])
        out[name] = key
    return out


def make_certificates(directory: Path, address: str) -> str:
    """A test CA and a server certificate for ``address`` signed by it; returns the CA PEM."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "2", "-subj", "/CN=slurm-stack test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", f"/CN={address}")  # fmt: skip
    (directory / "san.ext").write_text(f"subjectAltName=IP:{address}\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-days",
            "2", "-CAcreateserial", "-out", "server.crt", "-extfile", "san.ext")  # fmt: skip
    (directory / "server.key").chmod(0o644)  # slapd reads it as openldap; a test key
    (directory / "ca.key").unlink()
    return (directory / "ca.crt").read_text()


def start_ldap_server(cluster_name: str, ldif_dir: Path, version: str) -> str:
    """The directory server on the sandbox's network, at an address the plan never hands out
    (.5); returns its address."""
    image = f"localhost/slurm-stack/test-ldap:{version}-{IMAGE_REVISION}"
    subprocess.run(
        [
            "podman", "build", "--pull=never", "-q", "-t", image,
            "--build-arg", f"BASE=localhost/slurm-stack/base:{version}-{IMAGE_REVISION}",
            str(HERE / "ldap"),
        ],
        check=True, capture_output=True,
    )  # fmt: skip
    subnet = subnet_for(cluster_name)
    network = network_name(cluster_name)
    address = subnet.rsplit(".", 1)[0] + ".5"
    subprocess.run(["podman", *network_create_args(network, subnet, cluster_name)], check=True)
    subprocess.run(
        [
            "podman", "run", "-d", "--name", f"{cluster_name}-test-ldap", "--network", network,
            "--ip", address, "--cap-drop=ALL", "--cap-add=SETUID,SETGID,NET_BIND_SERVICE",
            "-v", f"{ldif_dir}:/ldap-init:ro", image,
        ],
        check=True, capture_output=True,
    )  # fmt: skip
    return address


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("ldapdir")
    ldif = base / "ldif"
    ldif.mkdir()
    (ldif / "config.ldif").write_text(config_ldif())
    public = {name: key.with_suffix(".pub").read_text().strip() for name, key in keys.items()}
    (ldif / "data.ldif").write_text(data_ldif(public))
    document = yaml.safe_load(STACK.read_text())
    config = document["config"]["slurm-stack:cluster"]
    config.update(name=NAME, namespace="slurm-ldapdir")
    config["workerPools"] = config["workerPools"][:1]  # cpu x2
    config["partitions"] = [{"name": "main", "default": True}]
    config["healthChecks"] = {"quick": {"intervalSeconds": 10}, "nccl": {"enabled": False}}
    del config["jail"]["submounts"]
    config["restApi"]["replicas"] = 1
    version = os.environ.get("SLURM_STACK_TEST_SLURM_VERSION", config["slurmVersion"])
    address = subnet_for(NAME).rsplit(".", 1)[0] + ".5"
    config["directory"] = {
        "uri": f"ldaps://{address}",
        "caCertificate": make_certificates(ldif, address),
        "baseDn": BASE_DN,
        "bindDn": f"cn=reader,{BASE_DN}",
        "loginGroups": ["mlteam"],
    }
    document["config"]["slurm-stack:ldapBindPassword"] = READER_PASSWORD
    cluster = boot_stack(
        document,
        base,
        2,
        before_up=lambda _sandbox: start_ldap_server(NAME, ldif, version),
    )
    yield cluster
    tear_down(cluster)


def test_directory_users_log_in_with_their_directory_keys(
    directory: Cluster, keys: dict[str, Path]
) -> None:
    for name in ("lara", "leo"):
        out = directory.ok_as(name, keys[name], "id -u; id -g; id -Gn")
        assert out.split("\n")[:3] == [str(USERS[name]), str(USERS[name]), f"{name} mlteam"]
    # otto is in the directory, with a key, but not in a login group.
    assert directory.login_as("otto", keys["otto"], "true").returncode != 0
    # A directory user's key does not open another directory user's account.
    assert directory.login_as("leo", keys["lara"], "true").returncode != 0


@pytest.fixture(scope="module")
def lara_admitted(directory: Cluster) -> Path:
    """What an admin does for a directory user: a home on the jail and a Slurm association
    (lara's home, made once for the tests that run her jobs, whichever runs first)."""
    home = directory.jail / "home" / "lara"
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, USERS["lara"], USERS["lara"])
    for command in ("add account ldap Description=directory", "add user lara Account=ldap"):
        directory.ok(directory.ctl(f"sacctmgr -i {command}"))
    return home


def test_directory_users_run_jobs_as_themselves_on_every_worker(
    directory: Cluster, keys: dict[str, Path], lara_admitted: Path
) -> None:
    home = lara_admitted
    out = directory.ok_as(
        "lara", keys["lara"], "srun -N2 sh -c 'id -un; id -Gn; getent passwd leo'"
    )
    lines = out.splitlines()
    assert lines.count("lara") == 2 and lines.count("lara mlteam") == 2
    assert lines.count(f"leo:*:{USERS['leo']}:{USERS['leo']}:leo:/home/leo:/bin/bash") == 2
    job = directory.ok_as(
        "lara",
        keys["lara"],
        "cd ~ && sbatch --parsable --wait -N2 --wrap \"srun sh -c 'touch ~/from-\\$(hostname)'\"",
    ).strip()
    assert directory.job_state(job) == "COMPLETED"
    written = sorted(home.glob("from-*"))
    assert [p.name for p in written] == [f"from-{NAME}-cpu-0", f"from-{NAME}-cpu-1"]
    assert {p.stat().st_uid for p in written} == {USERS["lara"]}
    directory.ok_as("lara", keys["lara"], "echo mine > ~/notes")
    assert (home / "notes").stat().st_uid == USERS["lara"]


def test_the_rest_api_resolves_directory_users(
    directory: Cluster, keys: dict[str, Path], lara_admitted: Path
) -> None:
    # A job of lara's own, in accounting: the test does not lean on an earlier one's.
    job = directory.ok_as("lara", keys["lara"], "sbatch --parsable -o /dev/null --wrap true")
    job = job.strip()
    wait_for(
        f"job {job} in sacct",
        lambda: job in directory.ok(directory.ctl(f"sacct -n -X -P -j {job} -o JobID")),
        timeout=60,
    )
    # slurmrestd resolves the names in a request itself, through its pod's sssd sidecar.
    url = f"{api_url(directory)}/slurmdb/{latest(directory)}/jobs?users=lara"
    command = (
        "curl -sS -H 'X-SLURM-USER-NAME: lara' "
        '-H "X-SLURM-USER-TOKEN: $(scontrol token | cut -d= -f2)" '
        f"-w '\\n%{{http_code}}' '{url}'"
    )
    body, status = directory.ok_as("lara", keys["lara"], command).rsplit("\n", 1)
    assert status == "200", body
    reply = json.loads(body)
    assert reply["errors"] == [] and {j["user"] for j in reply["jobs"]} == {"lara"}
    assert job in {str(j["job_id"]) for j in reply["jobs"]}


def test_changed_directory_settings_reach_sssd_without_a_restart(
    directory: Cluster, keys: dict[str, Path]
) -> None:
    def plain_ldap(config: dict) -> None:  # type: ignore[type-arg]
        settings = config["directory"]
        settings["uri"] = settings["uri"].replace("ldaps://", "ldap://")
        del settings["caCertificate"]

    directory.edit_stack(plain_ldap)
    report = directory.sandbox.up(build=False)
    assert report.created == () and report.removed == ()
    podman = directory.sandbox.podman
    login_pod = directory.sandbox.pod_of("login")
    sssd = f"{login_pod}--sssd"

    def running_config() -> bool:
        conf = podman.exec(sssd, ["cat", "/etc/sssd/sssd.conf"]).stdout
        return "ldap_uri = ldap://" in conf and "ldap_tls_cacert" not in conf

    wait_for("sssd on the new settings", running_config, timeout=60)
    wait_for(
        "lara logging in again",
        lambda: directory.login_as("lara", keys["lara"], "id -Gn").stdout.strip() == "lara mlteam",
        timeout=60,
    )


def test_no_bind_password_is_in_any_log(directory: Cluster) -> None:
    """The directory's bind password (`ldapBindPassword`), with which every pod's sssd binds,
    is in no log (tests/cluster/secret_scan.py)."""
    secrets = stack_secrets(directory)
    secrets["ldapBindPassword"] = READER_PASSWORD.encode()
    assert directory.ok(directory.login("srun -N2 id -un")).split()
    found, _ = leaks(directory, secrets)
    assert not found, "\n".join(found)
