"""What the shadow variant (``serving.shadow``, ``scaling.shadow``) needs from the rest of the config.

SageMaker's own limits on an endpoint config with a shadow variant, as its API model states them (botocore's
SageMaker model, ``CreateEndpointConfig.ShadowProductionVariants``; the CloudFormation resource schema of
``AWS::SageMaker::EndpointConfig`` says the same): "If you use this field, you can only specify one variant for
``ProductionVariants`` and one variant for ``ShadowProductionVariants``", and the shadow copies the traffic "from
the model specified on ``ProductionVariants``". A shadow variant is a ``ProductionVariant`` shape: routing
config, AMI and startup health check combine with it as with any variant. What SageMaker would refuse, synth
refuses first, with one line (:func:`check_shadow`):

- the canary beside the shadow (two production variants);
- ``serving.mode = inference_components``: its one variant hosts components and names no model for the shadow
  to copy from.

Blue/green deployment guardrails stay on: ``DeploymentConfig`` belongs to the endpoint, and neither model
restricts it with a shadow. SageMaker's guardrails need the new endpoint config to keep the old one's variant
names (developer guide, "Deployment guardrails", Exclusions), which a synth cannot see; docs/operations.md says
how the two deploys that change them (shadow on, shadow promoted) go.
"""

from typing import TYPE_CHECKING

from planning.gpu_instances import instance_gpus

if TYPE_CHECKING:
    from app_config.root import AppConfig


def check_shadow(config: "AppConfig") -> None:
    """The shadow variant against the other sections (module docstring); nothing when it is off. Whether
    vLLM fits on its GPU needs the memory plan: ``planning/checks.py``.

    Raises:
        ValueError: one line naming the keys, their values and what is allowed.
    """
    shadow = config.serving.shadow
    if not shadow.enabled:
        return
    if config.serving.hosts_inference_components:
        raise ValueError(
            "serving.shadow.enabled = true needs serving.mode = variants: a shadow variant copies the requests of the "
            "production variant's model (CreateEndpointConfig.ShadowProductionVariants), and in inference_components "
            "mode that variant hosts components, not a model"
        )
    if config.serving.canary.enabled:
        raise ValueError(
            "serving.shadow.enabled = true with serving.canary.enabled = true: an endpoint config with a shadow "
            "variant holds one production variant (CreateEndpointConfig.ShadowProductionVariants); set "
            "serving.canary.enabled = false while the shadow runs (`mangaassist-ops shadow promote` makes it the "
            "canary)"
        )
    for priority, instance_type in enumerate(shadow.instance_types, start=1):
        gpus = instance_gpus(instance_type)
        if config.engine.tensor_parallel_size > gpus.count:
            raise ValueError(
                f"engine.tensor_parallel_size = {config.engine.tensor_parallel_size}: serving.shadow."
                f"{shadow.instance_type_field(priority)} = {instance_type} has {gpus.count} GPU(s) ({gpus.gpu.name}); "
                "the engine cannot span more GPUs than that"
            )
