"""Whether each variant's instance type can hold each request class's TTFT SLO, said at synth.

A TTFT guardrail its fleet cannot hold is an outage trap, not a safety net: the alarm pages all
day and every blue/green update rolls back. So for every deployed variant and request class the
synth says, in one line, whether the instance type holds ``slo.<class>.ttft_p95_ms`` by the
class's curve (app_config/planning/throughput_at_slo.py: ``capacity.measured``, else the projection; cold = the
fresh first-turn curve, warm = the conversations curve), the projected figure, and what would
hold it. While ``slo.require_holdable`` is False (the default until the defaults hold both
classes) an unholdable class is a WARNING in the synth summary; True makes it a config error
that stops synth.
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app_config.planning.gpu_instances import INSTANCE_GPUS, instance_gpus
from serving_contract.request_classes import RequestClass

if TYPE_CHECKING:
    from app_config.root import AppConfig


@dataclass(frozen=True)
class ClassHold:
    """One variant's instance type against one request class's TTFT p95 objective.

    Attributes:
        variant_name: the production variant.
        variant_key: ``primary`` or ``canary`` (the config key of its instance type).
        instance_type: e.g. ``ml.g5.xlarge``.
        request_class: ``cold`` or ``warm``.
        slo_ms: ``slo.<class>.ttft_p95_ms``.
        holds: True when at least one concurrent request per instance stays within it.
        concurrency: concurrent requests per instance at the SLO (1 when it does not hold).
        ttft_p95_ms: the projected TTFT p95 at ``concurrency``, ms; None for a measurement.
        base_ttft_ms: TTFT p50 at one concurrent request, ms.
        source: where the figures come from.
        alternative: the instance type that would hold it (cheapest priced, else the first in
            the config's instance list), with its projected p95 at 1 concurrent; None if none does.
    """

    variant_name: str
    variant_key: str
    instance_type: str
    request_class: str
    slo_ms: float
    holds: bool
    concurrency: int
    ttft_p95_ms: float | None
    base_ttft_ms: float
    source: str
    alternative: tuple[str, float] | None

    @property
    def key(self) -> str:
        """The config key of the objective, e.g. ``slo.cold.ttft_p95_ms``."""
        return f"slo.{self.request_class}.ttft_p95_ms"

    def _figure(self) -> str:
        if self.ttft_p95_ms is None:
            return f"measured TTFT p50 {self.base_ttft_ms:,.0f} ms at 1 concurrent request"
        requests = "request" if self.concurrency == 1 else "requests"
        return f"projected TTFT p95 {self.ttft_p95_ms:,.0f} ms at {self.concurrency} concurrent {requests}"

    @property
    def problem(self) -> str:
        """One line: the key, the projected figure and what would hold it (for an unholdable class)."""
        floor = self.ttft_p95_ms if self.ttft_p95_ms is not None else self.base_ttft_ms
        fixes = [f"{self.key} >= {math.ceil(floor):,}"]
        if self.alternative is not None:
            other, p95 = self.alternative
            fixes.append(f"serving.{self.variant_key}.instance_type = {other} (projected {p95:,.0f} ms)")
        return (
            f"{self.key} = {self.slo_ms:g} ms: variant {self.variant_name} ({self.instance_type}) cannot hold it, "
            f"{self._figure()} ({self.source}); would hold: {' or '.join(fixes)}"
        )

    @property
    def line(self) -> str:
        """The synth summary's line for this variant and class."""
        if not self.holds:
            return f"WARNING: {self.problem}"
        return (
            f"{self.key} = {self.slo_ms:g} ms: variant {self.variant_name} ({self.instance_type}) holds it up to "
            f"{self._figure().removeprefix('projected ')}"
        )


def _alternative(config: "AppConfig", request_class: RequestClass) -> tuple[str, float] | None:
    """The cheapest priced instance type that holds the class's SLO, else the first that does."""
    holding = []
    for instance_type in INSTANCE_GPUS:
        try:
            capacity = config.throughput_of(instance_type, request_class)
        except ValueError:  # no projection for its GPU
            continue
        if capacity.holds_slo and capacity.ttft_p95_ms is not None:
            holding.append((instance_type, capacity.ttft_p95_ms))
    priced = [h for h in holding if h[0] in config.scaling.hourly_price_usd]
    if priced:
        return min(priced, key=lambda h: config.scaling.hourly_price_usd[h[0]])
    return holding[0] if holding else None


def class_holds(config: "AppConfig") -> list[ClassHold]:
    """Every deployed variant against every request class, primary first, cold before warm.

    Raises:
        ValueError: a variant's instance type has no measurement and no projection.
    """
    holds = []
    for variant in config.deployed_variants():
        instance_type = variant.serving.instance_type
        for klass in RequestClass:
            capacity = config.throughput_of(instance_type, klass)
            holds.append(
                ClassHold(
                    variant_name=variant.serving.variant_name,
                    variant_key=variant.key,
                    instance_type=instance_type,
                    request_class=klass.value,
                    slo_ms=config.slo.of(klass).ttft_p95_ms,
                    holds=capacity.holds_slo,
                    concurrency=capacity.concurrency,
                    ttft_p95_ms=capacity.ttft_p95_ms,
                    base_ttft_ms=capacity.base_ttft_ms,
                    source=(
                        f"{capacity.curve} curve projected to {instance_gpus(instance_type).gpu.name}"
                        if capacity.curve
                        else capacity.source
                    ),
                    alternative=None if capacity.holds_slo else _alternative(config, klass),
                )
            )
    return holds


def check_holdable(config: "AppConfig") -> None:
    """With ``slo.require_holdable``, stop at the first class a variant cannot hold.

    Raises:
        ValueError: one line naming the key, the projected figure and what would hold it.
    """
    if not config.slo.require_holdable:
        return
    for hold in class_holds(config):
        if not hold.holds:
            raise ValueError(f"{hold.problem} (slo.require_holdable: a guardrail that always fires is an outage trap)")
