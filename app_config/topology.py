"""What each ``serving.mode`` looks like to monitoring and scaling: one face for both topologies.

The stacks read a :class:`ServingTopology` instead of branching on the mode: which production
variants carry traffic (the container's EMF ``VariantName``), which inference component stands
behind a variant (``AWS/SageMaker`` metrics are then per ``InferenceComponentName``), the
capacity bounds drawn on the dashboard, what the guardrail alarms are named after, and the
value of the ``Adapter`` dimension for each configured adapter.
"""

from dataclasses import dataclass, field

from app_config.root import AppConfig
from planning.gpu_instances import engines_per_instance
from serving_contract.components import BASE_SUFFIX, adapter_component_name, base_component_name


@dataclass(frozen=True)
class FleetBounds:
    """Bounds of one scaled unit: a variant's instances or a component's copies.

    ``variant`` is the production variant whose metrics count the unit (a component's copies are
    read through the variant hosting it); ``label`` is what the dashboard calls it.
    """

    variant: str
    label: str
    unit: str  # "instances" or "copies"
    min_capacity: int
    max_capacity: int


@dataclass(frozen=True)
class ServingTopology:
    """The parts of an endpoint that monitoring and scaling name.

    Attributes:
        variant_names: production variants carrying traffic, primary first.
        components: variant -> its base inference component (empty in variants mode).
        guardrail_labels: variant -> the name its rollback alarms carry
            (``serving_contract.alarms.rollback_alarm_names(endpoint, label)``).
        fleet_bounds: the dashboard's capacity lines.
        adapter_dimensions: adapter (config name) -> the ``Adapter`` dimension the gateway emits:
            the adapter name, or in inference_components mode its component's name, under which
            SageMaker registers it in the container.
        gpu_memory_scale: what one full engine GPU adds to SageMaker's instance GPU metrics.
            GPUMemoryUtilization is the sum over the instance's GPUs (0-100 x GPU count,
            SageMaker developer guide, "SageMaker metrics in CloudWatch"); a GPU without an
            engine stays at ~0, so a per-GPU threshold scales by the GPUs the engines fill: in variants mode one
            data-parallel engine per ``tensor_parallel_size`` GPUs, so every GPU of the
            primary's instance type. A component's ``...Normalized`` metrics are plain percent: 1.
        may_scale_to_zero: whether no container may run while idle (inference components with
            ``scale_to_zero``): the metrics every container publishes then go silent by design.
    """

    variant_names: tuple[str, ...]
    components: dict[str, str] = field(default_factory=dict)
    guardrail_labels: dict[str, str] = field(default_factory=dict)
    fleet_bounds: tuple[FleetBounds, ...] = ()
    adapter_dimensions: dict[str, str] = field(default_factory=dict)
    gpu_memory_scale: int = 1
    may_scale_to_zero: bool = False


def serving_topology(config: AppConfig) -> ServingTopology:
    """The topology ``config`` deploys."""
    endpoint = config.endpoint_name
    adapters = [a.name for a in config.model.adapters]
    if config.serving.hosts_inference_components:
        variant = config.serving.primary.variant_name
        components = config.serving.inference_components
        base = base_component_name(endpoint)
        return ServingTopology(
            variant_names=(variant,),
            components={variant: base},
            guardrail_labels={variant: BASE_SUFFIX},
            fleet_bounds=(FleetBounds(variant, base, "copies", components.min_copy_count, components.max_copy_count),),
            adapter_dimensions={a: adapter_component_name(endpoint, a) for a in adapters},
            gpu_memory_scale=1,
            may_scale_to_zero=components.scale_to_zero,
        )
    variants = config.serving.variants
    return ServingTopology(
        variant_names=tuple(v.variant_name for v in variants),
        guardrail_labels={v.variant_name: v.variant_name for v in variants},
        fleet_bounds=tuple(
            FleetBounds(v.variant_name, v.variant_name, "instances", v.min_capacity, v.max_capacity) for v in variants
        ),
        adapter_dimensions={a: a for a in adapters},
        # One engine per tensor_parallel_size GPUs (vLLM data parallel, engines_per_instance): on
        # the primary's instance type every engine's GPUs fill up.
        gpu_memory_scale=config.engine.tensor_parallel_size
        * engines_per_instance(config.serving.primary.instance_type, config.engine.tensor_parallel_size),
    )
