"""The ``capacity`` section (the key keeps its name): where each instance's throughput at the TTFT
SLOs comes from.

The projection these settings select is :mod:`planning.throughput_at_slo`.
"""

from typing import Literal

from pydantic import Field

from app_config.base import ConfigModel


class MeasuredThroughput(ConfigModel):
    """One instance type's throughput at the SLO, as ``python -m ops load`` measured it."""

    concurrency: int = Field(ge=1, le=1024, description="Concurrent requests per instance at the SLO.")
    requests_per_minute: float = Field(gt=0, le=100000, description="Requests completed per minute at that level.")
    ttft_p50_ms: float = Field(gt=0, le=60000, description="TTFT p50 at one concurrent request, ms.")


class ThroughputConfig(ConfigModel):
    """Where the per-instance throughput at the TTFT SLO comes from (see planning/throughput_at_slo.py)."""

    routing: Literal["least_outstanding", "session_affinity", "prefix_aware"] = Field(
        default="prefix_aware",
        description=(
            "How follow-up turns reach engines: least_outstanding (SageMaker's routing without sessions: the fresh "
            "curve), session_affinity (clients use stateful sessions: the conversations curve) or prefix_aware "
            "(the endpoint config's RoutingStrategy PREFIX_AWARE, derived PrefixLength and ConcurrencyThreshold: "
            "the conversations curve with no client change; docs/planning.md)."
        ),
    )
    measured: dict[str, MeasuredThroughput] = Field(
        default={},
        description=(
            "Capacity measured in the account per instance type (python -m ops load prints the keys); overrides the "
            "open-loop engine model (planning/throughput_at_slo.py)."
        ),
    )
