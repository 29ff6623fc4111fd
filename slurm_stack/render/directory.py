"""sssd.conf for pods whose users come from an LDAP directory."""

from slurm_stack import paths
from slurm_stack.render.environment import render_template
from slurm_stack.spec.models import ClusterSpec

SSSD_CONF = "sssd.conf"
CA_FILE = "ca.crt"


def render_sssd_conf(spec: ClusterSpec, bind_password: str | None) -> str:
    """sssd.conf with the bind password in it: it belongs in a Secret, never a ConfigMap."""
    directory = spec.directory
    if directory is None:
        raise ValueError("the stack has no directory")
    if directory.bind_dn and not bind_password:
        raise ValueError("directory.bindDn needs the bind password")
    if bind_password and "\n" in bind_password:
        raise ValueError("the LDAP bind password cannot span lines")
    return render_template(
        "sssd.conf.j2",
        cluster=spec.name,
        uri=directory.uri,
        base_dn=directory.base_dn,
        bind_dn=directory.bind_dn,
        bind_password=bind_password,
        ca_file=f"{paths.SSSD_CONFIG_DIR}/{CA_FILE}" if directory.ca_certificate else None,
        ssh_key_attribute=directory.ssh_public_key_attribute,
    )


def sssd_secret_files(spec: ClusterSpec, bind_password: str | None) -> dict[str, str]:
    """The sssd Secret's files: sssd.conf, and the CA certificate when one is given."""
    assert spec.directory is not None
    files = {SSSD_CONF: render_sssd_conf(spec, bind_password)}
    if spec.directory.ca_certificate:
        files[CA_FILE] = spec.directory.ca_certificate
    return files
