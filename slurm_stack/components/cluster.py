"""SlurmCluster: composes every part of a cluster from one validated spec."""

import pulumi
from pulumi_kubernetes.batch.v1 import Job
from pulumi_kubernetes.core.v1 import ConfigMap, ServiceAccount
from pulumi_kubernetes.policy.v1 import PodDisruptionBudget

from slurm_stack import naming
from slurm_stack.components.accounting import Accounting
from slurm_stack.components.controller import Controller
from slurm_stack.components.health import HealthChecks
from slurm_stack.components.jail import Jail
from slurm_stack.components.kube import by_content, child_options, register
from slurm_stack.components.login import LoginPool
from slurm_stack.components.metrics import Metrics
from slurm_stack.components.network import NetworkPolicies
from slurm_stack.components.node_state import NodeState
from slurm_stack.components.outside import OutsideAccess
from slurm_stack.components.rest_api import RestApi
from slurm_stack.components.secrets import ClusterSecrets
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.components.users import Users
from slurm_stack.components.workers import WorkerPool
from slurm_stack.k8s.common import config_map
from slurm_stack.k8s.disruption import services_disruption_budget
from slurm_stack.k8s.identity import service_account
from slurm_stack.k8s.jobs import pool_update_job, reconfigure_job
from slurm_stack.k8s.metrics import reads_healthcheck_results
from slurm_stack.k8s.site_files import site_files_config_map
from slurm_stack.k8s.workers import pool_statefulset, pool_template_hash
from slurm_stack.package.args import SlurmClusterArgs
from slurm_stack.package.convert import spec_and_secrets
from slurm_stack.render import (
    content_hash,
    node_sshd_config_files,
    node_sshd_config_map,
    slurm_config_files,
)


class SlurmCluster(pulumi.ComponentResource):
    """A Slurm cluster on Kubernetes: SSH login nodes, slurmctld, pools of slurmd workers,
    slurmdbd accounting and a shared root filesystem (the jail) that every login session and
    job sees as `/`.

    ``args`` is the cluster spec (the structure under `slurm-stack:cluster` in stack config,
    with camelCase or snake_case keys) plus the secret inputs, or a validated ClusterSpec.
    It is validated before any resource is registered; a bad value raises a SpecError that
    names its key. Pass a `kubernetes.Provider` in ``opts`` to deploy into a cluster of your
    choosing; every child inherits it. The namespace must exist (see examples/host-program).
    """

    namespace: pulumi.Output[str]
    """The Kubernetes namespace of every object of the cluster."""
    login_endpoint: pulumi.Output[str]
    """`host:port` for SSH: the load balancer's address (`pending` until it has one), a node
    port, or the Service's in-cluster name, by `login.service.type`."""
    ssh_command: pulumi.Output[str]
    """An `ssh` command line that logs in as the first declared user (root without one)."""
    config_hash: pulumi.Output[str]
    """Hash of the Slurm config files; it names their ConfigMap and the reconfigure Job."""
    slurm_version: pulumi.Output[str]
    """The Slurm release the cluster runs, e.g. `26.05`."""
    rest_api_url: pulumi.Output[str]
    """The REST API's in-cluster URL, `http://<name>-rest.<namespace>.svc:6820`, with
    `restApi.enabled`; else empty."""
    outside_controllers: pulumi.Output[list[dict[str, str]]]
    """With `externalNodes`, where hosts outside Kubernetes reach each slurmctld
    (docs/hybrid.md): `slurmctldHost`, the `inClusterAddress` slurm.conf gives for it, and its
    load balancer's `address`, primary first; else empty."""
    outside_nodes_auth_key: pulumi.Output[str]
    """With `externalNodes`, the cluster's auth key (munge.key or slurm.key) in base64, which
    outside hosts hold, a Pulumi secret; else empty."""

    def __init__(
        self,
        name: str,
        args: SlurmClusterArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        db_password: pulumi.Input[str] | None = None,
        ldap_bind_password: pulumi.Input[str] | None = None,
        container_registry_auth: pulumi.Input[str] | None = None,
    ):
        spec, given = spec_and_secrets(
            args, db_password, ldap_bind_password, container_registry_auth
        )
        db_password = given.get("db_password")
        ldap_bind_password = given.get("ldap_bind_password")
        container_registry_auth = given.get("container_registry_auth")
        super().__init__("slurm-stack:index:SlurmCluster", name, None, opts)
        here = pulumi.ResourceOptions(parent=self)
        secrets = ClusterSecrets(
            f"{name}-secrets",
            spec,
            db_password,
            opts=here,
            ldap_bind_password=ldap_bind_password,
            registry_auth=container_registry_auth,
        )

        files = slurm_config_files(spec)
        config_hash = content_hash(files)
        config_name = naming.config_map_name(spec.name, config_hash)
        config = register(
            ConfigMap,
            by_content(f"{name}-slurm-config", config_hash),
            config_map(spec, config_name, "controller", files),
            child_options(self, previously=f"{name}-slurm-config"),
        )

        # The policies exist before any pod of the cluster starts.
        guard: list[pulumi.Resource] = []
        if spec.network_policy.enabled:
            guard.append(NetworkPolicies(f"{name}-network", spec, opts=here))
        before_controller: list[pulumi.Resource] = [config, *secrets.secrets, *guard]
        if (site_files := site_files_config_map(spec)) is not None:
            # Updated in place (never renamed): pods read the changed files without restarting.
            # The pools come after the controller, so after it too.
            before_controller.append(
                register(ConfigMap, f"{name}-site-files", site_files, child_options(self))
            )
        slurm_ready: list[pulumi.Resource] = []
        if spec.accounting.enabled:
            accounting = Accounting(
                f"{name}-accounting", spec, [*secrets.secrets, *guard], opts=here
            )
            before_controller.append(accounting.slurmdbd)
            slurm_ready.append(accounting.slurmdbd)
        controller = Controller(
            f"{name}-controller", spec, config_hash, before_controller, opts=here
        )
        jail = Jail(f"{name}-jail", spec, opts=here)
        # A Kubernetes node drain takes slurmctld, slurmdbd and MariaDB one at a time.
        register(
            PodDisruptionBudget,
            f"{name}-services-disruption-budget",
            services_disruption_budget(spec),
            child_options(self),
        )

        before_nodes: list[pulumi.Resource] = [
            controller.statefulset,
            jail.populated,
            *secrets.secrets,
            *guard,
        ]
        # Runs once per config: after the controller has rolled onto it, push it to slurmds.
        reconfigure_account = register(
            ServiceAccount,
            f"{name}-reconfigure-service-account",
            service_account(spec, "reconfigure"),
            child_options(self),
        )
        reconfigure = register(
            Job,
            by_content(f"{name}-reconfigure", config_hash),
            reconfigure_job(spec, config_name, config_hash),
            child_options(
                self,
                depends_on=[controller.statefulset, reconfigure_account],
                timeout=TIMEOUTS["reconfigure"],
                previously=f"{name}-reconfigure",
            ),
        )
        users = Users(
            f"{name}-users",
            spec,
            config_name,
            # After the config push: slurmdbd sends the accounts' changes to slurmctld, and
            # Slurm 24.11 deadlocks when they meet slurmctld restarting itself on the push
            # (slurmdbd waits on the new slurmctld, which waits on slurmdbd to register).
            [
                config,
                controller.statefulset,
                jail.populated,
                reconfigure,
                *secrets.secrets,
                *slurm_ready,
            ],
            opts=here,
        )
        login = LoginPool(f"{name}-login", spec, [*before_nodes, users.config_map], opts=here)
        update_account = register(
            ServiceAccount,
            f"{name}-pool-update-service-account",
            service_account(spec, "pool-update"),
            child_options(self),
        )
        node_sshd: list[pulumi.Resource] = []
        if spec.node_sshd_pools:
            # One sshd_config for every pool's nodes, by the name k8s/workers.py mounts.
            files = node_sshd_config_files(spec)
            node_sshd.append(
                register(
                    ConfigMap,
                    by_content(f"{name}-node-sshd-config", content_hash(files)),
                    config_map(spec, node_sshd_config_map(spec), "worker", files),
                    child_options(self, previously=f"{name}-node-sshd-config"),
                )
            )
        for pool in spec.worker_pools:
            # Runs once per pod template, before the StatefulSet takes it: the pool's nodes
            # learn that their pods are to be replaced by an update (see pool_update_job).
            statefulset = pool_statefulset(spec, pool)
            template = pool_template_hash(statefulset)
            update = register(
                Job,
                by_content(f"{name}-{pool.name}-update", template),
                pool_update_job(spec, pool, config_name, template),
                child_options(
                    self,
                    depends_on=[controller.statefulset, config, update_account],
                    timeout=TIMEOUTS["pool-update"],
                ),
            )
            WorkerPool(
                f"{name}-{pool.name}",
                spec,
                pool,
                statefulset,
                [*before_nodes, update, *([*node_sshd, users.config_map] if pool.sshd else [])],
                opts=here,
            )

        if spec.nccl_enabled:
            HealthChecks(f"{name}-health", spec, config_name, [controller.statefulset], opts=here)
        if spec.metrics.enabled:
            # The exporter mounts the populated jail's health-check results directory.
            exporter_after = [jail.populated] if reads_healthcheck_results(spec) else []
            Metrics(
                f"{name}-metrics",
                spec,
                config_name,
                [controller.statefulset, *exporter_after, *guard],
                opts=here,
            )

        # Without the REST API the output is empty: a stack program may export it either way.
        self.rest_api_url = pulumi.Output.from_input("")
        if spec.rest_api.enabled:
            rest = RestApi(
                f"{name}-rest-api",
                spec,
                config_name,
                # slurmctld and slurmdbd load the key before slurmrestd asks them anything;
                # it resolves users from the populated jail's /etc.
                [controller.statefulset, jail.populated, *slurm_ready, *secrets.secrets, *guard],
                opts=here,
            )
            self.rest_api_url = rest.url
        if spec.node_state.enabled:
            NodeState(
                f"{name}-node-state", spec, config_name, [controller.statefulset, *guard], opts=here
            )

        self.outside_controllers = pulumi.Output.from_input([])
        self.outside_nodes_auth_key = pulumi.Output.from_input("")
        if spec.external_nodes is not None:
            outside = OutsideAccess(f"{name}-outside", spec, opts=here)
            self.outside_controllers = outside.controllers
            self.outside_nodes_auth_key = secrets.auth_key_base64

        user = spec.login.users[0].name if spec.login.users else "root"
        self.namespace = pulumi.Output.from_input(spec.namespace)
        self.login_endpoint = login.endpoint
        self.ssh_command = login.endpoint.apply(lambda endpoint: _ssh_command(user, endpoint))
        self.config_hash = pulumi.Output.from_input(config_hash)
        self.slurm_version = pulumi.Output.from_input(spec.slurm_version)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "loginEndpoint": self.login_endpoint,
                "sshCommand": self.ssh_command,
                "configHash": self.config_hash,
                "slurmVersion": self.slurm_version,
                "restApiUrl": self.rest_api_url,
                "outsideControllers": self.outside_controllers,
                "outsideNodesAuthKey": self.outside_nodes_auth_key,
            }
        )


def _ssh_command(user: str, endpoint: str) -> str:
    host, _, port = endpoint.rpartition(":")
    return f"ssh -p {port} {user}@{host}" if port != "22" else f"ssh {user}@{host}"
