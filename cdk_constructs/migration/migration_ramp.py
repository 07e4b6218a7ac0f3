"""The migration's ramp: 5 -> 25 -> 50 -> 75 -> 100 % of calls to the endpoint, each step held, gated and
watched, as a Step Functions state machine (seed 002 scenario 6; issue 54, item 5; docs/migration.md).

Why not SageMaker's own traffic shifting: the ramp moves calls between Bedrock and the endpoint, which is a
split made in the clients (``mangaassist_client``'s ramp), not between two variants of one endpoint; and a
blue/green deployment's ``TrafficRoutingConfiguration.WaitIntervalInSeconds`` is at most 3,600 s within a
``MaximumExecutionTimeoutInSeconds`` of at most 28,800 s (CONVENTIONS.md; CloudFormation
``AWS::SageMaker::Endpoint``), while seed 002 holds steps for days. SageMaker's shifting stays where it fits: each
new image of the endpoint during and after the migration still deploys blue/green with automatic rollback
(cdk_constructs/endpoint/deployment_guardrails.py).
"""

import json
from pathlib import Path
from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from app_config.migration import MigrationRampConfig
from cdk_constructs.artifacts.model_artifacts_bucket import grant_archive_read
from cdk_constructs.common.custom_resource_handlers import drop_role_depends_on
from cdk_constructs.common.handler_code import HANDLER_RUNTIME, handler_code
from cdk_constructs.common.kms_keys import stack_logs_key
from cdk_constructs.common.log_retention import reason_short_retention
from cdk_constructs.common.nag import acknowledge, arn_placeholder, checkov_skip, guard_suppress
from cdk_constructs.migration.comparison_store import ComparisonStore
from serving_contract import migration

RUNTIME = Path(__file__).resolve().parent / "runtime"
STEP_TIMEOUT_S: Final = 60
"""The step function reads a parameter, the alarms and one small object: seconds, even throttled and retried."""
STEP_MEMORY_MIB: Final = 256


def step_environment(
    ramp: MigrationRampConfig, *, parameter: str, bucket: str, alarm_names: list[str]
) -> dict[str, str]:
    """The step function's environment (runtime/index.py, ``Settings``)."""
    steps = [[step.percent, int(step.hold_hours * 3600)] for step in ramp.steps]
    return {
        "STATE_PARAMETER": parameter,
        "STEPS": json.dumps(steps, separators=(",", ":")),
        "ALARM_NAMES": json.dumps(alarm_names, separators=(",", ":")),
        "STORE_BUCKET": bucket,
        "REPORT_KEY": migration.LATEST_REPORT_KEY,
        "REPORT_MAX_AGE_S": str(int(ramp.report_max_age_hours * 3600)),
    }


class MigrationRamp(Construct):
    """The ramp's state (an SSM parameter), its step function and its state machine.

    The state machine loops: ``Check`` (the step function decides ``advance``, ``hold``, ``rollback``, ``done`` or
    ``stop``: runtime/index.py), then ``Advance`` and ``Wait``, or ``Wait`` (``check_interval_min``), or
    ``Rollback`` and fail, or succeed. An execution is started by an operator after the shadow phase's report
    passed (docs/migration.md); it ends at 100 % after that step's hold, or at a rollback. It is a Standard
    workflow (an execution may last a year; the ramp's defaults take 15.5 days), logs ALL its events to a
    KMS-encrypted log group and is traced with X-Ray.

    Attributes:
        state: the parameter the clients read (``MigrationStateParameterName``).
        function: the step function.
        state_machine: the ramp.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ramp: MigrationRampConfig,
        store: ComparisonStore,
        alarm_names: list[str],
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            ramp: ``migration.ramp``.
            store: where ``reports/latest.json`` (the gate) is read from.
            alarm_names: the watched alarms (the endpoint's critical composite, the client fallback rate and
                ``migration.ramp.alarm_names``).
            log_retention / log_removal_policy: of the log groups (``observability.*``); the log groups and the
                function's environment are encrypted with the stack's logs key.
        """
        super().__init__(scope, construct_id)
        logs_key = stack_logs_key(self, removal_policy=log_removal_policy)
        self.state = ssm.StringParameter(
            self,
            "State",
            string_value=migration.INITIAL_RAMP_STATE,
            description="The migration ramp's state: the share of calls the endpoint answers (docs/migration.md)",
        )
        function_logs = self._log_group("StepLogs", logs_key, log_retention, log_removal_policy)
        role = iam.Role(self, "StepRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        function_logs.grant_write(role)
        self.function = lambda_.Function(
            self,
            "Step",
            runtime=HANDLER_RUNTIME,
            handler="index.handler",
            code=handler_code(RUNTIME, shared_modules=[migration]),
            description="The migration ramp's checks and steps (state machine task)",
            environment=step_environment(
                ramp, parameter=self.state.parameter_name, bucket=store.bucket.bucket_name, alarm_names=alarm_names
            ),
            environment_encryption=logs_key,
            timeout=cdk.Duration.seconds(STEP_TIMEOUT_S),
            memory_size=STEP_MEMORY_MIB,
            log_group=function_logs,
            role=role,
        )
        self._grant(role, store, alarm_names)
        self.state_machine = self._state_machine(ramp, logs_key, log_retention, log_removal_policy)
        self._acknowledge(role, store)
        drop_role_depends_on(self)

    def _log_group(
        self, construct_id: str, key: kms.IKey, retention: logs.RetentionDays, removal: cdk.RemovalPolicy
    ) -> logs.LogGroup:
        group = logs.LogGroup(self, construct_id, encryption_key=key, retention=retention, removal_policy=removal)
        reason_short_retention(group)
        return group

    def _grant(self, role: iam.Role, store: ComparisonStore, alarm_names: list[str]) -> None:
        self.state.grant_read(role)
        self.state.grant_write(role)
        stack = cdk.Stack.of(self)
        alarms = [
            stack.format_arn(
                service="cloudwatch", resource="alarm", resource_name=name, arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME
            )
            for name in alarm_names
        ]
        role.add_to_policy(
            iam.PolicyStatement(sid="WatchedAlarms", actions=["cloudwatch:DescribeAlarms"], resources=alarms)
        )
        grant_archive_read(store.bucket, role, [migration.LATEST_REPORT_KEY])
        store.key.grant_decrypt(role)

    def _state_machine(
        self, ramp: MigrationRampConfig, key: kms.IKey, retention: logs.RetentionDays, removal: cdk.RemovalPolicy
    ) -> sfn.StateMachine:
        def task(name: str, payload: dict[str, object]) -> tasks.LambdaInvoke:
            return tasks.LambdaInvoke(
                self,
                name,
                lambda_function=self.function,
                payload=sfn.TaskInput.from_object(payload),
                payload_response_only=True,
                retry_on_service_exceptions=True,
            )

        check = task("Check", {"action": "check"})
        wait = sfn.Wait(self, "Hold", time=sfn.WaitTime.duration(cdk.Duration.minutes(ramp.check_interval_min)))
        advance = task("Advance", {"action": "advance"})
        rollback = task("Rollback", {"action": "rollback", "reason": sfn.JsonPath.string_at("$.reason")})
        rolled_back = sfn.Fail(self, "RolledBack", error="RolledBack", cause="A trigger rolled the ramp back to 0 %")
        stopped = sfn.Fail(self, "Stopped", error="AlreadyRolledBack", cause="The state says rolled_back: set it first")
        decide = (
            sfn.Choice(self, "Decide")
            .when(sfn.Condition.string_equals("$.decision", "advance"), advance.next(wait))
            .when(sfn.Condition.string_equals("$.decision", "hold"), wait)
            .when(sfn.Condition.string_equals("$.decision", "rollback"), rollback.next(rolled_back))
            .when(sfn.Condition.string_equals("$.decision", "done"), sfn.Succeed(self, "Full"))
            .otherwise(stopped)
        )
        wait.next(check)
        machine_logs = self._log_group("RampLogs", key, retention, removal)
        return sfn.StateMachine(
            self,
            "Ramp",
            definition_body=sfn.DefinitionBody.from_chainable(check.next(decide)),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=machine_logs, level=sfn.LogLevel.ALL, include_execution_data=True),
            comment="The migration ramp: the endpoint's share of calls, step by step, gated, rolled back on a trigger",
        )

    def _acknowledge(self, role: iam.Role, store: ComparisonStore) -> None:
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{arn_placeholder(store.bucket)}/{migration.LATEST_REPORT_KEY}]",
            "Not a wildcard: the one report object the gate reads.",
        )
        acknowledge(
            self.state_machine,
            f"AwsSolutions-IAM5[Resource::{arn_placeholder(self.function)}:*]",
            "Step Functions invokes the one step function by any version (<function ARN>:*), as CDK's LambdaInvoke "
            "grants.",
        )
        acknowledge(
            self.state_machine,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:CreateLogDelivery, PutResourcePolicy, ...) and X-Ray tracing "
            "(xray:PutTraceSegments, ...) support no resource-level permissions (Step Functions developer guide, "
            "'IAM policies for logging to CloudWatch Logs' and 'AWS X-Ray and Step Functions').",
        )
        for check, reason in {
            "CKV_AWS_115": "Invoked only by the ramp's state machine, one call every check_interval_min: reserved "
            "concurrency would take capacity from the account's pool for nothing.",
            "CKV_AWS_116": "Invoked synchronously by Step Functions, which retries it and fails the execution when "
            "it fails (the execution's history keeps the event): a DLQ would hold a call nothing replays.",
            "CKV_AWS_117": "Calls only AWS APIs (SSM, CloudWatch, S3) over their public endpoints; the app has no VPC "
            "of its own, and one would need NAT or interface endpoints while protecting nothing here.",
        }.items():
            checkov_skip(self.function, check, reason)
        guard_suppress(
            self.function,
            "CT.LAMBDA.PR.3",
            "Calls only AWS APIs (SSM, CloudWatch, S3) over their public endpoints; the app has no VPC of its own.",
        )
