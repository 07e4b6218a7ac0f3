"""Managed policies for the roles outside the app that take part in the migration: the callers' and the operators'."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from app_config.migration import MigrationConfig
from app_config.release import judge_foundation_model
from cdk_constructs.common.nag import acknowledge, arn_placeholder, pseudo_placeholder
from cdk_constructs.migration.comparison_store import ComparisonStore
from serving_contract import migration


class MigrationAccess(Construct):
    """Two managed policies an account's roles attach (the app makes no role for its callers or operators).

    Attributes:
        pair_writer: for the callers' roles in migration mode: put batches under ``pairs/`` (with the store's
            key: ``kms:GenerateDataKey``) and read the ramp's state; nothing else of the store.
        reporter: for whoever runs ``ops migrate score|sample|report|status``: read the store, write ``scores/``,
            ``human/`` and ``reports/`` (decrypt and encrypt with its key), read the ramp's state, its watched alarms
            and its executions, and call the scoring models on Bedrock (the embedding model, the judge, the
            guardrail).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        store: ComparisonStore,
        state: ssm.StringParameter,
        state_machine: sfn.StateMachine,
        settings: MigrationConfig,
        judge_model_id: str,
        alarm_names: list[str],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        bucket, key = store.bucket, store.key
        read_state = iam.PolicyStatement(sid="RampState", actions=["ssm:GetParameter"], resources=[state.parameter_arn])
        self.pair_writer = iam.ManagedPolicy(
            self,
            "PairWriter",
            description="Migration mode clients: write pairs to the comparison store, read the ramp's state",
            statements=[
                iam.PolicyStatement(
                    sid="WritePairs",
                    actions=["s3:PutObject"],
                    resources=[bucket.arn_for_objects(f"{migration.PAIRS_PREFIX}*")],
                ),
                iam.PolicyStatement(sid="EncryptPairs", actions=["kms:GenerateDataKey"], resources=[key.key_arn]),
                read_state,
            ],
        )
        writes = [
            bucket.arn_for_objects(f"{p}*")
            for p in (migration.SCORES_PREFIX, migration.HUMAN_PREFIX, migration.REPORTS_PREFIX)
        ]
        foundation, profile = judge_foundation_model(judge_model_id)
        models = [
            stack.format_arn(
                service="bedrock", account="", resource="foundation-model", resource_name=settings.embedding_model_id
            ),
            f"arn:{stack.partition}:bedrock:*::foundation-model/{foundation}",
        ]
        if profile:
            models.append(
                stack.format_arn(service="bedrock", resource="inference-profile", resource_name=judge_model_id)
            )
        statements = [
            iam.PolicyStatement(sid="ListStore", actions=["s3:ListBucket"], resources=[bucket.bucket_arn]),
            iam.PolicyStatement(sid="ReadStore", actions=["s3:GetObject"], resources=[bucket.arn_for_objects("*")]),
            iam.PolicyStatement(sid="WriteScoresSamplesReports", actions=["s3:PutObject"], resources=writes),
            iam.PolicyStatement(
                sid="StoreKey", actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]
            ),
            read_state,
            iam.PolicyStatement(
                sid="RampExecutions", actions=["states:ListExecutions"], resources=[state_machine.state_machine_arn]
            ),
            iam.PolicyStatement(sid="ScoringModels", actions=["bedrock:InvokeModel"], resources=models),
            iam.PolicyStatement(
                sid="WatchedAlarms",
                actions=["cloudwatch:DescribeAlarms"],
                resources=[
                    stack.format_arn(
                        service="cloudwatch",
                        resource="alarm",
                        resource_name=name,
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                    for name in alarm_names
                ],
            ),
        ]
        if settings.guardrail_id:
            guardrail = settings.guardrail_id
            if not guardrail.startswith("arn:"):
                guardrail = stack.format_arn(service="bedrock", resource="guardrail", resource_name=guardrail)
            statements.append(
                iam.PolicyStatement(sid="Guardrail", actions=["bedrock:ApplyGuardrail"], resources=[guardrail])
            )
        self.reporter = iam.ManagedPolicy(
            self,
            "Reporter",
            description="ops migrate: read and score the comparison store, read the ramp",
            statements=statements,
        )
        self._acknowledge(store, foundation)

    def _acknowledge(self, store: ComparisonStore, foundation: str) -> None:
        bucket = arn_placeholder(store.bucket)
        acknowledge(
            self.pair_writer,
            f"AwsSolutions-IAM5[Resource::{bucket}/{migration.PAIRS_PREFIX}*]",
            "The clients name each batch by hour and a fresh id at run time (pairs/yyyy/mm/dd/hh/<ms>-<uuid>.jsonl): "
            "only the prefix is known at synth, and they may only put there.",
        )
        reasons = {
            f"{bucket}/*": "ops migrate report reads every pair, score, sample and report of the store, named at run "
            "time.",
            **{
                f"{bucket}/{prefix}*": "ops migrate writes the scores, samples and reports it names at run time under "
                "this prefix only."
                for prefix in (migration.SCORES_PREFIX, migration.HUMAN_PREFIX, migration.REPORTS_PREFIX)
            },
            f"arn:{pseudo_placeholder(self, 'Partition')}:bedrock:*::foundation-model/{foundation}": "The judge model "
            "in every region: a "
            "cross-region inference profile routes to any of them (as the release's Evaluate step).",
        }
        for resource, reason in reasons.items():
            acknowledge(self.reporter, f"AwsSolutions-IAM5[Resource::{resource}]", reason)
