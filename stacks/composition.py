"""Compose every stack of the app from one validated config."""

from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from app_config import AppConfig
from stacks.bedrock_import_stack import BedrockImportStack
from stacks.image_repository_stack import ImageRepositoryStack
from stacks.observability_stack import ObservabilityStack
from stacks.serving_stack import ServingStack


@dataclass(frozen=True)
class AppStacks:
    """The stacks of one synth, for tests and tools that inspect them."""

    image_repository: ImageRepositoryStack
    serving: ServingStack
    observability: ObservabilityStack
    bedrock_import: BedrockImportStack | None = None


def build_app(app: cdk.App, config: AppConfig) -> AppStacks:
    """Add every stack for ``config`` to ``app`` and register the cdk-nag checks.

    cdk-nag v3 runs as a validation plugin: any unacknowledged AwsSolutions finding makes
    ``app.synth()`` raise ``ValidationFailed`` and writes ``validation-report.json``.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    env = (
        cdk.Environment(account=config.env.account, region=config.env.region)
        if config.env.account or config.env.region
        else None
    )
    image_repository = ImageRepositoryStack(
        app,
        config.stack_name("ImageRepository"),
        image=config.image,
        tags=config.tags,
        env=env,
        description=f"{config.project_name} ({config.stage}): ECR repository for the vLLM serving image",
    )
    serving = ServingStack(
        app,
        config.stack_name("Serving"),
        config=config,
        repository=image_repository.repository,
        env=env,
        description=f"{config.project_name} ({config.stage}): SageMaker endpoint {config.endpoint_name}",
    )
    observability = ObservabilityStack(
        app,
        config.stack_name("Observability"),
        config=config,
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
            log_retention_days=config.observability.log_retention_days,
            tags=config.tags,
            env=env,
            description=f"{config.project_name} ({config.stage}): Bedrock Custom Model Import of merged models",
        )
    return AppStacks(
        image_repository=image_repository,
        serving=serving,
        observability=observability,
        bedrock_import=bedrock_import,
    )
