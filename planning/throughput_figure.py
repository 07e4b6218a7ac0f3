"""One instance's throughput at the TTFT SLOs, as every report prints it: the figure's shape.

A leaf: :func:`planning.throughput_at_slo.throughput_at_slo` makes it from the engine model, and
:mod:`planning.measured_capacity` from a measurement; both import it from here, so neither imports the other.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class ThroughputAtSlo:
    """One instance's throughput at the TTFT SLOs.

    Attributes:
        instance_type: e.g. ``ml.g6e.xlarge``.
        requests_per_minute: the highest arrival rate one instance holds the SLO(s) at, requests
            per minute (its engines together), after the model's margin.
        concurrency: requests in flight per instance at that rate (Little's law on the model's
            steady state, at least 1): what target tracking's concurrency metric reads there.
        base_ttft_ms: TTFT p50 of a cold request with no other load, ms.
        holds_slo: False when even the lightest load misses; the other figures are then those of
            the lightest load (one request a minute).
        source: ``measured <how>`` or ``projected from <GPU> to <GPU> (model error X %)`` or
            ``model fitted on this GPU's runs``.
        measured: True for ``throughput.measured``; False for the model.
        margin: how far the model may be off, a fraction (its held-out error, plus a projection's
            spread; 0 for a measurement): ``requests_per_minute`` is the model's rate divided by
            ``1 + margin`` (``engine_model.capacity``).
        ttft_p95_ms: the judged class's TTFT p95 at ``requests_per_minute`` (the highest of the
            two when both are judged), ms, before the margin; None for a measurement.
        cliff_per_minute: the arrival rate per instance at which it collapses (model only; ``inf``
            for a measurement, which does not say).
        kv_cache_usage: the KV cache's share in use at ``requests_per_minute`` (0-1; what the
            gateway's ``KvCacheUsagePercent`` / 100 reads there); None for a measurement.
        cold_share: the share of cold requests there; None for a measurement.
        lightest_ttft_p95_ms: the judged TTFT p95 at the lightest load (one request a minute), ms,
            before the margin: an SLO at or above it grown by the margin holds at some load; None
            for a measurement.
        projected: True when the engine model was carried to a GPU its runs were not made on.
        model_requests_per_minute: ``requests_per_minute`` as the model gives it, before the
            margin (equal to it for a measurement).
    """

    instance_type: str
    requests_per_minute: float
    concurrency: int
    base_ttft_ms: float
    holds_slo: bool
    source: str
    measured: bool
    margin: float
    ttft_p95_ms: float | None
    cliff_per_minute: float
    kv_cache_usage: float | None
    cold_share: float | None
    lightest_ttft_p95_ms: float | None
    projected: bool = False
    model_requests_per_minute: float | None = None

    @property
    def label(self) -> str:
        """How every report prints a capacity figure's standing: ``measured`` (``throughput.measured``, on
        the instance type itself), ``modelled`` (the engine model on the GPU its runs were made on) or
        ``projected`` (the model carried to another GPU). Both model figures carry the model's margin."""
        if self.measured:
            return "measured"
        return "projected" if self.projected else "modelled"
