"""The stack program: read config, validate it, create the cluster, export what users need."""

from typing import Any

import pulumi

from slurm_stack.components.cluster import SlurmCluster
from slurm_stack.controller_change import (
    REPLICAS_OUTPUT,
    controller_replicas_issue,
    deployed_controller_replicas,
)
from slurm_stack.spec import (
    DB_PASSWORD_CONFIG_KEY,
    LDAP_PASSWORD_CONFIG_KEY,
    REGISTRY_AUTH_CONFIG_KEY,
    SpecError,
    SpecIssue,
    load_spec,
)
from slurm_stack.spec.registry_auth import registry_auth_problem
from slurm_stack.version_change import (
    DEPLOYED_VERSION_CONFIG_KEY,
    OutputsUnknown,
    deployed_outputs,
    deployed_slurm_version,
    outputs_from_config,
    refuse_version_change,
)

CLUSTER_CONFIG_KEY = "cluster"


class StackConfigError(SpecError, pulumi.RunError):
    """A SpecError that `pulumi up` prints as one plain error (the message naming every bad key).

    pulumi-language-python-exec logs `str(error)` for a `pulumi.RunError` and exits; any other
    exception is reported as "Program failed with an unhandled exception" with a traceback
    (pulumi/pulumi sdk/python/cmd/pulumi-language-python-exec). Still a SpecError for callers.
    """


def run() -> SlurmCluster:
    """Body of `__main__.py`; only this function reads `pulumi.Config`."""
    # First, before any Output exists: the invoke runs the event loop until it answers.
    try:
        deployed: dict[str, Any] | None = deployed_outputs()
        unknown_why = ""
    except OutputsUnknown as error:
        deployed, unknown_why = None, str(error)
    config = pulumi.Config()
    db_password = config.get_secret(DB_PASSWORD_CONFIG_KEY.split(":", 1)[1])
    ldap_password = config.get_secret(LDAP_PASSWORD_CONFIG_KEY.split(":", 1)[1])
    registry_auth_key = REGISTRY_AUTH_CONFIG_KEY.split(":", 1)[1]
    registry_auth = config.get_secret(registry_auth_key)
    # Checked here, before any resource exists; read in plain text for that alone.
    registry_auth_issue = registry_auth_problem(config.get(registry_auth_key))
    config_key = f"{config.name}:{CLUSTER_CONFIG_KEY}"
    try:
        if deployed is None:
            deployed = outputs_from_config(
                config.get(DEPLOYED_VERSION_CONFIG_KEY),
                unknown_why,
                f"{config.name}:{DEPLOYED_VERSION_CONFIG_KEY}",
            )
        spec = load_spec(
            config.get_object(CLUSTER_CONFIG_KEY),
            db_password_provided=db_password is not None,
            ldap_password_provided=ldap_password is not None,
            registry_auth_provided=registry_auth is not None,
            config_key=config_key,
        )
        refuse_version_change(deployed_slurm_version(deployed), spec.slurm_version, config_key)
        replicas = deployed_controller_replicas(deployed)
        if issue := controller_replicas_issue(replicas, spec.controller.replicas):
            raise SpecError([issue], config_key)
        if registry_auth_issue is not None:
            raise SpecError([SpecIssue("", registry_auth_issue)], REGISTRY_AUTH_CONFIG_KEY)
    except SpecError as error:
        raise StackConfigError(list(error.issues), error.config_key) from None
    cluster = SlurmCluster(
        spec.name,
        # SlurmCluster's `args` annotation is the package schema's (Pulumi reads it); it takes
        # a ClusterSpec, validated already, too (spec_and_secrets).
        spec,  # type: ignore[arg-type]
        db_password=db_password,
        ldap_bind_password=ldap_password,
        container_registry_auth=registry_auth,
    )
    pulumi.export("namespace", cluster.namespace)
    pulumi.export("loginEndpoint", cluster.login_endpoint)
    pulumi.export("sshCommand", cluster.ssh_command)
    pulumi.export("configHash", cluster.config_hash)
    pulumi.export("slurmVersion", cluster.slurm_version)
    pulumi.export(REPLICAS_OUTPUT, spec.controller.replicas)
    pulumi.export("restApiUrl", cluster.rest_api_url)
    if spec.external_nodes is not None:
        pulumi.export("outsideControllers", cluster.outside_controllers)
        pulumi.export("outsideNodesAuthKey", cluster.outside_nodes_auth_key)
    return cluster
