"""What a validated config plans: the one object synth, ``make plan``, ``make simulate`` and ops read.

The config (``app_config``) is plain data. What follows from it lives here:

* :class:`Planner`: the throughput at the SLOs and the memory plan of this config's engine on
  any instance type, from the sections they depend on (``slo``, ``capacity``, ``traffic``,
  ``engine``, ``model``, ``memory_plan``);
* :class:`Plan`: the values the config leaves to be derived, derived (``planning/resolved_plan.py``:
  concurrency and KV-cache targets, scale-in thresholds, dated-event floors, the copy target),
  the variants with their resolved scaling, and prefix-aware routing's two fields.

:func:`make_plan` builds the plan and runs the checks that need it (``planning/checks.py``): a
config whose plan cannot be made, or whose fleet could not start or hold its SLOs, is a config
error, one line, before any construct exists (``app.py``; the tools' :func:`load_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app_config.engine import EngineConfig
from app_config.errors import ConfigError
from app_config.inference_components import InferenceComponentsConfig
from app_config.llm import ModelConfig
from app_config.loader import CDK_JSON, load_cli_config
from app_config.memory_plan_config import MemoryPlanConfig
from app_config.root import AppConfig
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig
from app_config.slo import SloConfig
from app_config.throughput_config import ThroughputConfig
from app_config.traffic import TrafficConfig
from app_config.variants import VARIANT_KEYS, Variant, VariantKey
from planning.engine_memory import plan_for_instance
from planning.memory_plan import MemoryPlan
from planning.prefix_routing import PrefixRouting, concurrency_threshold, prefix_length_bytes
from planning.throughput_at_slo import ThroughputAtSlo, throughput_at_slo
from serving_contract.request_classes import RequestClass


@dataclass(frozen=True)
class Planner:
    """This config's engine on any instance type: throughput at the SLOs and memory plan."""

    slo: SloConfig
    capacity: ThroughputConfig
    traffic: TrafficConfig
    engine: EngineConfig
    model: ModelConfig
    memory: MemoryPlanConfig

    @classmethod
    def of(cls, config: AppConfig) -> Planner:
        """The planner of ``config``'s sections."""
        return cls(config.slo, config.capacity, config.traffic, config.engine, config.model, config.memory_plan)

    def throughput(
        self, instance_type: str, request_class: RequestClass | None = None, *, instances: int | None = None
    ) -> ThroughputAtSlo:
        """One ``instance_type`` instance at both SLOs (``request_class`` None) or one class's
        (:func:`planning.throughput_at_slo.throughput_at_slo`).

        Raises:
            ValueError: the instance type is unknown or the model does not fit its GPU (one line).
        """
        return throughput_at_slo(
            instance_type,
            slo=self.slo,
            capacity_config=self.capacity,
            traffic=self.traffic,
            engine=self.engine,
            model=self.model,
            memory=self.memory,
            request_class=request_class,
            instances=instances,
        )

    def memory_plan(self, instance_type: str) -> MemoryPlan:
        """The memory plan of one engine on ``instance_type`` (raises ValueError as the memory plan does)."""
        return plan_for_instance(instance_type, model=self.model, engine=self.engine, memory=self.memory)


@dataclass(frozen=True)
class Plan:
    """The derived values of one validated config, and its planner.

    Attributes:
        planner: throughput and memory on any instance type.
        serving: ``config.serving`` (the variants' bounds; unchanged).
        scaling: ``config.scaling`` with every unset derived value derived (planning/resolved_plan.py).
        inference_components: ``config.serving.inference_components`` with its copy target derived.
        prefix_routing: ``PrefixAwareRoutingConfig``'s fields when ``capacity.routing`` is
            ``prefix_aware``, else None.
    """

    planner: Planner
    serving: ServingConfig
    scaling: ScalingConfig
    inference_components: InferenceComponentsConfig
    prefix_routing: PrefixRouting | None

    def variant(self, key: VariantKey) -> Variant:
        """The variant ``key`` with its ``serving`` section and its resolved ``scaling``, enabled or not."""
        return Variant(key, getattr(self.serving, key), getattr(self.scaling, key))

    def variants(self) -> tuple[Variant, ...]:
        """The production variants that exist, primary first: the canary only when ``serving.canary.enabled``."""
        return tuple(self.variant(key) for key in VARIANT_KEYS if key == "primary" or self.serving.canary.enabled)

    def deployed_variants(self) -> tuple[Variant, ...]:
        """The variants the endpoint has: :meth:`variants`, less the canary in inference_components
        mode (one variant hosts the components)."""
        if self.serving.hosts_inference_components:
            return (self.variant("primary"),)
        return self.variants()


def make_plan(config: AppConfig) -> Plan:
    """The plan of ``config``, after the checks that need one (``planning/checks.py``).

    Raises:
        ConfigError: one line naming the key, the value and what is allowed.
    """
    # Here, not at the top: resolved_plan and checks read Plan's fields back through Planner.
    from planning.checks import check_before_plan, check_plan  # noqa: PLC0415 (the checks import this module)
    from planning.resolved_plan import resolve  # noqa: PLC0415 (resolve takes a Planner defined here)

    try:
        check_before_plan(config)
        planner = Planner.of(config)
        resolved = resolve(config, planner)
        routing = None
        if config.capacity.routing == "prefix_aware":
            routing = PrefixRouting(
                prefix_length_bytes=prefix_length_bytes(config.traffic.request_shape),
                concurrency_threshold=concurrency_threshold(
                    planner.throughput(config.serving.primary.instance_type).concurrency
                ),
            )
        plan = Plan(planner, config.serving, resolved.scaling, resolved.inference_components, routing)
        check_plan(config, plan)
    except ValueError as error:
        raise ConfigError([str(error)]) from None
    return plan


def load_plan(
    overrides: Mapping[str, str] | Sequence[str] = (), *, cdk_json: Path = CDK_JSON, stage: str | None = None
) -> tuple[AppConfig, Plan]:
    """The config and plan a command-line tool works from: :func:`app_config.loader.load_cli_config`
    (``cdk.json`` and ``-c key=value``, as ``cdk synth``), then :func:`make_plan`.

    Raises:
        ConfigError: one line per problem.
    """
    config = load_cli_config(overrides, cdk_json=cdk_json, stage=stage)
    return config, make_plan(config)
