"""slurmdbd.conf and the login node's sshd_config."""

from slurm_stack import naming, paths
from slurm_stack.render.environment import render_template
from slurm_stack.render.slurm import jwt_auth
from slurm_stack.spec.fields import key_of
from slurm_stack.spec.models import ClusterSpec

SSH_HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")

# Algorithms sshd offers: OpenSSH 10's defaults (the login images run 10.0 on trixie and 10.6
# on forky) without the weak ones: no CBC or 3DES, no SHA-1 or MD5, no 64-bit-tag or
# encrypt-and-MAC MACs, no NIST-curve ECDH or finite-field Diffie-Hellman. OpenSSH clients
# since 6.5 find a match in each list (9.2's defaults pick sntrup761x25519 and
# chacha20-poly1305); login.sshdExtra replaces a list for a client that does not.
SSH_CIPHERS = (
    "chacha20-poly1305@openssh.com",
    "aes256-gcm@openssh.com",
    "aes128-gcm@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
)
SSH_MACS = (
    "hmac-sha2-256-etm@openssh.com",
    "hmac-sha2-512-etm@openssh.com",
    "umac-128-etm@openssh.com",
)
SSH_KEX_ALGORITHMS = (
    "mlkem768x25519-sha256",
    "sntrup761x25519-sha512",
    "sntrup761x25519-sha512@openssh.com",
    "curve25519-sha256",
    "curve25519-sha256@libssh.org",
)


def database_endpoint(spec: ClusterSpec) -> dict[str, str | int]:
    """Host, port, user and database that slurmdbd uses, for every accounting mode."""
    if spec.accounting.mode == "external":
        external = spec.accounting.external
        return {
            "host": external.host or "",
            "port": external.port,
            "user": external.user,
            "database": external.database,
        }
    return {
        "host": naming.service_host(naming.database_name(spec.name), spec.namespace),
        "port": paths.MYSQL_PORT,
        "user": "slurm",
        "database": "slurm_acct_db",
    }


def render_slurmdbd_conf(spec: ClusterSpec) -> str:
    """slurmdbd.conf without the password (the entrypoint appends it from a Secret)."""
    purge = spec.accounting.purge
    purge_settings = [
        (key, value)
        for key, value in (
            ("PurgeJobAfter", purge.jobs_after),
            ("PurgeStepAfter", purge.steps_after),
            ("PurgeEventAfter", purge.events_after),
        )
        if value
    ]
    return render_template(
        "slurmdbd.conf.j2",
        cluster=spec.name,
        auth=spec.auth,
        jwt=jwt_auth(spec),
        port=paths.SLURMDBD_PORT,
        run_dir=paths.SLURM_RUN_DIR,
        db=database_endpoint(spec),
        purge=purge_settings,
        archive=purge.archive,
        archive_dir=paths.SLURMDBD_ARCHIVE_DIR,
    )


def _sshd_defaults(login: bool) -> list[tuple[str, str]]:
    """The settings both sshds share; a node's differs only where its sessions need it."""
    return [
        ("Port", str(paths.SSH_PORT)),
        *(
            ("HostKey", f"{paths.SSH_HOST_KEY_DIR}/ssh_host_{kind}_key")
            for kind in SSH_HOST_KEY_TYPES
        ),
        ("PidFile", "/run/sshd.pid"),
        ("PermitRootLogin", "prohibit-password"),
        ("PubkeyAuthentication", "yes"),
        ("PasswordAuthentication", "no"),
        ("KbdInteractiveAuthentication", "no"),
        # On a node, PAM's account stage lets in only users with a job there and puts the
        # session into that job (pam_slurm_adopt, images/worker/pam-sshd); keys are still
        # checked by sshd alone.
        ("UsePAM", "no" if login else "yes"),
        # Keys come from the users ConfigMap through a command, not a file sshd would check:
        # a ConfigMap volume's directory is 0777 on a kubelet, which StrictModes refuses. On a
        # node, a user's own ~/.ssh/authorized_keys in the jail's /home counts too: the key
        # pair a user makes on a login node reaches the nodes of their jobs.
        ("AuthorizedKeysFile", "none" if login else ".ssh/authorized_keys"),
        ("AuthorizedKeysCommand", f"{paths.AUTHORIZED_KEYS_COMMAND} %u"),
        ("AuthorizedKeysCommandUser", "nobody"),
        ("ChrootDirectory", paths.JAIL_DIR),
        # Few tries and a short grace per connection: keys either match or they do not.
        ("MaxAuthTries", "3"),
        ("LoginGraceTime", "30"),
        # A login node is a place to submit jobs, not a way into the cluster network: no TCP
        # or socket forwarding, tunnels or X11, and no forwarded agent that root in the jail
        # could use. sshdExtra turns one back on (e.g. `AllowTcpForwarding local`).
        ("AllowTcpForwarding", "no"),
        ("AllowStreamLocalForwarding", "no"),
        ("AllowAgentForwarding", "no"),
        ("PermitTunnel", "no"),
        ("X11Forwarding", "no"),
        ("Ciphers", ",".join(SSH_CIPHERS)),
        ("MACs", ",".join(SSH_MACS)),
        ("KexAlgorithms", ",".join(SSH_KEX_ALGORITHMS)),
        ("PrintMotd", "no"),
        ("AcceptEnv", "LANG LC_*"),
        ("ClientAliveInterval", "300"),
        ("Subsystem", "sftp internal-sftp"),
    ]


def render_sshd_config(spec: ClusterSpec) -> str:
    """sshd_config: key-only logins chrooted into the jail, no forwarding of any kind, few
    authentication attempts, modern algorithms only; sshdExtra overrides defaults."""
    extra = list(spec.login.sshd_extra)
    overridden = {key_of(line).lower() for line in extra}
    defaults = _sshd_defaults(login=True)
    # sshd keeps the first value of a keyword. Ours come first, then sshdExtra, then root's
    # Match block; a default that an extra line sets is left out, so that line takes effect.
    # That is safe because the spec refuses every keyword slurm-stack relies on (and those
    # that add up rather than replace, like HostKey and Port) and any Match or Include: the
    # extra lines are global and cannot open a block of their own before root's. See
    # slurm_stack/spec/sshd.py.
    settings = [(key, value) for key, value in defaults if key.lower() not in overridden]
    return render_template(
        "sshd_config.j2",
        cluster=spec.name,
        settings=settings,
        extra=extra,
        root_session=paths.ROOT_SESSION,
        jail=paths.JAIL_DIR,
    )


def render_node_sshd_config(spec: ClusterSpec) -> str:
    """sshd_config of a node's sshd (workerPools[].sshd): the login's settings, with PAM for
    pam_slurm_adopt and the users' own authorized_keys; login.sshdExtra is the login's only."""
    return render_template(
        "sshd_config.j2",
        cluster=spec.name,
        settings=_sshd_defaults(login=False),
        extra=[],
        root_session=paths.ROOT_SESSION,
        jail=paths.JAIL_DIR,
    )


def node_host_key_alias(spec: ClusterSpec) -> str:
    """The name the nodes' shared host keys go by in login sessions' known hosts."""
    return f"{spec.name}-nodes"


def render_node_ssh_config(spec: ClusterSpec) -> str:
    """ssh_config for login sessions: `ssh <node>` reaches a node of a pool that runs sshd by
    its pod's DNS name (`<pod>.<pool Service>.<namespace>.svc`) and checks the nodes' host
    key. A node's name has no dot; longer pool names come first, so a pool named `cpu-big`
    is not taken for `cpu`."""
    pools = sorted(spec.node_sshd_pools, key=lambda pool: len(pool.name), reverse=True)
    lines = [f"# Nodes of cluster {spec.name} that run sshd (workerPools[].sshd)."]
    for pool in pools:
        service = naming.pool_name(spec.name, pool.name)
        lines += [
            f"Host {service}-* !*.*",
            f"    HostName %h.{service}.{spec.namespace}.svc",
            f"    HostKeyAlias {node_host_key_alias(spec)}",
            f"    GlobalKnownHostsFile {paths.NODE_KNOWN_HOSTS_IN_JAIL}",
        ]
    return "\n".join(lines) + "\n"
