"""What the deployed units look like to monitoring and scaling: one face for both serving modes.

The stacks read a :class:`ServingTopology` instead of branching on the mode; it is made from the plan's units
(``planning/units.py``): which production variants carry traffic (the container's EMF ``VariantName``), which
inference component stands behind a variant (``AWS/SageMaker`` metrics are then per ``InferenceComponentName``),
the capacity bounds drawn on the dashboard, what the guardrail alarms are named after, and the value of the
``Adapter`` dimension for each configured adapter.
"""

from dataclasses import dataclass, field

from planning.plan import Plan
from serving_contract.components import BASE_SUFFIX


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
            data-parallel engine per ``tensor_parallel_size`` GPUs on the primary's own (priority 1) type. A
            component's ``...Normalized`` metrics are plain percent: 1.
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


def serving_topology(plan: Plan) -> ServingTopology:
    """The topology of ``plan``'s units: its production variants, or its base and adapter components."""
    base = next((unit for unit in plan.units if unit.role == "base_component"), None)
    if base is not None:
        adapters = [unit for unit in plan.units if unit.role == "adapter_component"]
        return ServingTopology(
            variant_names=(base.variant_name,),
            components={base.variant_name: base.name},
            guardrail_labels={base.variant_name: BASE_SUFFIX},
            fleet_bounds=(FleetBounds(base.variant_name, base.name, "copies", base.min_capacity, base.max_capacity),),
            adapter_dimensions={unit.key: unit.name for unit in adapters},
            gpu_memory_scale=1,
            may_scale_to_zero=plan.inference_components.scale_to_zero,
        )
    variants = [unit for unit in plan.units if unit.is_variant]
    primary = variants[0]
    return ServingTopology(
        variant_names=tuple(unit.name for unit in variants),
        guardrail_labels={unit.name: unit.name for unit in variants},
        fleet_bounds=tuple(
            FleetBounds(unit.name, unit.name, unit.unit_of_scale, unit.min_capacity, unit.max_capacity)
            for unit in variants
        ),
        adapter_dimensions={adapter.name: adapter.name for adapter in plan.planner.model.adapters},
        # One engine per tensor_parallel_size GPUs (vLLM data parallel): on the primary's own type every
        # engine's GPUs fill up.
        gpu_memory_scale=plan.planner.engine.tensor_parallel_size * primary.hardware.own.engines,
    )
