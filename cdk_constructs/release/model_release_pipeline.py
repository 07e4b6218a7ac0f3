"""The release pipelines of base-model and adapter versions, their model package groups and their role.

Definitions: ``pipeline_definition.py`` (the SageMaker Python SDK, at synth). Step scripts: ``runtime/``.
docs/model-release.md walks through a run.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from app_config.release import ReleaseConfig, judge_foundation_model, model_package_group_name, release_pipeline_name
from cdk_constructs.common.fixed_name_log_group import grant_processing_job_logs, processing_job_logs
from cdk_constructs.common.nag import (
    acknowledge,
    acknowledge_all,
    bucket_arn_placeholder,
    pseudo_placeholder,
    resource_arn_placeholder,
)
from cdk_constructs.common.s3_grants import grant_asset_read
from cdk_constructs.common.trust import account_service_principal, grant_pass_role_to
from cdk_constructs.release.pipeline_definition import ReleaseKind, pipeline_definition
from cdk_constructs.release.pipeline_steps import ReleaseTargets
from serving_contract.model_artifacts import RELEASE_SCRATCH_PREFIX
from serving_contract.outputs import pascal_case

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
RELEASE_INPUTS_PREFIX = "release-inputs"
"""Eval sets and calibration sets are uploaded under ``s3://<artifacts bucket>/release-inputs/``."""
RELEASE_REPORTS_PREFIX = "release-reports"
"""Each run's step outputs: ``release-reports/<pipeline execution id>/<step>/<file>`` (pipeline_definition.py)."""
KINDS: tuple[ReleaseKind, ...] = ("base_model", "adapter")
RUNTIME = Path(__file__).parent


class ModelReleasePipeline(Construct):
    """One SageMaker Pipeline per release kind, one model package group per kind, and the roles they run as.

    Registering is split from approving (issue 53, finding 9): the release role may create model packages only with
    ``release.approval_status`` (``PendingManualApproval`` in prod; IAM condition ``sagemaker:ModelApprovalStatus``),
    and may not update them, so approving is a reviewer's ``UpdateModelPackage``. The Evaluate step, the one job
    with network (the judge), runs as :attr:`evaluate_role`, which may read its inputs, write its report and invoke
    the judge, and nothing else: no package, no job, no role to pass.

    Attributes:
        role: the pipelines' and their jobs' execution role (every step's but Evaluate's).
        evaluate_role: the Evaluate step's job role.
        pipelines: kind -> ``AWS::SageMaker::Pipeline``.
        model_package_groups: kind -> ``AWS::SageMaker::ModelPackageGroup``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        release: ReleaseConfig,
        project_name: str,
        stage: str,
        bucket: s3.IBucket,
        tools_repository: ecr.IRepository,
        tools_image_uri: str,
        serving_image_uri: str,
        serving_image_repository: ecr.IRepository,
        serving_instance_type: str,
        base_model_name: str,
        adapters: Sequence[str],
        max_lora_rank: int,
        base_models_prefix: str,
        adapters_prefix: str,
        engine_environment: Mapping[str, str],
        job_log_retention: logs.RetentionDays,
    ) -> None:
        """
        Args:
            release: ``release``.
            project_name / stage: name the pipelines and the model package groups.
            bucket: the model-artifacts bucket: versions under ``base_models_prefix`` / ``adapters_prefix``,
                release inputs under ``release-inputs/``, step outputs under ``release-reports/``.
            tools_repository: the tools image's repository (tools_image.py).
            tools_image_uri: the image the quantize, validate and evaluate steps run (tools_image.py builds it).
            serving_image_uri: the image the endpoint runs (the load test runs it).
            serving_image_repository: that image's repository (the app's, or a prebuilt image's in another
                account); the role pulls from both.
            serving_instance_type: the primary variant's instance type (the load test runs on it).
            base_model_name / adapters / max_lora_rank: ``model.name``, ``model.adapters``, ``engine.max_lora_rank``.
            base_models_prefix / adapters_prefix: ``image.build``'s.
            engine_environment: the engine settings' container environment (``engine.environment()``).
            job_log_retention: of /aws/sagemaker/ProcessingJobs, where the steps log
                (``observability.processing_job_log_retention_days``).
        """
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        processing_job_logs(self, "JobLogs", retention=job_log_retention)
        self.role = iam.Role(self, "Role", assumed_by=account_service_principal(SAGEMAKER_PRINCIPAL))
        self.evaluate_role = iam.Role(
            self,
            "EvaluateRole",
            assumed_by=account_service_principal(SAGEMAKER_PRINCIPAL),
            description="The release pipelines' Evaluate step: reads its inputs, writes its report, asks the judge",
        )
        code = s3_assets.Asset(
            self,
            "RuntimeCode",
            path=str(RUNTIME),
            # The zip holds runtime/ (Python imports it from the zip); the links into serving_contract/ are followed.
            exclude=["*", "!runtime", "!runtime/*.py", "runtime/__pycache__"],
            follow_symlinks=cdk.SymlinkFollowMode.ALWAYS,
        )
        # The runtime code zip and nothing else of the CDK bootstrap's bucket (issue 49, finding 6).
        grant_asset_read(code, self.role)
        grant_asset_read(code, self.evaluate_role)
        self.model_package_groups = {
            kind: sagemaker.CfnModelPackageGroup(
                self,
                f"{pascal_case(kind)}Packages",
                model_package_group_name=model_package_group_name(project_name, stage, kind),
                model_package_group_description=f"{project_name} ({stage}): {kind.replace('_', ' ')} versions "
                "that passed the quality gates (docs/model-release.md)",
            )
            for kind in KINDS
        }
        targets = ReleaseTargets(
            role_arn=self.role.role_arn,
            evaluate_role_arn=self.evaluate_role.role_arn,
            bucket_name=bucket.bucket_name,
            code_s3_uri=code.s3_object_url,
            code_zip_name=code.s3_object_key.rsplit("/", 1)[-1],
            tools_image_uri=tools_image_uri,
            serving_image_uri=serving_image_uri,
            serving_instance_type=serving_instance_type,
            base_model_name=base_model_name,
            adapters=tuple(adapters),
            max_lora_rank=max_lora_rank,
            base_models_prefix=base_models_prefix,
            adapters_prefix=adapters_prefix,
            model_package_groups={kind: g.model_package_group_name for kind, g in self.model_package_groups.items()},
            engine_environment=dict(engine_environment),
        )
        self.pipelines: dict[str, sagemaker.CfnPipeline] = {}
        for kind in KINDS:
            pipeline = sagemaker.CfnPipeline(
                self,
                f"{pascal_case(kind)}Release",
                pipeline_name=release_pipeline_name(project_name, stage, kind),
                pipeline_display_name=f"{project_name}-{stage}-{pascal_case(kind)}Release",
                pipeline_description=f"Quantize (base models), validate, load-test, evaluate and register a "
                f"{kind.replace('_', ' ')} version (docs/model-release.md)",
                role_arn=self.role.role_arn,
                pipeline_definition={"PipelineDefinitionBody": pipeline_definition(kind, targets, release)},
            )
            self.pipelines[kind] = pipeline
        self._grant(
            stack=stack,
            bucket=bucket,
            repositories=[tools_repository, serving_image_repository],
            release=release,
            base_models_prefix=base_models_prefix,
            adapters_prefix=adapters_prefix,
        )
        policies = [role.node.find_child("DefaultPolicy") for role in (self.role, self.evaluate_role)]
        for pipeline in self.pipelines.values():
            pipeline.node.add_dependency(*policies)  # a first execution right after the deploy needs the permissions

    def _grant(
        self,
        *,
        stack: cdk.Stack,
        bucket: s3.IBucket,
        repositories: list[ecr.IRepository],
        release: ReleaseConfig,
        base_models_prefix: str,
        adapters_prefix: str,
    ) -> None:
        role = self.role
        for repository in repositories:  # the steps' images: tools, and the serving image the load test runs
            repository.grant_pull(role)
        # Read: versions (base models, adapters), the run's inputs, earlier steps' outputs (the pipeline reads
        # property files as the role). Write: the quantized checkpoint (to the run's scratch folder; Publish copies
        # it into a new base-model version folder after the gates), reports.
        reads = [f"{base_models_prefix}/*", f"{adapters_prefix}/*", f"{RELEASE_INPUTS_PREFIX}/*"]
        reads += [f"{RELEASE_REPORTS_PREFIX}/*", f"{RELEASE_SCRATCH_PREFIX}/*"]
        writes = [f"{base_models_prefix}/*", f"{RELEASE_REPORTS_PREFIX}/*", f"{RELEASE_SCRATCH_PREFIX}/*"]
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadReleaseObjects", actions=["s3:GetObject"], resources=[bucket.arn_for_objects(p) for p in reads]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListReleaseFolders",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": reads}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteReleaseObjects",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[bucket.arn_for_objects(p) for p in writes],
            )
        )
        jobs = stack.format_arn(service="sagemaker", resource="processing-job", resource_name="pipelines-*")
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RunStepJobs",
                actions=[
                    "sagemaker:CreateProcessingJob",
                    "sagemaker:DescribeProcessingJob",
                    "sagemaker:StopProcessingJob",
                    "sagemaker:AddTags",
                ],
                resources=[jobs],
            )
        )
        packages = [
            stack.format_arn(
                service="sagemaker", resource="model-package", resource_name=f"{g.model_package_group_name}/*"
            )
            for g in self.model_package_groups.values()
        ]
        groups = [
            stack.format_arn(
                service="sagemaker", resource="model-package-group", resource_name=g.model_package_group_name
            )
            for g in self.model_package_groups.values()
        ]
        # Registering, not approving: a package may be created only with the configured status (PendingManualApproval
        # in prod, app_config.release.check_deploy_approval); the role has no UpdateModelPackage.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RegisterModelPackages",
                actions=["sagemaker:CreateModelPackage"],
                resources=packages + groups,
                conditions={"StringEquals": {"sagemaker:ModelApprovalStatus": release.approval_status}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadModelPackages",
                actions=["sagemaker:DescribeModelPackage", "sagemaker:AddTags"],
                resources=packages + groups,
            )
        )
        grant_pass_role_to(role, role, SAGEMAKER_PRINCIPAL)  # the pipeline passes its role to each step's job
        grant_pass_role_to(self.evaluate_role, role, SAGEMAKER_PRINCIPAL)  # and the Evaluate step's to that job
        grant_processing_job_logs(role, sid="StepJobLogs")
        self._grant_evaluate(stack, bucket, repositories[0], release)
        self._acknowledge(bucket, reads + writes)

    def _grant_evaluate(
        self, stack: cdk.Stack, bucket: s3.IBucket, tools_repository: ecr.IRepository, release: ReleaseConfig
    ) -> None:
        """The Evaluate step's role: pull the tools image, read the eval set, the catalog and the answers, write its
        report, log, and invoke the judge model (Converse is authorized as bedrock:InvokeModel)."""
        role = self.evaluate_role
        tools_repository.grant_pull(role)
        reads = [f"{RELEASE_INPUTS_PREFIX}/*", f"{RELEASE_REPORTS_PREFIX}/*"]
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadEvaluationInputs",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(p) for p in reads],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListEvaluationInputs",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": reads}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteEvaluationReport",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[bucket.arn_for_objects(f"{RELEASE_REPORTS_PREFIX}/*")],
            )
        )
        grant_processing_job_logs(role, sid="EvaluateJobLogs")
        # A cross-region inference profile (a "us."/"apac." prefix) routes to the foundation model in any of its
        # regions, so the model's ARN names no region.
        model = release.judge_model_id
        foundation, profile = judge_foundation_model(model)
        judge_resources = [f"arn:{stack.partition}:bedrock:*::foundation-model/{foundation}"]
        if profile:
            judge_resources.append(
                stack.format_arn(service="bedrock", resource="inference-profile", resource_name=model)
            )
        role.add_to_policy(
            iam.PolicyStatement(sid="JudgeModel", actions=["bedrock:InvokeModel"], resources=judge_resources)
        )
        arn = bucket_arn_placeholder(role, bucket)
        acknowledge_all(
            role,
            [f"AwsSolutions-IAM5[Resource::{arn}/{folder}]" for folder in reads],
            "The eval set and title catalog under release-inputs/ and the run's answers and report under "
            "release-reports/<execution id>/, named at run time.",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (grant_pull).",
        )
        partition = pseudo_placeholder(self, "Partition")
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::arn:{partition}:bedrock:*::foundation-model/{foundation}]",
            "The judge model in every region: a cross-region inference profile routes to any of them.",
        )

    def _acknowledge(self, bucket: s3.IBucket, folders: list[str]) -> None:
        arn = bucket_arn_placeholder(self.role, bucket)
        acknowledge_all(
            self.role,
            [f"AwsSolutions-IAM5[Resource::{arn}/{folder}]" for folder in dict.fromkeys(folders)],
            "Objects under the release's own folders only: version folders named per release "
            "(serving_contract/model_artifacts.py), inputs and per-execution reports named at run time.",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (grant_pull).",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{resource_arn_placeholder(self, 'sagemaker', 'processing-job/pipelines-*')}]",
            "SageMaker Pipelines names each step's processing job pipelines-<execution>-<step>-<suffix> at run time.",
        )
        for group in self.model_package_groups.values():
            package = resource_arn_placeholder(self, "sagemaker", f"model-package/{group.model_package_group_name}/*")
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{package}]",
                "A model package's ARN ends in its version number, assigned at registration, in this group only.",
            )
