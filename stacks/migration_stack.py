"""Deployment unit (optional): the Bedrock-to-endpoint migration's comparison store and ramp (docs/migration.md)."""

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from app_config import AppConfig
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from cdk_constructs.migration.access import MigrationAccess
from cdk_constructs.migration.comparison_store import ComparisonStore
from cdk_constructs.migration.migration_ramp import MigrationRamp
from serving_contract import outputs
from serving_contract.alarms import migration_ramp_alarm_names


class MigrationStack(cdk.Stack):
    """The comparison store the clients write pairs to, the ramp's state machine and the policies to use both.

    A stack of its own: added only while ``migration.enabled``, and deleted (its store and key retained until
    their retention ends) once the migration is over, without touching the endpoint. It refers to the
    endpoint's alarms by name only (``serving_contract.alarms``), so no export ties it to another stack;
    ``composition.py`` orders it after the Observability stack, whose alarms it watches.

    Attributes:
        store: the :class:`ComparisonStore`.
        ramp: the :class:`MigrationRamp`.
        access: the :class:`MigrationAccess` policies.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        settings, observability = config.migration, config.observability
        alarm_names = [*migration_ramp_alarm_names(config.endpoint_name), *settings.ramp.alarm_names]
        self.store = ComparisonStore(self, "Store", retention_days=settings.store.retention_days)
        self.ramp = MigrationRamp(
            self,
            "Ramp",
            ramp=settings.ramp,
            store=self.store,
            alarm_names=alarm_names,
            log_retention=retention_days(observability.log_retention_days),
            log_removal_policy=log_removal_policy(observability.retain_logs_on_delete),
        )
        self.access = MigrationAccess(
            self,
            "Access",
            store=self.store,
            state=self.ramp.state,
            state_machine=self.ramp.state_machine,
            settings=settings,
            judge_model_id=config.release.judge_model_id,
            alarm_names=alarm_names,
        )
        for key, value in {
            outputs.MIGRATION_STORE_BUCKET_NAME: self.store.bucket.bucket_name,
            outputs.MIGRATION_STORE_KEY_ARN: self.store.key.key_arn,
            outputs.MIGRATION_STATE_PARAMETER_NAME: self.ramp.state.parameter_name,
            outputs.MIGRATION_RAMP_STATE_MACHINE_ARN: self.ramp.state_machine.state_machine_arn,
            outputs.MIGRATION_PAIR_WRITER_POLICY_ARN: self.access.pair_writer.managed_policy_arn,
            outputs.MIGRATION_REPORTER_POLICY_ARN: self.access.reporter.managed_policy_arn,
        }.items():
            cdk.CfnOutput(self, key, value=value)
