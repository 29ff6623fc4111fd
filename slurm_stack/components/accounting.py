"""Accounting: slurmdbd plus an embedded MariaDB, a mariadb-operator resource, or nothing
(external database)."""

import pulumi
from pulumi_kubernetes.apps.v1 import Deployment, StatefulSet
from pulumi_kubernetes.core.v1 import ConfigMap, PersistentVolumeClaim, Service, ServiceAccount

from slurm_stack import naming
from slurm_stack.components.kube import by_content, child_options, custom_resource, register
from slurm_stack.components.timeouts import TIMEOUTS
from slurm_stack.k8s import accounting as builders
from slurm_stack.k8s.common import config_map
from slurm_stack.k8s.identity import service_account
from slurm_stack.render import accounting_config_files, content_hash
from slurm_stack.spec.models import ClusterSpec


class Accounting(pulumi.ComponentResource):
    """slurmdbd (Deployment, one replica) and its database per `accounting.mode`."""

    slurmdbd: Deployment

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("slurm-stack:index:Accounting", name, None, opts)
        database = self._database(name, spec, depends_on)
        archive_manifest = builders.archive_pvc(spec)
        if archive_manifest is not None:
            database.append(
                register(
                    PersistentVolumeClaim,
                    f"{name}-archive",
                    archive_manifest,
                    child_options(self, keep=True),
                )
            )
        files = accounting_config_files(spec)
        digest = content_hash(files)
        config_name = f"{naming.accounting_name(spec.name)}-config-{digest}"
        config = register(
            ConfigMap,
            by_content(f"{name}-config", digest),
            config_map(spec, config_name, "accounting", files),
            child_options(self, previously=f"{name}-config"),
        )
        register(
            Service,
            f"{name}-service",
            builders.slurmdbd_service(spec),
            child_options(self, timeout=TIMEOUTS["slurmdbd-service"]),
        )
        account = register(
            ServiceAccount,
            f"{name}-service-account",
            service_account(spec, builders.COMPONENT),
            child_options(self),
        )
        self.slurmdbd = register(
            Deployment,
            name,
            builders.slurmdbd_deployment(spec, config_name),
            child_options(
                self,
                depends_on=[config, account, *database, *depends_on],
                timeout=TIMEOUTS["slurmdbd"],
            ),
        )
        self.register_outputs({"slurmdbd": self.slurmdbd.metadata.name})

    def _database(
        self, name: str, spec: ClusterSpec, depends_on: list[pulumi.Resource]
    ) -> list[pulumi.Resource]:
        """The database resources slurmdbd waits for (none for an external database)."""
        if spec.accounting.mode == "external":
            return []
        if spec.accounting.mode == "mariadb-operator":
            return [
                custom_resource(
                    f"{name}-mariadb",
                    builders.mariadb_operator_resource(spec),
                    child_options(
                        self, depends_on=depends_on, keep=True, timeout=TIMEOUTS["mariadb-operator"]
                    ),
                )
            ]
        claim = register(
            PersistentVolumeClaim,
            f"{name}-mariadb-data",
            builders.db_pvc(spec),
            child_options(self, keep=True),
        )
        register(
            Service,
            f"{name}-mariadb-service",
            builders.db_service(spec),
            child_options(self, timeout=TIMEOUTS["mariadb-service"]),
        )
        account = register(
            ServiceAccount,
            f"{name}-mariadb-service-account",
            service_account(spec, builders.DB_COMPONENT),
            child_options(self),
        )
        mariadb = register(
            StatefulSet,
            f"{name}-mariadb",
            builders.db_statefulset(spec),
            child_options(
                self, depends_on=[claim, account, *depends_on], timeout=TIMEOUTS["mariadb"]
            ),
        )
        return [mariadb]
