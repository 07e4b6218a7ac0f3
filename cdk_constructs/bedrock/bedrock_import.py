"""Bedrock Custom Model Import: artifact store, import role, import provider, one import per model.

CloudFormation has no resource for Custom Model Import (docs/sources.md, "Bedrock Custom Model Import"; the Bedrock user
guide lists "AWS CloudFormation" among the features it cannot be used with), so each import
is a custom resource backed by ``runtime/`` beside this module (:class:`CustomResourceHandlers`).
"""

from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from cdk_constructs.common.bucket_defaults import abort_incomplete_uploads, send_events_to_eventbridge
from cdk_constructs.common.custom_resource_handlers import CustomResourceHandlers, Handler
from cdk_constructs.common.kms_keys import deny_grants_except_for_aws_services
from cdk_constructs.common.nag import acknowledge, arn_placeholder, checkov_skip, guard_suppress
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE

RESOURCE_TYPE = "Custom::BedrockModelImport"

RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The custom resource's handlers: ``runtime/index.py`` beside this module (the Lambda asset)."""


def bedrock_arn(resource: str) -> str:
    """ARN pattern of a Bedrock resource in this stack's account and region, e.g. ``model-import-job/*``."""
    return f"arn:{cdk.Aws.PARTITION}:bedrock:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:{resource}"


def _nag_bucket_arn(bucket: s3.IBucket) -> str:
    """How cdk-nag renders the bucket's ARN: a GetAtt for a bucket of this stack, else a joined string."""
    if isinstance(bucket, s3.Bucket):
        return arn_placeholder(bucket)
    return f"arn:<AWS::Partition>:s3:::{bucket.bucket_name}"


def _nag_bedrock_arn(resource: str) -> str:
    return f"arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:{resource}"


def acknowledge_prefix_reads(scope: IConstruct, bucket: s3.IBucket, prefixes: Sequence[str]) -> None:
    """Acknowledge the ``<prefix>*`` object wildcard of :func:`prefix_read_statements` on ``scope``."""
    for prefix in prefixes:
        acknowledge(
            scope,
            f"AwsSolutions-IAM5[Resource::{_nag_bucket_arn(bucket)}/{prefix}*]",
            f"s3:GetObject is limited to the model prefix {prefix}: an import reads every file of a model "
            "directory, whose names (shards) are not known at synth.",
        )


def prefix_read_statements(bucket: s3.IBucket, prefixes: Sequence[str]) -> list[iam.PolicyStatement]:
    """Read access to ``prefixes`` only: s3:GetObject on ``prefix*`` and s3:ListBucket limited by s3:prefix."""
    return [
        iam.PolicyStatement(
            sid="ReadModelArtifacts",
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes],
        ),
        iam.PolicyStatement(
            sid="ListModelArtifacts",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [pattern for p in prefixes for pattern in (p, f"{p}*")]}},
        ),
    ]


class ModelImportStore(Construct):
    """Where imports come from and what protects them: artifact bucket, model KMS key, import role.

    Attributes:
        bucket: the artifact bucket (created: S3-managed encryption, TLS only, public access
            blocked, retained on delete; or an existing one by name).
        model_key: the customer managed KMS key for imported models (rotation on, retained).
        import_role: the role Bedrock assumes for import jobs; it reads ``prefixes`` only.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, bucket_name: str | None, prefixes: Sequence[str]
    ) -> None:
        """
        Args:
            bucket_name: an existing bucket to import from, or None to create one.
            prefixes: the key prefixes (each ending in '/') the import role may read.
        """
        super().__init__(scope, construct_id)
        if bucket_name is None:
            bucket = s3.Bucket(
                self,
                "ArtifactBucket",
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                versioned=True,  # an overwritten weight file can be recovered (checkov CKV_AWS_21)
                lifecycle_rules=[abort_incomplete_uploads()],
                removal_policy=RETAIN_EXCEPT_ON_CREATE,
            )
            send_events_to_eventbridge(bucket)
            no_access_logs = (
                "Holds model weights written by the training pipeline and read by Bedrock import jobs; reads are "
                "audited through CloudTrail (CreateModelImportJob) rather than S3 server access logs."
            )
            acknowledge(bucket, "AwsSolutions-S1", no_access_logs)
            checkov_skip(bucket, "CKV_AWS_18", no_access_logs)
            guard_suppress(bucket, "CT.S3.PR.2", no_access_logs)
            guard_suppress(
                bucket,
                "CT.S3.PR.9",
                "No S3 Object Lock: it is one-way (S3 user guide, 'Configuring S3 Object Lock'); without a default "
                "retention it adds nothing to versioning and this retained bucket, and with one superseded weights "
                "(GBs each) could not be removed until it ran out.",
            )
            guard_suppress(
                bucket,
                "CT.S3.PR.10",
                "SSE-S3: the training pipeline that writes the weights and Bedrock Custom Model Import's service role "
                "read them with IAM alone; the imported models themselves are encrypted with model_key.",
            )
            self.bucket: s3.IBucket = bucket
        else:
            self.bucket = s3.Bucket.from_bucket_name(self, "ArtifactBucket", bucket_name)

        self.model_key = kms.Key(
            self,
            "ModelKey",
            enable_key_rotation=True,
            description="Encrypts models imported into Bedrock Custom Model Import",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        deny_grants_except_for_aws_services(self.model_key)

        # Trust only Bedrock import jobs of this account and region (confused-deputy guard).
        self.import_role = iam.Role(
            self,
            "ImportRole",
            assumed_by=iam.ServicePrincipal("bedrock.amazonaws.com").with_conditions(
                {
                    "StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": bedrock_arn("model-import-job/*")},
                }
            ),
            description="Assumed by Bedrock Custom Model Import to read model artifacts",
        )
        for statement in prefix_read_statements(self.bucket, prefixes):
            self.import_role.add_to_policy(statement)
        acknowledge_prefix_reads(self.import_role, self.bucket, prefixes)


class ModelImportHandlers(Construct):
    """The custom-resource provider that runs import jobs: two handler Lambdas and CDK's waiter.

    ``on_event`` pre-flights the prefix and starts the job; ``is_complete`` is polled every
    ``poll_interval`` until the job completes, fails, or ``total_timeout`` passes.

    Attributes:
        handlers: the :class:`CustomResourceHandlers`; pass ``handlers.service_token`` to imports.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        store: ModelImportStore,
        prefixes: Sequence[str],
        max_model_size_bytes: int,
        total_timeout: cdk.Duration,
        poll_interval: cdk.Duration,
        handler_timeout: cdk.Duration,
        handler_memory_mib: int,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            store: the bucket, key and role the imports use.
            prefixes: key prefixes the pre-flight may read.
            max_model_size_bytes: pre-flight size limit of one model's files.
            total_timeout: how long one import may take (CDK allows at most 2 hours).
            poll_interval: time between ``is_complete`` calls.
            handler_timeout, handler_memory_mib: Lambda settings of both handlers.
            log_retention / log_removal_policy: of the handlers', the framework's and the waiter's log groups.
        """
        super().__init__(scope, construct_id)
        self.handlers = CustomResourceHandlers(
            # "Default": CDK leaves it out of logical ids, so the handlers keep the ids they had as this
            # construct's own children (CustomResourceHandlers).
            self,
            "Default",
            handler_dir=RUNTIME,
            on_event=Handler("OnEvent", "on_event", "Pre-flights the S3 prefix and starts Bedrock model import jobs"),
            is_complete=Handler(
                "IsComplete", "is_complete", "Polls Bedrock model import jobs until they complete or fail"
            ),
            # Both handlers parse the same environment model (cdk_constructs/bedrock/runtime/index.py).
            environment={
                "IMPORT_ROLE_ARN": store.import_role.role_arn,
                "MODEL_KMS_KEY_ARN": store.model_key.key_arn,
                "MAX_MODEL_SIZE_BYTES": str(max_model_size_bytes),
            },
            timeout=handler_timeout,
            memory_mib=handler_memory_mib,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
            query_interval=poll_interval,
            total_timeout=total_timeout,
        )
        on_event_role, is_complete_role = self.handlers.on_event_role, self.handlers.is_complete_role
        assert is_complete_role is not None
        for statement in prefix_read_statements(store.bucket, prefixes):
            on_event_role.add_to_principal_policy(statement)
        on_event_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RunImportJobs",
                actions=["bedrock:CreateModelImportJob", "bedrock:GetModelImportJob"],
                resources=[bedrock_arn("model-import-job/*"), bedrock_arn("imported-model/*")],
            )
        )
        on_event_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DeleteImportedModels",
                actions=["bedrock:DeleteImportedModel", "bedrock:GetImportedModel"],
                resources=[bedrock_arn("imported-model/*")],
            )
        )
        # PassRole only to Bedrock (IAM user guide, "iam:PassedToService" condition key).
        on_event_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassImportRoleToBedrock",
                actions=["iam:PassRole"],
                resources=[store.import_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
            )
        )
        # The identity that creates the job needs these on the model key (Bedrock user guide,
        # "Using customer managed key (CMK)" for Custom Model Import). CreateGrant only for a
        # grant an AWS service creates on its behalf (KMS developer guide, kms:GrantIsForAWSResource).
        store.model_key.grant(on_event_role, "kms:DescribeKey", "kms:Decrypt", "kms:GenerateDataKey")
        on_event_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ModelKeyGrantsForBedrock",
                actions=["kms:CreateGrant"],
                resources=[store.model_key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )
        is_complete_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PollImportJobs",
                actions=["bedrock:GetModelImportJob"],
                resources=[bedrock_arn("model-import-job/*")],
            )
        )
        # A Delete that found its import still running deletes the model once the job ends.
        is_complete_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DeleteModelsOfEndedImports",
                actions=["bedrock:DeleteImportedModel"],
                resources=[bedrock_arn("imported-model/*")],
            )
        )
        acknowledge_prefix_reads(on_event_role, store.bucket, prefixes)
        generated_ids = (
            "Bedrock generates import job and imported model ids at run time, so the ARN can only name this "
            "account's and region's {kind}/* (no other resource type, no other account or region)."
        )
        for role in (on_event_role, is_complete_role):
            for kind in ("model-import-job", "imported-model"):
                acknowledge(
                    role,
                    f"AwsSolutions-IAM5[Resource::{_nag_bedrock_arn(kind + '/*')}]",
                    generated_ids.format(kind=kind),
                )


class BedrockImportedModel(Construct):
    """One model imported from ``s3://<bucket>/<prefix>`` (a ``Custom::BedrockModelImport``).

    A changed prefix or revision imports a new version (new physical id); CloudFormation then
    deletes the old one unless ``retain_on_delete``.

    Attributes:
        imported_model_arn: ARN of the imported model (token), for InvokeModel's modelId.
        imported_model_name: the imported model's name, ``<name>-<10 hex>``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service_token: str,
        bucket: s3.IBucket,
        model_name: str,
        prefix: str,
        revision: str,
        retain_on_delete: bool,
        service_timeout: cdk.Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=service_token,
            resource_type=RESOURCE_TYPE,
            service_timeout=service_timeout,
            properties={
                "ModelName": model_name,
                "Bucket": bucket.bucket_name,
                "Prefix": prefix,
                "Revision": revision,
                "RetainOnDelete": "true" if retain_on_delete else "false",
            },
        )
        self.imported_model_arn = resource.get_att_string("ImportedModelArn")
        self.imported_model_name = resource.get_att_string("ImportedModelName")
