"""Compose every stack of the app from one validated config."""

import re
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from app_config import AppConfig
from app_config.image import ImageRefConfig
from cdk_constructs.common.nag_report import format_validation_failure
from cdk_constructs.endpoint.serving_mode import AdapterArtifacts, VariantImages
from planning.plan import Plan
from serving_contract.outputs import pascal_case
from stacks.bedrock_import_stack import BedrockImportStack
from stacks.image_build_stack import ImageBuildStack
from stacks.image_repository_stack import ImageRepositoryStack
from stacks.migration_stack import MigrationStack
from stacks.model_artifacts_stack import ModelArtifactsStack
from stacks.model_release_stack import ModelReleaseStack
from stacks.observability_stack import ObservabilityStack
from stacks.serving_stack import ServingStack


@dataclass(frozen=True)
class AppStacks:
    """The stacks of one synth, for tests and tools that inspect them.

    ``image_build`` is None when ``image.source = prebuilt``; ``model_artifacts`` is None when no
    bucket is needed (prebuilt images in variants mode) or ``image.build.artifacts_bucket_name``
    names an existing one.
    """

    image_repository: ImageRepositoryStack
    serving: ServingStack
    model_artifacts: ModelArtifactsStack | None
    observability: ObservabilityStack
    bedrock_import: BedrockImportStack | None = None
    image_build: ImageBuildStack | None = None
    model_release: ModelReleaseStack | None = None
    migration: MigrationStack | None = None


def prebuilt_image(
    scope: Construct, repository: ecr.IRepository, ref: ImageRefConfig, imported: dict[str, ecr.IRepository]
) -> tuple[str, ecr.IRepository]:
    """URI of a prebuilt image and the repository to grant pulls on.

    A full ``uri`` (another repository, e.g. a CI account's) is used as given; otherwise the
    image is in the app's repository, by digest when one is set, else by tag. ``imported``
    caches repositories imported by ARN so two variants in one repository share a construct.
    """
    parts = ref.uri_parts
    if ref.uri and parts:
        account, region, name = parts
        arn = cdk.Stack.of(scope).format_arn(
            service="ecr", account=account, region=region, resource="repository", resource_name=name
        )
        if arn not in imported:
            # Repository names may hold '/', '.' and '_': each run of other characters splits a word.
            construct_id = "Prebuilt" + pascal_case(re.sub(r"[^A-Za-z0-9]+", "-", f"{account}-{region}-{name}"))
            imported[arn] = ecr.Repository.from_repository_attributes(
                scope, construct_id, repository_arn=arn, repository_name=name
            )
        return ref.uri, imported[arn]
    if ref.digest:
        return repository.repository_uri_for_digest(ref.digest), repository
    assert ref.tag is not None  # guaranteed by ImageRefConfig's validator
    return repository.repository_uri_for_tag(ref.tag), repository


def _variant_images(
    app: cdk.App,
    config: AppConfig,
    env: cdk.Environment | None,
    image_repository: ImageRepositoryStack,
    artifacts_bucket: s3.IBucket | None,
) -> tuple[ImageBuildStack | None, VariantImages, ecr.IRepository]:
    """The images the variants run: built by an ImageBuild stack (``image.source = build``) or
    prebuilt; with the build stack (or None) and the primary image's repository."""
    repository = image_repository.repository
    image_build: ImageBuildStack | None = None
    if config.image.source == "build":
        assert artifacts_bucket is not None  # build mode always has one (_artifacts_bucket)
        image_build = ImageBuildStack(
            app,
            config.stack_name("ImageBuild"),
            config=config,
            repository=repository,
            artifacts_bucket=artifacts_bucket,
            env=env,
            description=f"{config.project_name} ({config.stage}): builds the serving image with baked weights",
        )
        primary_repository = repository
        images = VariantImages(
            primary=image_build.image_uris["primary"],
            canary=image_build.image_uris["canary"],
            repositories=[repository],
            shadow=image_build.image_uris["shadow"],
        )
    else:
        imported: dict[str, ecr.IRepository] = {}
        primary_uri, primary_repo = prebuilt_image(image_repository, repository, config.image.primary, imported)
        primary_repository = primary_repo
        canary_uri, canary_repo = (
            prebuilt_image(image_repository, repository, config.image.canary, imported)
            if config.image.canary is not None
            else (primary_uri, primary_repo)
        )
        shadow_uri, shadow_repo = (
            prebuilt_image(image_repository, repository, config.image.shadow, imported)
            if config.image.shadow is not None and config.serving.shadow.enabled
            else (primary_uri, primary_repo)
        )
        images = VariantImages(
            primary=primary_uri,
            canary=canary_uri,
            repositories=list({id(r): r for r in (primary_repo, canary_repo, shadow_repo)}.values()),
            shadow=shadow_uri,
        )
    return image_build, images, primary_repository


def build_app(app: cdk.App, config: AppConfig, plan: Plan) -> AppStacks:
    """Add every stack for ``config`` and its ``plan`` (planning/plan.py) to ``app`` and register the
    cdk-nag checks.

    cdk-nag v3 runs as a validation plugin: any unacknowledged AwsSolutions finding makes
    ``app.synth()`` raise ``ValidationFailed`` and writes ``validation-report.json``.

    With ``image.source = build`` the serving stack depends on the image build stack: the
    deploy builds and pushes the images (and waits for them) before any model points at one.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    # Once, on the app: every stack and every taggable resource in it inherits them.
    for key, value in config.tags.items():
        cdk.Tags.of(app).add(key, value)
    env = (
        cdk.Environment(account=config.env.account, region=config.env.region)
        if config.env.account or config.env.region
        else None
    )
    image_repository = ImageRepositoryStack(
        app,
        config.stack_name("ImageRepository"),
        image=config.image,
        env=env,
        description=f"{config.project_name} ({config.stage}): ECR repository for the vLLM serving image",
    )
    model_artifacts, artifacts_bucket = _artifacts_bucket(app, config, plan, env, image_repository)
    image_build, images, primary_repository = _variant_images(app, config, env, image_repository, artifacts_bucket)
    adapter_artifacts = None
    if any(unit.role == "adapter_component" for unit in plan.units):
        assert artifacts_bucket is not None  # this mode always has one (_artifacts_bucket, config checks)
        adapter_artifacts = AdapterArtifacts(bucket=artifacts_bucket, prefix=config.image.build.adapters_prefix)
    serving = ServingStack(
        app,
        config.stack_name("Serving"),
        config=config,
        plan=plan,
        images=images,
        adapter_artifacts=adapter_artifacts,
        artifacts_bucket=artifacts_bucket,  # the compile cache's, the shadow's, the capacity jobs'
        env=env,
        description=f"{config.project_name} ({config.stage}): SageMaker endpoint {config.endpoint_name}",
    )
    if image_build is not None:
        serving.add_stack_dependency(image_build, "the endpoint's models run images this stack builds")
    observability = ObservabilityStack(
        app,
        config.stack_name("Observability"),
        config=config,
        topology=serving.topology,
        guardrail_alarm_names=serving.guardrail_alarms.alarm_names,
        env=env,
        description=(
            f"{config.project_name} ({config.stage}): alarms, alarm topic and dashboard of {config.endpoint_name}"
        ),
    )
    # Ordering only (names, not exports): its composite alarm names the guardrail alarms.
    observability.add_stack_dependency(serving)
    bedrock_import = None
    if config.bedrock.enabled:
        # Opt-in (seed 003 §11): the region was checked against Custom Model Import's when loading the config.
        bedrock_import = BedrockImportStack(
            app,
            config.stack_name("BedrockImport"),
            bedrock=config.bedrock,
            observability=config.observability,
            env=env,
            description=f"{config.project_name} ({config.stage}): Bedrock Custom Model Import of merged models",
        )
    model_release = None
    if config.release.enabled:
        assert artifacts_bucket is not None  # release.enabled needs one (_artifacts_bucket)
        model_release = ModelReleaseStack(
            app,
            config.stack_name("ModelRelease"),
            config=config,
            bucket=artifacts_bucket,
            serving_image_uri=images.primary,
            serving_image_repository=primary_repository,
            env=env,
            description=f"{config.project_name} ({config.stage}): quality-gated release pipelines of model versions",
        )
        if image_build is not None:
            model_release.add_stack_dependency(image_build, "its tools image is built FROM the serving image")
    migration = None
    if config.migration.enabled:
        migration = MigrationStack(
            app,
            config.stack_name("Migration"),
            config=config,
            env=env,
            description=f"{config.project_name} ({config.stage}): Bedrock-to-endpoint migration: comparisons and ramp",
        )
        # Ordering only (names, not exports): the ramp watches the Observability stack's alarms.
        migration.add_stack_dependency(observability)
    return AppStacks(
        image_repository=image_repository,
        migration=migration,
        model_release=model_release,
        model_artifacts=model_artifacts,
        serving=serving,
        observability=observability,
        bedrock_import=bedrock_import,
        image_build=image_build,
    )


def _artifacts_bucket(
    app: cdk.App, config: AppConfig, plan: Plan, env: cdk.Environment | None, importer: cdk.Stack
) -> tuple[ModelArtifactsStack | None, s3.IBucket | None]:
    """The model-artifacts bucket, and the stack that owns it when this app does.

    Needed by the release pipelines (``release.enabled``), the image build (``image.source = build``), by adapter
    components (the plan's units), by the compile cache (``serving.compile_cache``) and
    by the shadow phase's data capture (``serving.shadow``); the capacity jobs use it where there is one, but
    do not make one needed. ``image.build.artifacts_bucket_name`` names an
    existing bucket, imported by name (``importer`` only scopes the import: the name is a literal, so no stack
    exports it); otherwise the ModelArtifacts stack creates one, deployed before the stacks that
    read it (docs/deploy.md).
    """
    needed = (
        config.release.enabled
        or config.image.source == "build"
        or any(unit.role == "adapter_component" for unit in plan.units)
        or config.serving.compile_cache.enabled
        or config.serving.shadow.enabled
    )
    if not needed:
        return None, None
    name = config.image.build.artifacts_bucket_name
    if name:
        return None, s3.Bucket.from_bucket_name(importer, "ModelArtifactsBucket", name)
    stack = ModelArtifactsStack(
        app,
        config.stack_name("ModelArtifacts"),
        capture_retention_days=config.serving.shadow.capture_retention_days,
        scratch_retention_days=config.release.scratch_retention_days,
        env=env,
        description=f"{config.project_name} ({config.stage}): bucket of the model artifacts (base models, adapters)",
    )
    return stack, stack.bucket


def synthesize(app: cdk.App) -> str | None:
    """``app.synth()``; None when it succeeds, else the cdk-nag findings that stopped it, one per line.

    cdk-nag runs as a validation plugin (:func:`build_app`): an unacknowledged finding makes the
    synth raise ``ValidationFailed`` after writing ``validation-report.json``, which this reads.

    Raises:
        RuntimeError: any other synth failure, unchanged.
    """
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        return format_validation_failure(app.outdir)
    return None
