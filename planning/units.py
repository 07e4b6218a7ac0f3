"""Every unit the endpoint deploys, with all the plan says of it: the one list the stacks, checks and reports walk.

A unit is what SageMaker runs and scales on its own: a production variant (``primary``, ``canary``), the shadow
variant, or, in inference_components mode, the base component and one component per adapter, which ride the one
variant that hosts them. Which of them exist is decided here, once, from ``serving.mode``, ``serving.canary.enabled``
and ``serving.shadow.enabled`` (:func:`deployed_units`); a reader asks the units, not the mode.

Each :class:`Unit` carries its hardware (``planning/hardware.py``: its instance types in priority order, with the
engines, the memory plan and the throughput at the SLOs on each, whose verdicts ``planning/slo_holds.py`` gives per
type), the image it runs, its bounds and its resolved scaling.
"""

from dataclasses import dataclass
from typing import Literal

from app_config.inference_components import ComponentScalingConfig, InferenceComponentsConfig
from app_config.scaling import ScalingConfig, ShadowScalingConfig, VariantScalingConfig
from app_config.serving import ServingConfig, VariantConfig
from planning.hardware import Hardware, HardwareKey
from serving_contract.components import adapter_component_name, base_component_name

UnitRole = Literal["variant", "shadow", "base_component", "adapter_component"]
"""What a unit is: a production variant, the shadow variant, the base inference component or an adapter's."""

ImageKey = Literal["primary", "canary", "shadow"]
"""Which image a unit runs: ``image.<key>`` / ``image.build.<key>`` (components run the primary's)."""


@dataclass(frozen=True)
class Unit:
    """One deployed unit (module docstring).

    Attributes:
        key: its config key: ``primary``, ``canary`` or ``shadow`` (``serving.<key>``, ``scaling.<key>``), ``base``
            for the base component, or the adapter's name.
        role: what it is (:data:`UnitRole`).
        name: the variant's name, or the component's (``serving_contract.components``).
        variant_name: the production variant it runs on (its own name for a variant).
        hardware: its instance types and the engine on each; a component's is its host variant's.
        image: the image it runs (:data:`ImageKey`); None for an adapter component, which loads an artifact.
        min_capacity / max_capacity: its scalable target's hard bounds, in ``unit_of_scale`` (an adapter component's
            are its base's: it is loaded into every copy of the base and reserves nothing of its own).
        unit_of_scale: ``instances`` (a variant) or ``copies`` (a component).
        scaling: its resolved scaling section: ``scaling.<key>`` of a variant or the shadow, the base component's
            copy scaling; None for an adapter component (it scales with the base).
        weight: a production variant's ``InitialVariantWeight``; the shadow's copy share of the primary's; None for
            a component.
    """

    key: str
    role: UnitRole
    name: str
    variant_name: str
    hardware: Hardware
    image: ImageKey | None
    min_capacity: int
    max_capacity: int
    unit_of_scale: Literal["instances", "copies"]
    scaling: VariantScalingConfig | ShadowScalingConfig | ComponentScalingConfig | None
    weight: float | None

    @property
    def is_variant(self) -> bool:
        """A production variant (primary or canary): traffic by weight, instance scaling, schedules, blue/green."""
        return self.role == "variant"

    @property
    def is_component(self) -> bool:
        return self.role in ("base_component", "adapter_component")


def deployed_units(
    serving: ServingConfig,
    scaling: ScalingConfig,
    components: InferenceComponentsConfig,
    hardware: dict[HardwareKey, Hardware],
    *,
    endpoint_name: str,
    adapters: tuple[str, ...],
) -> tuple[Unit, ...]:
    """The units the endpoint deploys, in deployment order: the primary, the canary when enabled and the shadow
    when on (variants mode); the base component, then one per adapter (inference_components mode).

    ``scaling`` and ``components`` are the resolved sections (``planning/resolved_plan.py``); ``hardware`` has an
    entry for every variant that runs.
    """
    if serving.hosts_inference_components:
        return _component_units(serving, components, hardware["primary"], endpoint_name, adapters)
    variants: tuple[tuple[Literal["primary", "canary"], VariantConfig, VariantScalingConfig], ...] = (
        ("primary", serving.primary, scaling.primary),
        ("canary", serving.canary, scaling.canary),
    )
    units = [
        Unit(
            key=key,
            role="variant",
            name=shape.variant_name,
            variant_name=shape.variant_name,
            hardware=hardware[key],
            image=key,
            min_capacity=shape.min_capacity,
            max_capacity=shape.max_capacity,
            unit_of_scale="instances",
            scaling=variant_scaling,
            weight=shape.initial_weight,
        )
        for key, shape, variant_scaling in variants
        if key == "primary" or serving.canary.enabled
    ]
    if serving.shadow.enabled:
        shadow = serving.shadow
        units.append(
            Unit(
                key="shadow",
                role="shadow",
                name=shadow.variant_name,
                variant_name=shadow.variant_name,
                hardware=hardware["shadow"],
                image="shadow",
                min_capacity=shadow.min_capacity,
                max_capacity=shadow.max_capacity,
                unit_of_scale="instances",
                scaling=scaling.shadow,
                weight=shadow.weight(serving.primary.initial_weight),
            )
        )
    return tuple(units)


def _component_units(
    serving: ServingConfig,
    components: InferenceComponentsConfig,
    hardware: Hardware,
    endpoint_name: str,
    adapters: tuple[str, ...],
) -> tuple[Unit, ...]:
    """The base component and one per adapter, all on the primary variant's instances."""
    variant = serving.primary.variant_name
    base = Unit(
        key="base",
        role="base_component",
        name=base_component_name(endpoint_name),
        variant_name=variant,
        hardware=hardware,
        image="primary",
        min_capacity=components.min_copy_count,
        max_capacity=components.max_copy_count,
        unit_of_scale="copies",
        scaling=components.scaling,
        weight=None,
    )
    return (
        base,
        *(
            Unit(
                key=adapter,
                role="adapter_component",
                name=adapter_component_name(endpoint_name, adapter),
                variant_name=variant,
                hardware=hardware,
                image=None,
                min_capacity=components.min_copy_count,
                max_capacity=components.max_copy_count,
                unit_of_scale="copies",
                scaling=None,
                weight=None,
            )
            for adapter in adapters
        ),
    )
