"""slurmdbd.conf and the login node's sshd_config."""

from slurm_stack import naming, paths
from slurm_stack.render.environment import render_template
from slurm_stack.spec.fields import key_of
from slurm_stack.spec.models import ClusterSpec

SSH_HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")


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
        port=paths.SLURMDBD_PORT,
        run_dir=paths.SLURM_RUN_DIR,
        db=database_endpoint(spec),
        purge=purge_settings,
        archive=purge.archive,
        archive_dir=paths.SLURMDBD_ARCHIVE_DIR,
    )


def render_sshd_config(spec: ClusterSpec) -> str:
    """sshd_config: key-only logins chrooted into the jail; sshdExtra overrides defaults."""
    extra = list(spec.login.sshd_extra)
    overridden = {key_of(line).lower() for line in extra}
    defaults = [
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
        ("UsePAM", "no"),
        # Keys come from the users ConfigMap through a command, not a file sshd would check:
        # a ConfigMap volume's directory is 0777 on a kubelet, which StrictModes refuses.
        ("AuthorizedKeysFile", "none"),
        ("AuthorizedKeysCommand", f"{paths.AUTHORIZED_KEYS_COMMAND} %u"),
        ("AuthorizedKeysCommandUser", "nobody"),
        ("ChrootDirectory", paths.JAIL_DIR),
        ("X11Forwarding", "no"),
        ("PrintMotd", "no"),
        ("AcceptEnv", "LANG LC_*"),
        ("ClientAliveInterval", "300"),
        ("Subsystem", "sftp internal-sftp"),
    ]
    settings = [(key, value) for key, value in defaults if key.lower() not in overridden]
    return render_template("sshd_config.j2", cluster=spec.name, settings=settings, extra=extra)
