"""ClusterSecrets: the munge (or slurm) key, SSH host keys and the database passwords."""

from typing import Required, TypedDict

import pulumi
import pulumi_random as random
import pulumi_tls as tls
from pulumi_kubernetes.core.v1 import Secret

from slurm_stack import naming, paths
from slurm_stack.components.kube import child_options, register
from slurm_stack.k8s.accounting import (
    DB_COMPONENT,
    PASSWORD_KEY,
    db_password_secret,
    db_root_password_secret,
    storage_pass_problem,
)
from slurm_stack.k8s.common import metadata, munge_key_secret_name
from slurm_stack.k8s.directory import sssd_secret_name
from slurm_stack.k8s.login import host_keys_secret_name
from slurm_stack.k8s.rest_api import jwt_key_annotations
from slurm_stack.render.directory import sssd_secret_files
from slurm_stack.spec import (
    DB_PASSWORD_CONFIG_KEY,
    REGISTRY_AUTH_CONFIG_KEY,
    SpecError,
    SpecIssue,
)
from slurm_stack.spec.models import ClusterSpec
from slurm_stack.spec.registry_auth import registry_auth_problem

AUTH_KEY_BYTES = 1024
JWT_KEY_BYTES = 64  # HS256: a key as long as SHA-256's block (RFC 2104, section 3)
DB_PASSWORD_LENGTH = 32


class _KeyAlgorithm(TypedDict, total=False):
    """The arguments of a tls.PrivateKey that choose its type."""

    algorithm: Required[str]
    ecdsa_curve: str
    rsa_bits: int


HOST_KEY_ALGORITHMS: dict[str, _KeyAlgorithm] = {
    "ed25519": {"algorithm": "ED25519"},
    "ecdsa": {"algorithm": "ECDSA", "ecdsa_curve": "P256"},
    "rsa": {"algorithm": "RSA", "rsa_bits": 3072},  # OpenSSH's default size
}


class ClusterSecrets(pulumi.ComponentResource):
    """Generated secrets, kept as Pulumi secrets and handed to pods only as Kubernetes Secrets."""

    secrets: list[Secret]
    """The Kubernetes Secrets created (pods that mount them depend on these)."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        db_password: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
        ldap_bind_password: pulumi.Input[str] | None = None,
        registry_auth: pulumi.Input[str] | None = None,
    ):
        super().__init__("slurm-stack:index:ClusterSecrets", name, None, opts)
        self.secrets = [
            self._auth_key(name, spec),
            self._host_keys(name, spec, f"{name}-ssh-host", host_keys_secret_name(spec)),
        ]
        if spec.node_sshd_pools:
            # The nodes' own keys: a login pod's private keys never reach a node that runs
            # users' jobs, nor a node's a login pod.
            self.secrets.append(
                self._host_keys(
                    name,
                    spec,
                    f"{name}-node-ssh-host",
                    naming.node_host_keys_secret_name(spec.name),
                    component="worker",
                )
            )
        if spec.rest_api.enabled:
            self.secrets.append(self._jwt_key(name, spec))
        if spec.directory is not None:
            self.secrets.append(self._sssd_config(name, spec, ldap_bind_password))
        if registry_auth is not None:
            self.secrets.append(self._registry_auth(name, spec, registry_auth))
        if spec.accounting.enabled:
            password = self._db_password(name, spec, db_password)
            if password is not None:
                self.secrets.append(password)
            if spec.accounting.mode != "external":
                self.secrets.append(self._db_root_password(name, spec))
        self.register_outputs({"secretNames": [s.metadata.name for s in self.secrets]})

    def _auth_key(self, name: str, spec: ClusterSpec) -> Secret:
        key = random.RandomBytes(
            f"{name}-auth-key", length=AUTH_KEY_BYTES, opts=pulumi.ResourceOptions(parent=self)
        )
        # Outside hosts (externalNodes) hold the same key: the stack's secret output.
        self.auth_key_base64: pulumi.Output[str] = pulumi.Output.secret(key.base64)
        file_name = "munge.key" if spec.auth == "munge" else "slurm.key"
        manifest = {
            "metadata": metadata(spec, munge_key_secret_name(spec), "auth"),
            "type": "Opaque",
            "data": {file_name: key.base64},
        }
        return register(Secret, f"{name}-auth-key", manifest, child_options(self))

    def _jwt_key(self, name: str, spec: ClusterSpec) -> Secret:
        """The key that signs and checks the REST API's tokens. Pulumi keeps it across updates;
        a new `restApi.keyGeneration` replaces it."""
        key = random.RandomBytes(
            f"{name}-jwt-key",
            length=JWT_KEY_BYTES,
            keepers={"generation": str(spec.rest_api.key_generation)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        manifest = {
            # The generation names the key: a new one is a new key (the sandbox reads it so).
            "metadata": metadata(
                spec,
                naming.jwt_key_secret_name(spec.name),
                "controller",  # slurmctld's and slurmdbd's: slurmrestd never reads it
                annotations=jwt_key_annotations(spec)["annotations"],
            ),
            "type": "Opaque",
            "data": {paths.JWT_KEY_FILE: key.base64},
        }
        return register(Secret, f"{name}-jwt-key", manifest, child_options(self))

    def _host_keys(
        self,
        name: str,
        spec: ClusterSpec,
        prefix: str,
        secret_name: str,
        component: str = "login",
    ) -> Secret:
        """One key of each type; the resource names under ``prefix`` keep them across
        updates."""
        files: dict[str, pulumi.Output[str]] = {}
        for kind, algorithm in HOST_KEY_ALGORITHMS.items():
            key = tls.PrivateKey(
                f"{prefix}-{kind}", **algorithm, opts=pulumi.ResourceOptions(parent=self)
            )
            files[f"ssh_host_{kind}_key"] = key.private_key_openssh
            files[f"ssh_host_{kind}_key.pub"] = key.public_key_openssh
        manifest = {
            "metadata": metadata(spec, secret_name, component),
            "type": "Opaque",
            "stringData": files,
        }
        return register(Secret, f"{prefix}-keys", manifest, child_options(self))

    def _sssd_config(
        self, name: str, spec: ClusterSpec, bind_password: pulumi.Input[str] | None
    ) -> Secret:
        """sssd.conf carries the bind password, so the whole file is a Secret."""
        files: pulumi.Input[dict[str, str]] = (
            pulumi.Output.secret(bind_password).apply(
                lambda password: sssd_secret_files(spec, password)
            )
            if bind_password is not None
            else sssd_secret_files(spec, None)
        )
        manifest = {
            "metadata": metadata(spec, sssd_secret_name(spec), "directory"),
            "type": "Opaque",
            "stringData": files,
        }
        return register(Secret, f"{name}-sssd", manifest, child_options(self))

    def _registry_auth(self, name: str, spec: ClusterSpec, given: pulumi.Input[str]) -> Secret:
        """The registry credentials worker pods pull container jobs' images with (root-only
        in the pod, never in the jail)."""
        manifest = {
            "metadata": metadata(spec, naming.registry_auth_secret_name(spec.name), "worker"),
            "type": "Opaque",
            "stringData": {
                paths.REGISTRY_AUTH_FILE: pulumi.Output.secret(given).apply(checked_registry_auth)
            },
        }
        return register(Secret, f"{name}-registry-auth", manifest, child_options(self))

    def _db_password(
        self, name: str, spec: ClusterSpec, given: pulumi.Input[str] | None
    ) -> Secret | None:
        secret_name, _ = db_password_secret(spec)
        if spec.accounting.mode == "external":
            if spec.accounting.external.password_secret is not None:
                return None  # the user's own Secret
            password: pulumi.Input[str] = pulumi.Output.secret(given).apply(_storage_pass)
        else:
            password = self._random_password(f"{name}-db-password")
        manifest = {
            "metadata": metadata(spec, secret_name, "accounting"),
            "type": "Opaque",
            "stringData": {PASSWORD_KEY: password},
        }
        return register(Secret, f"{name}-db-password", manifest, child_options(self))

    def _db_root_password(self, name: str, spec: ClusterSpec) -> Secret:
        """Root's password of the database slurm-stack creates, in a Secret of its own that
        only the database pod (or the mariadb-operator) reads."""
        secret_name, key = db_root_password_secret(spec)
        manifest = {
            "metadata": metadata(spec, secret_name, DB_COMPONENT),
            "type": "Opaque",
            "stringData": {key: self._random_password(f"{name}-db-root-password")},
        }
        return register(Secret, f"{name}-db-root-password", manifest, child_options(self))

    def _random_password(self, name: str) -> pulumi.Output[str]:
        # Letters and digits only: nothing slurmdbd.conf, SQL or a shell would need quoted.
        return random.RandomPassword(
            name,
            length=DB_PASSWORD_LENGTH,
            special=False,
            opts=pulumi.ResourceOptions(parent=self),
        ).result


def _storage_pass(password: str | None) -> str:
    """The accounting password from stack config, if slurmdbd.conf can hold it (checked once
    the secret is decrypted; the error never shows it)."""
    text = password or ""  # an unset secret is an empty password
    problem = storage_pass_problem(text)
    if problem is not None:
        raise SpecError([SpecIssue("", problem)], DB_PASSWORD_CONFIG_KEY)
    return text


def checked_registry_auth(text: str) -> str:
    """The registry credentials from stack config, if they are a Docker config JSON (checked
    once the secret is decrypted; the error never shows them)."""
    problem = registry_auth_problem(text)
    if problem is not None:
        raise SpecError([SpecIssue("", problem)], REGISTRY_AUTH_CONFIG_KEY)
    return text
