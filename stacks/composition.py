"""Compose every stack of the app from one validated config."""

from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from app_config import AppConfig
from stacks.image_repository_stack import ImageRepositoryStack
from stacks.observability_stack import ObservabilityStack
from stacks.serving_stack import ServingStack


@dataclass(frozen=True)
class AppStacks:
    """The stacks of one synth, for tests and tools that inspect them."""

    image_repository: ImageRepositoryStack
    serving: ServingStack
    observability: ObservabilityStack


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
    return AppStacks(image_repository=image_repository, serving=serving, observability=observability)
