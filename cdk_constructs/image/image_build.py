"""Build an image in the account during ``cdk deploy`` (CodeBuild + custom resource): the serving image, the
release tools image."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from app_config.cloudformation_limits import CUSTOM_RESOURCE_SERVICE_TIMEOUT_S
from app_config.image_build import BUILD_QUEUE_HEADROOM_MIN
from cdk_constructs.common.custom_resource_handlers import CustomResourceHandlers, Handler
from cdk_constructs.common.kms_keys import logs_key
from cdk_constructs.common.log_retention import reason_short_retention
from cdk_constructs.common.nag import (
    acknowledge,
    acknowledge_all,
    bucket_arn_placeholder,
    guard_suppress,
    pseudo_placeholder,
    ref_placeholder,
)
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE
from cdk_constructs.common.trust import limit_trust_to_account
from cdk_constructs.image.image_buildspec import BuildRecipe, buildspec

# The handlers make a few CodeBuild/ECR control-plane calls (start or describe a build, look
# up an image digest): seconds each, so 30 s is ample and keeps a hung call from holding the
# provider's polling loop.
HANDLER_TIMEOUT_S: Final = 30

# CodeBuild API names (config) to the CDK enum.
_COMPUTE_TYPES = {
    "BUILD_GENERAL1_MEDIUM": codebuild.ComputeType.MEDIUM,
    "BUILD_GENERAL1_LARGE": codebuild.ComputeType.LARGE,
    "BUILD_GENERAL1_XLARGE": codebuild.ComputeType.X_LARGE,
    "BUILD_GENERAL1_2XLARGE": codebuild.ComputeType.X2_LARGE,
}

RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The custom resource's handlers: ``runtime/index.py`` beside this module (the Lambda asset)."""


@dataclass(frozen=True)
class ImageBuildRequest:
    """One image to build.

    Attributes:
        tag: the image tag, derived from every input (cdk_constructs/image/image_inputs.py).
        pins: ``{"base": "<version>/<sha256>", "<adapter>": "<version>/<sha256>"}``.
        base_images: ``{"<Dockerfile ARG>": "name:tag@sha256:<digest>"}``, passed as build arguments.
    """

    tag: str
    pins: Mapping[str, str]
    base_images: Mapping[str, str]


class ImageBuild(Construct):
    """A privileged CodeBuild project plus one custom resource per image the deploy needs.

    CloudFormation creates or updates a custom resource only when its tag changes; its
    handlers (runtime/ beside this module) then find the image in ECR, adopt a build already
    running for the tag, or start one, and poll until it ends. The deploy waits for it and
    fails with the build id and log link when the build fails. Dependents order themselves
    after the build with ``node.add_dependency(image_build)`` or a stack dependency.

    Attributes:
        project: the CodeBuild project.
        image_uris: per request key, ``<repository uri>:<tag>`` (known at synth).
        images: per request key, the custom resource (``ImageUri``/``ImageDigest`` attributes).
        key: the KMS key of the build's logs and artifacts, and of the handlers' logs and environment.
        handlers: the custom-resource provider that starts and watches the builds.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repository: ecr.IRepository,
        sources: s3_assets.Asset,
        artifacts_bucket: s3.IBucket | None,
        recipe: BuildRecipe,
        requests: Mapping[str, ImageBuildRequest],
        compute_type: str,
        build_timeout: cdk.Duration,
        poll_interval: cdk.Duration,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
        resource_type: str = "Custom::ServingImage",
    ) -> None:
        """
        Args:
            repository: where images are pushed (tags immutable).
            sources: directory asset with the Docker build context's sources (the serving image's: container/,
                serving_contract/).
            artifacts_bucket: holds the model artifacts (read-only here); None when ``recipe`` fetches none.
            recipe: Dockerfile, build arguments and S3 layout.
            requests: images to build, keyed by a stable name (e.g. the variant role).
            compute_type: CodeBuild compute type name, e.g. ``BUILD_GENERAL1_LARGE``.
            build_timeout: CodeBuild timeout (<= 55 min so the failure beats CloudFormation's 1 h).
            poll_interval: time between status checks.
            log_retention / log_removal_policy: for every log group made here.
            resource_type: the custom resources' type, naming the image they stand for.

        Raises:
            ValueError: ``recipe`` fetches model artifacts and ``artifacts_bucket`` is None.
        """
        super().__init__(scope, construct_id)
        if recipe.model_artifacts is not None and artifacts_bucket is None:
            raise ValueError(f"{construct_id}: the recipe fetches model artifacts, so artifacts_bucket is required")
        self._resource_type = resource_type
        self.key = self._logs_key()
        build_logs = logs.LogGroup(
            self, "BuildLogs", encryption_key=self.key, retention=log_retention, removal_policy=log_removal_policy
        )
        reason_short_retention(build_logs)
        self.project = self._project(
            repository=repository,
            sources=sources,
            artifacts_bucket=artifacts_bucket,
            recipe=recipe,
            compute_type=compute_type,
            build_timeout=build_timeout,
            build_logs=build_logs,
        )
        self.handlers = self._handlers(
            repository=repository,
            build_timeout=build_timeout,
            poll_interval=poll_interval,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
        )
        self.images: dict[str, cdk.CustomResource] = {}
        self.image_uris: dict[str, str] = {}
        for name, request in requests.items():
            self.images[name] = self._image(name, request)
            self.image_uris[name] = repository.repository_uri_for_tag(request.tag)

    def _logs_key(self) -> kms.Key:
        """The KMS key of every log group, artifact and handler environment here."""
        # Retained with the logs it encrypts, except when the first create rolls back.
        return logs_key(
            self, "Key", description="Image build logs and artifacts", removal_policy=RETAIN_EXCEPT_ON_CREATE
        )

    def _project(
        self,
        *,
        repository: ecr.IRepository,
        sources: s3_assets.Asset,
        artifacts_bucket: s3.IBucket | None,
        recipe: BuildRecipe,
        compute_type: str,
        build_timeout: cdk.Duration,
        build_logs: logs.ILogGroup,
    ) -> codebuild.Project:
        """The privileged CodeBuild project: reads the sources and the artifact prefixes, pushes to ``repository``."""
        fetch = recipe.model_artifacts
        variables = {"REPOSITORY_URI": repository.repository_uri}
        if fetch is not None and artifacts_bucket is not None:
            variables |= {
                "ARTIFACTS_BUCKET": artifacts_bucket.bucket_name,
                "BASE_MODELS_PREFIX": fetch.base_models_prefix,
                "ADAPTERS_PREFIX": fetch.adapters_prefix,
                "BASE_MODEL": fetch.base_model_name,
            }
        project = codebuild.Project(
            self,
            "Project",
            description=recipe.description,
            source=codebuild.Source.s3(bucket=sources.bucket, path=sources.s3_object_key),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=_COMPUTE_TYPES[compute_type],
                privileged=True,
            ),
            environment_variables={
                name: codebuild.BuildEnvironmentVariable(value=value) for name, value in variables.items()
            },
            build_spec=codebuild.BuildSpec.from_object(buildspec(recipe)),
            encryption_key=self.key,
            timeout=build_timeout,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=build_logs)),
        )
        privileged = (
            "Privileged mode runs the Docker daemon that builds the image; the project builds only the "
            "sources asset of this app and runs only when a deploy asks for a new image tag."
        )
        acknowledge(project, "AwsSolutions-CB3", privileged)
        guard_suppress(project, "CT.CODEBUILD.PR.4", privileged)
        # The S3 source already grants the project read on exactly the sources asset object.
        if fetch is not None and artifacts_bucket is not None:
            artifacts_bucket.grant_read(project, f"{fetch.base_models_prefix}/*")
            artifacts_bucket.grant_read(project, f"{fetch.adapters_prefix}/*")
        repository.grant_pull_push(project)
        assert project.role is not None  # CodeBuild's Project always makes one here
        limit_trust_to_account(project.role)  # CodeBuild acting for this account only (confused deputy)
        self._acknowledge_build_role(project, artifacts_bucket if fetch else None, recipe)
        return project

    def _handlers(
        self,
        *,
        repository: ecr.IRepository,
        build_timeout: cdk.Duration,
        poll_interval: cdk.Duration,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> CustomResourceHandlers:
        """``on_event`` starts (or adopts) a build, ``is_complete`` watches it; both look the image up in ECR."""
        handlers = CustomResourceHandlers(
            # "Default": CDK leaves it out of logical ids, so the handlers keep the ids they had as this
            # construct's own children (CustomResourceHandlers).
            self,
            "Default",
            handler_dir=RUNTIME,
            on_event=Handler("OnEvent", "on_event"),
            is_complete=Handler("IsComplete", "is_complete"),
            environment={
                "PROJECT_NAME": self.project.project_name,
                "REPOSITORY_NAME": repository.repository_name,
                "REPOSITORY_URI": repository.repository_uri,
            },
            timeout=cdk.Duration.seconds(HANDLER_TIMEOUT_S),
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
            encryption_key=self.key,
            query_interval=poll_interval,
            # The build's own timeout plus time queued and for the push to settle: at most the provider's
            # longest wait inside CloudFormation's (image.build.timeout_min's bound).
            total_timeout=cdk.Duration.minutes(build_timeout.to_minutes() + BUILD_QUEUE_HEADROOM_MIN),
        )
        assert handlers.is_complete_role is not None
        for role in (handlers.on_event_role, handlers.is_complete_role):
            role.add_to_policy(
                iam.PolicyStatement(actions=["codebuild:BatchGetBuilds"], resources=[self.project.project_arn])
            )
            role.add_to_policy(
                iam.PolicyStatement(actions=["ecr:DescribeImages"], resources=[repository.repository_arn])
            )
        handlers.on_event_role.add_to_policy(
            iam.PolicyStatement(
                actions=["codebuild:StartBuild", "codebuild:ListBuildsForProject"],
                resources=[self.project.project_arn],
            )
        )
        return handlers

    def _image(self, name: str, request: ImageBuildRequest) -> cdk.CustomResource:
        """The custom resource (``resource_type``) of one request: a new tag builds, the same tag changes nothing."""
        resource = cdk.CustomResource(
            self,
            f"{name[:1].upper()}{name[1:]}Image",
            service_token=self.handlers.service_token,
            resource_type=self._resource_type,
            properties={
                "ImageTag": request.tag,
                "ArtifactPins": json.dumps(dict(request.pins), sort_keys=True),
                "BaseImages": json.dumps(dict(request.base_images), sort_keys=True),
            },
            service_timeout=cdk.Duration.seconds(CUSTOM_RESOURCE_SERVICE_TIMEOUT_S),
        )
        resource.node.add_dependency(self.project)
        return resource

    def _acknowledge_build_role(
        self, project: codebuild.Project, artifacts_bucket: s3.IBucket | None, recipe: BuildRecipe
    ) -> None:
        """The CodeBuild role's wildcard findings, each with its reason (granular ids)."""
        assert project.role is not None
        project_ref = ref_placeholder(project)
        region, partition = pseudo_placeholder(self, "Region"), pseudo_placeholder(self, "Partition")
        prefixes = []
        if recipe.model_artifacts is not None and artifacts_bucket is not None:
            bucket_arn = bucket_arn_placeholder(self, artifacts_bucket)
            fetch = recipe.model_artifacts
            prefixes = [
                f"AwsSolutions-IAM5[Resource::{bucket_arn}/{fetch.base_models_prefix}/*]",
                f"AwsSolutions-IAM5[Resource::{bucket_arn}/{fetch.adapters_prefix}/*]",
            ]
        acknowledge_all(
            project.role,
            [
                "AwsSolutions-IAM5[Action::s3:GetBucket*]",
                "AwsSolutions-IAM5[Action::s3:GetObject*]",
                "AwsSolutions-IAM5[Action::s3:List*]",
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
                "AwsSolutions-IAM5[Action::kms:ReEncrypt*]",
                *prefixes,
            ],
            "Read-only grants (s3:GetObject*/GetBucket*/List*) limited to the sources asset and the model artifact key "
            "prefixes, and KMS "
            "data-key actions on this construct's key only (grant_read / CodeBuild encryption key).",
        )
        acknowledge_all(
            project.role,
            [
                "AwsSolutions-IAM5[Resource::*]",
                f"AwsSolutions-IAM5[Resource::arn:{partition}:logs:{region}:<AWS::AccountId>:log-group:"
                f"/aws/codebuild/{project_ref}:*]",
                f"AwsSolutions-IAM5[Resource::arn:{partition}:codebuild:{region}:<AWS::AccountId>:"
                f"report-group/{project_ref}-*]",
            ],
            "ecr:GetAuthorizationToken has no resource-level permissions (ECR IAM reference); the log-stream and "
            "report-group wildcards are CodeBuild's defaults for this one project.",
        )
