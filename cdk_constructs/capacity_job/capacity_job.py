"""What a capacity job needs, and nothing more (issue 46): ``python -m ops throughput measure`` starts one
SageMaker processing job per candidate instance type, running the serving image with
``python -m runtime.measure`` from a code zip (serving_contract/capacity_job.py has the contract).

This construct makes no job: the CLI calls CreateProcessingJob with what it exposes (the Serving stack's
outputs), as a role that attaches :attr:`CapacityJob.operator_policy`. The job's role reaches only its own folders
and the serving images' repositories; the operator may only start jobs of this endpoint that encrypt with the job's
key, stop within ``throughput.job.max_runtime_s``, run with no network and on the allowed instance types (issue 53,
finding 11; IAM condition keys of CreateProcessingJob, Service Authorization Reference, Amazon SageMaker:
``sagemaker:InstanceTypes``, ``sagemaker:NetworkIsolation``, ``sagemaker:MaxRuntimeInSeconds``,
``sagemaker:VolumeKmsKey``, ``sagemaker:OutputKmsKey``).

What IAM cannot bound, for want of a condition key on CreateProcessingJob: the instance count (bounded by the
account's processing-job quota for each type, "<type> for processing job usage"), the image (any image of the
repositories the job's role may pull: the serving images'), and the entrypoint and arguments (code the operator put
under the job's input folder can run, with no network, in the serving image; its output goes to the operator's own
output folder). docs/security.md keeps these as residual risk.
"""

from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from cdk_constructs.capacity_job.runtime import SHARED_MODULES
from cdk_constructs.common.bundled_code import bundled_folder, module_files
from cdk_constructs.common.fixed_name_log_group import grant_processing_job_logs, processing_job_logs
from cdk_constructs.common.kms_keys import deny_grants_except_for_aws_services
from cdk_constructs.common.nag import acknowledge, resource_arn_placeholder
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE
from cdk_constructs.common.s3_grants import grant_asset_read, grant_objects
from cdk_constructs.common.trust import account_service_principal, pass_role_statement
from serving_contract import capacity_job as contract

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The job's code: at ``runtime/`` in the zip, with :data:`SHARED_MODULES` at their package paths."""
CODE_FOLDER = contract.ENTRY_MODULE.split(".")[0]
"""Where :data:`RUNTIME` sits in the zip, ``runtime``: the job runs ``python -m runtime.measure``."""
INPUT_OBJECTS = f"*/{contract.INPUT_FOLDER}/*"
"""Under ``capacity-measurements/``: every job's input files (``<job name>/input/<file>``)."""
OUTPUT_OBJECTS = f"*/{contract.OUTPUT_FOLDER}/*"
"""Under ``capacity-measurements/``: every job's result (``<job name>/output/<file>``)."""
_JOB_NAMED_AT_RUN_TIME = (
    "one folder per job, named by `ops throughput measure` when it starts the job "
    "(serving_contract/capacity_job.py job_name)."
)


class CapacityJob(Construct):
    """The capacity job's role, key and code, and the operator's managed policy.

    The job's role (SageMaker's, for this account only) pulls the serving images, reads ``*/input/*`` under
    ``capacity-measurements/`` and the code zip (one object of the CDK assets bucket), writes ``*/output/*``,
    writes its logs to /aws/sagemaker/ProcessingJobs, and uses the job key: ``kms:GenerateDataKey`` /
    ``kms:Encrypt`` for the SSE-KMS output, ``kms:Decrypt`` for inputs the operator encrypted with it, and, for
    the job's volume, ``kms:CreateGrant`` only for an AWS resource, ``kms:GenerateDataKeyWithoutPlaintext`` and
    ``kms:DescribeKey`` (SageMaker developer guide, "Encrypt Output Data and Storage Volume with AWS KMS").

    The key rotates, denies grants except for AWS resources and services (Control Tower CT.KMS.PR.3), and is kept
    when the stack drops it (results stay readable) but not when the stack's first create fails (nothing was
    encrypted yet), as the data-capture key.

    Attributes:
        role: the job's role (CreateProcessingJob's ``RoleArn``).
        key: the job's key (``ProcessingResources.ClusterConfig.VolumeKmsKeyId`` and
            ``ProcessingOutputConfig.KmsKeyId``: its ARN, which the operator policy's conditions compare).
        code: the code zip (a ProcessingInput, ``S3DataType`` ``S3Prefix``, to ``CODE_DIR``).
        code_uri: ``s3://<CDK assets bucket>/<hash>.zip``.
        image_uri: the image the job runs: the primary variant's.
        operator_policy: the managed policy an operator's role attaches to start, watch and stop this
            endpoint's capacity jobs (``CapacityMeasureOperator``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        repositories: Sequence[ecr.IRepository],
        image_uri: str,
        endpoint_name: str,
        max_runtime_s: int,
        instance_types: Sequence[str],
        job_log_retention: logs.RetentionDays,
    ) -> None:
        """
        Args:
            bucket: the model-artifacts bucket; jobs read and write under ``capacity-measurements/`` only.
            repositories: where the serving images are (the job pulls the primary's; the same grants as the
                compile cache's job).
            image_uri: the primary variant's image.
            endpoint_name: the endpoint whose instance types are measured (names the jobs the operator may touch).
            max_runtime_s: the longest ``StoppingCondition.MaxRuntimeInSeconds`` the operator may ask for,
                seconds (``throughput.job.max_runtime_s``): the cost bound ``ops throughput measure`` prints.
            instance_types: the instance types a job may run on
                (``app_config.variants.capacity_job_instance_types``).
            job_log_retention: of /aws/sagemaker/ProcessingJobs if this stack has not made it yet
                (``observability.processing_job_log_retention_days``).

        Raises:
            ValueError: a module of ``runtime.SHARED_MODULES`` has no file (one line naming it).
        """
        super().__init__(scope, construct_id)
        self.image_uri = image_uri
        bundled = bundled_folder(RUNTIME, modules=module_files(SHARED_MODULES), folder_at=CODE_FOLDER)
        self.code = s3_assets.Asset(
            self, "Code", path=bundled.path, bundling=bundled.bundling, asset_hash_type=bundled.asset_hash_type
        )
        self.code_uri = self.code.s3_object_url
        self.key = kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            description=f"Encrypts the volumes and results of {endpoint_name}'s capacity jobs (ops throughput measure)",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        deny_grants_except_for_aws_services(self.key)
        self.role = self._job_role(bucket, repositories, job_log_retention)
        self.operator_policy = self._operator_policy(bucket, endpoint_name, max_runtime_s, instance_types)

    def _job_role(
        self, bucket: s3.IBucket, repositories: Sequence[ecr.IRepository], job_log_retention: logs.RetentionDays
    ) -> iam.Role:
        role = iam.Role(
            self,
            "Role",
            assumed_by=account_service_principal(SAGEMAKER_PRINCIPAL),
            description="Capacity jobs (ops throughput measure): pull the serving image, read inputs, write results",
        )
        for repository in repositories:
            repository.grant_pull(role)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (grant_pull).",
        )
        grant_objects(bucket, role, read=contract.S3_ROOT, objects=INPUT_OBJECTS, why=_JOB_NAMED_AT_RUN_TIME)
        grant_objects(bucket, role, write=contract.S3_ROOT, objects=OUTPUT_OBJECTS, why=_JOB_NAMED_AT_RUN_TIME)
        grant_asset_read(self.code, role)
        # The compile cache's construct usually made the group already: one per stack.
        processing_job_logs(self, "JobLogs", retention=job_log_retention)
        grant_processing_job_logs(role)
        self.key.grant(
            role,
            "kms:Encrypt",
            "kms:Decrypt",
            "kms:GenerateDataKey",
            "kms:GenerateDataKeyWithoutPlaintext",
            "kms:DescribeKey",
        )
        # The volume's key: EBS makes a grant for the instance's volume as the role.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="GrantForJobVolume",
                actions=["kms:CreateGrant"],
                resources=[self.key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )
        return role

    def _operator_policy(
        self, bucket: s3.IBucket, endpoint_name: str, max_runtime_s: int, instance_types: Sequence[str]
    ) -> iam.ManagedPolicy:
        stack = cdk.Stack.of(self)
        pattern = contract.job_name_pattern(endpoint_name)
        jobs = stack.format_arn(service="sagemaker", resource="processing-job", resource_name=pattern)
        policy = iam.ManagedPolicy(
            self,
            "CapacityMeasureOperator",
            # The command's old name, kept: a new Description replaces the managed policy (CloudFormation), and an
            # operator's role that attached it would lose it. `ops capacity measure` still runs (an alias).
            description=f"Run `ops capacity measure` on {endpoint_name}: start, watch and stop its capacity jobs",
        )
        policy.add_statements(
            iam.PolicyStatement(
                sid="StartCapacityJobs",
                actions=["sagemaker:CreateProcessingJob"],
                resources=[jobs],
                # A job that would run unencrypted, with another key, past the configured bound, with the network
                # on, or on another instance type is refused. Each key must be in the request: a condition operator
                # without IfExists does not match an absent key, and Null refuses a request naming no instance type
                # (ForAllValues alone would match an empty set).
                conditions={
                    "ArnEquals": {
                        "sagemaker:VolumeKmsKey": self.key.key_arn,
                        "sagemaker:OutputKmsKey": self.key.key_arn,
                    },
                    "NumericLessThanEquals": {"sagemaker:MaxRuntimeInSeconds": str(max_runtime_s)},
                    "Bool": {"sagemaker:NetworkIsolation": "true"},
                    "ForAllValues:StringEquals": {"sagemaker:InstanceTypes": list(instance_types)},
                    "Null": {"sagemaker:InstanceTypes": "false"},
                },
            ),
            iam.PolicyStatement(
                sid="WatchCapacityJobs",
                # AddTags: CreateProcessingJob with Tags is also authorized as sagemaker:AddTags.
                actions=["sagemaker:DescribeProcessingJob", "sagemaker:StopProcessingJob", "sagemaker:AddTags"],
                resources=[jobs],
            ),
            iam.PolicyStatement(sid="ListCapacityJobs", actions=["sagemaker:ListProcessingJobs"], resources=["*"]),
            pass_role_statement(self.role, SAGEMAKER_PRINCIPAL),
            iam.PolicyStatement(
                sid="UseCapacityJobKey",
                actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"],
                resources=[self.key.key_arn],
            ),
        )
        grant_objects(bucket, policy, write=contract.S3_ROOT, objects=INPUT_OBJECTS, why=_JOB_NAMED_AT_RUN_TIME)
        grant_objects(bucket, policy, read=contract.S3_ROOT, objects=OUTPUT_OBJECTS, why=_JOB_NAMED_AT_RUN_TIME)
        policy.add_statements(
            iam.PolicyStatement(
                sid="CleanUpCapacityJobInputs",
                # A job that failed or was stopped: the CLI deletes the inputs it put (ops/measure).
                actions=["s3:DeleteObject"],
                resources=[bucket.arn_for_objects(f"{contract.S3_ROOT}/{INPUT_OBJECTS}")],
            )
        )
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::{resource_arn_placeholder(self, 'sagemaker', f'processing-job/{pattern}')}]",
            "This endpoint's capacity jobs: the CLI names each capacity-<endpoint>-<instance type>-<start time>, so "
            "only the prefix is known at synth.",
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ListProcessingJobs supports no resource-level permissions (Service Authorization Reference, Amazon "
            "SageMaker); the CLI lists this endpoint's jobs by name to report or stop them.",
        )
        return policy
