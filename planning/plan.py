"""What a validated config plans: the one object synth, ``make plan``, ``make simulate`` and ops read.

The config (``app_config``) is plain data. What follows from it is a :class:`Plan`: the values the
config leaves to be derived, derived (``planning/resolved_plan.py``: concurrency and KV-cache
targets, scale-in thresholds, dated-event floors, the copy target), the variants with their
resolved scaling, prefix-aware routing's two fields, and the :class:`~planning.planner.Planner`
that gives the throughput and memory plan of this config's engine on any instance type.

``planning/make_plan.py`` builds it and runs the checks that need it; the modules that read a plan
(the checks, the verdicts, the recommender, the reports) import this one, which imports none of them.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from app_config.inference_components import InferenceComponentsConfig
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig
from app_config.variants import VARIANT_KEYS, Variant, VariantKey
from planning.hardware import Hardware, HardwareKey
from planning.planner import Planner
from planning.prefix_routing import PrefixRouting
from planning.units import Unit

__all__ = ["Plan", "Planner"]
"""``Planner`` lives in planning/planner.py; it is named here too while benchmarks/gpu_capacity.py imports it from
this module (that folder is another change's: it moves to ``planning.planner`` there)."""


@dataclass(frozen=True)
class Plan:
    """The derived values of one validated config, and its planner.

    Attributes:
        planner: throughput and memory on any instance type.
        serving: ``config.serving`` (the variants' bounds; unchanged).
        scaling: ``config.scaling`` with every unset derived value derived (planning/resolved_plan.py).
        inference_components: ``config.serving.inference_components`` with its copy target derived.
        prefix_routing: ``PrefixAwareRoutingConfig``'s fields when ``throughput.routing`` is
            ``prefix_aware``, else None.
        hardware: each variant's instance types with the engine on each (planning/hardware.py): the
            primary, the canary (even while disabled: enabling it is a ``-c`` away) and the shadow when on.
        units: every unit the endpoint deploys, in deployment order (planning/units.py): what exists is decided
            there, once, from the serving mode and the variants' switches; readers walk these.
    """

    planner: Planner
    serving: ServingConfig
    scaling: ScalingConfig
    inference_components: InferenceComponentsConfig
    prefix_routing: PrefixRouting | None
    hardware: Mapping[HardwareKey, Hardware]
    units: tuple[Unit, ...]

    def unit(self, key: str) -> Unit | None:
        """The deployed unit ``key`` (``primary``, ``canary``, ``shadow``, ``base`` or an adapter), or None."""
        return next((unit for unit in self.units if unit.key == key), None)

    @property
    def instance_units(self) -> tuple[Unit, ...]:
        """The units that own instances and serve traffic: the production variants, or the base component (its
        variant's instances run its copies). Not the shadow (it answers nobody) nor an adapter component."""
        return tuple(unit for unit in self.units if unit.role in ("variant", "base_component"))

    def variant(self, key: VariantKey) -> Variant:
        """The variant ``key`` with its ``serving`` section and its resolved ``scaling``, enabled or not."""
        return Variant(key, getattr(self.serving, key), getattr(self.scaling, key))

    def variants(self) -> tuple[Variant, ...]:
        """The production variants that exist, primary first: the canary only when ``serving.canary.enabled``."""
        return tuple(self.variant(key) for key in VARIANT_KEYS if key == "primary" or self.serving.canary.enabled)

    def deployed_variants(self) -> tuple[Variant, ...]:
        """The variants the endpoint has, as :meth:`variant` gives them: those of :attr:`instance_units` (in
        inference_components mode, the one variant that hosts the components)."""
        names = {unit.variant_name for unit in self.instance_units}
        return tuple(variant for variant in self.variants() if variant.name in names)

    def instance_unit(self, variant_name: str) -> Unit:
        """The unit of :attr:`instance_units` on the production variant ``variant_name``.

        Raises:
            KeyError: no deployed variant has that name.
        """
        for unit in self.instance_units:
            if unit.variant_name == variant_name:
                return unit
        raise KeyError(variant_name)
