"""Whether each variant's instance type holds each request class's TTFT SLO, said at synth.

A TTFT guardrail its fleet cannot hold is an outage trap, not a safety net: the alarm pages all
day and every blue/green update rolls back. So for every deployed variant and request class the
synth says, in one line, whether the instance type holds ``slo.<class>.ttft_p95_ms``, up to what
arrival rate per instance, with what margin, and whether that figure was measured on the
instance type (``throughput.measured``) or projected by the open-loop engine model
(planning/throughput_at_slo.py). A projection holds only if its p95 grown by the model's error
stays within the SLO. With ``slo.require_holdable`` (the default) a class a variant cannot hold
stops synth with one line naming the fleet ``make plan`` recommends instead; without it, a
WARNING in the synth summary.
"""

import math
from dataclasses import dataclass

from app_config.root import AppConfig
from planning.fleet_planner import recommend
from planning.plan import Plan
from planning.throughput_figure import ThroughputAtSlo
from serving_contract.request_classes import RequestClass


@dataclass(frozen=True)
class ClassHold:
    """One variant's instance type against one request class's TTFT p95 objective.

    Attributes:
        variant_name: the production variant.
        variant_key: ``primary`` or ``canary`` (the config key of its instance type).
        request_class: ``cold`` or ``warm``.
        slo_ms: ``slo.<class>.ttft_p95_ms``.
        capacity: the instance type's throughput at this class's SLO (requests per minute, the
            p95 there, measured or projected, the margin).
        alternative: what would hold it: the fleet ``make plan`` recommends (one line), or for a fallback
            pool, dropping it from ``instance_pools``; None when nothing is known to.
        priority: the instance type's pool, 1 (the variant's ``instance_type``) to 5 (``instance_pools``).
    """

    variant_name: str
    variant_key: str
    request_class: str
    slo_ms: float
    capacity: ThroughputAtSlo
    alternative: str | None
    priority: int = 1

    @property
    def _where(self) -> str:
        """``variant primary (ml.g6e.xlarge)``; a fallback pool's ``(ml.g6.xlarge, pool 2)``."""
        pool = f", pool {self.priority}" if self.priority > 1 else ""
        return f"variant {self.variant_name} ({self.capacity.instance_type}{pool})"

    @property
    def holds(self) -> bool:
        return self.capacity.holds_slo

    @property
    def key(self) -> str:
        """The config key of the objective, e.g. ``slo.cold.ttft_p95_ms``."""
        return f"slo.{self.request_class}.ttft_p95_ms"

    def _standing(self) -> str:
        return standing(self.capacity)

    def _figure(self) -> str:
        capacity = self.capacity
        if capacity.ttft_p95_ms is None:
            return f"{capacity.requests_per_minute:,.0f} req/min per instance, TTFT p50 {capacity.base_ttft_ms:,.0f} ms"
        model = capacity.model_requests_per_minute
        model_text = "" if model is None else f"the model's {model:,.0f} less the {capacity.margin:.0%} margin, "
        return (
            f"{capacity.requests_per_minute:,.0f} req/min per instance ({model_text}TTFT p95 "
            f"{capacity.ttft_p95_ms:,.0f} ms there)"
        )

    @property
    def problem(self) -> str:
        """One line: the key, the figure with its standing, and what would hold it."""
        capacity = self.capacity
        fixes = []
        if capacity.lightest_ttft_p95_ms is not None and math.isfinite(capacity.lightest_ttft_p95_ms):
            fixes.append(f"{self.key} >= {self.suggested_slo_ms:,}")
        if self.alternative is not None:
            fixes.append(self.alternative)
        lightest = (
            f"TTFT p95 {capacity.lightest_ttft_p95_ms:,.0f} ms at one request a minute"
            if capacity.lightest_ttft_p95_ms is not None
            else f"TTFT p50 {capacity.base_ttft_ms:,.0f} ms"
        )
        return (
            f"{self.key} = {self.slo_ms:g} ms: {self._where} cannot hold it at any load: {lightest} "
            f"({self._standing()}); would hold: {' or '.join(fixes) or 'nothing configured'}"
        )

    @property
    def suggested_slo_ms(self) -> int:
        """The lowest objective this instance type holds at the lightest load: the p95 there grown by
        the margin, rounded up (measured figures: the measured TTFT p50)."""
        capacity = self.capacity
        floor = capacity.lightest_ttft_p95_ms if capacity.lightest_ttft_p95_ms is not None else capacity.base_ttft_ms
        return math.ceil(floor * (1 + capacity.margin))

    @property
    def line(self) -> str:
        """The synth summary's line for this variant and class."""
        if not self.holds:
            return f"WARNING: {self.problem}"
        return f"{self.key} = {self.slo_ms:g} ms: {self._where} holds it up to {self._figure()}; {self._standing()}"


MEASURE_SECTION = "docs/planning.md, 'Measure before you buy'"


def standing(capacity: ThroughputAtSlo) -> str:
    """Where a figure comes from, in every report's words: ``measured <date> (<job or ops load>)``,
    ``modelled, margin X%: ...`` (the GPU the engine model was fitted on) or ``projected, margin X%:
    projected from <GPU> to <GPU> (held-out error X% + ...)``."""
    if capacity.measured:
        return capacity.source
    return f"{capacity.label}, margin {capacity.margin:.0%}: {capacity.source}"


def measure_line(capacity: ThroughputAtSlo) -> str | None:
    """For a figure that rests on the engine model, not a measurement: the one command that would
    measure it on the instance type itself; None for a measured one."""
    if capacity.measured:
        return None
    return (
        f"{capacity.instance_type}'s figures are {capacity.label}, not measured: measure them with "
        f"`python -m ops throughput measure --instance-type {capacity.instance_type}` ({MEASURE_SECTION})"
    )


def _alternative(config: AppConfig, plan: Plan, variant_key: str) -> str | None:
    """The fleet the one recommender (planning/fleet_planner.py) picks at both SLOs, as a config change."""
    best = recommend(config, plan.planner)
    if best is None:
        return None
    return (
        f"serving.{variant_key}.instance_type = {best.instance_type} with throughput.routing = {best.routing} "
        f"({best.requests_per_minute:,.0f} req/min per instance, {best.label}; make plan)"
    )


def _drop_pool(variant_key: str, instance_type: str) -> str:
    """The fix for a fallback pool that cannot hold a class: SageMaker may fill the whole variant with it."""
    return f"serving.{variant_key}.instance_pools without {instance_type}"


def class_holds(config: AppConfig, plan: Plan) -> list[ClassHold]:
    """Every deployed variant's every instance type against every request class: primary first, each
    variant's pools in priority order, cold before warm.

    Raises:
        ValueError: a variant's instance type is unknown or the model does not fit its GPU.
    """
    holds = []
    for variant in plan.deployed_variants():
        for pool in plan.hardware[variant.key].pools:
            for klass in RequestClass:
                capacity = plan.planner.throughput(pool.instance_type, klass)
                alternative = None
                if not capacity.holds_slo:
                    alternative = (
                        _alternative(config, plan, variant.key)
                        if pool.priority == 1
                        else _drop_pool(variant.key, pool.instance_type)
                    )
                holds.append(
                    ClassHold(
                        variant_name=variant.serving.variant_name,
                        variant_key=variant.key,
                        request_class=klass.value,
                        slo_ms=config.slo.of(klass).ttft_p95_ms,
                        capacity=capacity,
                        alternative=alternative,
                        priority=pool.priority,
                    )
                )
    return holds


def check_holdable(config: AppConfig, plan: Plan) -> None:
    """With ``slo.require_holdable``, stop at the first class a variant cannot hold.

    Raises:
        ValueError: one line naming the key, the figure and what would hold it.
    """
    if not config.slo.require_holdable:
        return
    for hold in class_holds(config, plan):
        if not hold.holds:
            raise ValueError(f"{hold.problem} (slo.require_holdable: a guardrail that always fires is an outage trap)")
