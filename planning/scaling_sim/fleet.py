"""The variant's instances and the fluid, per-minute queue model of their engines.

Each InService instance runs one vLLM engine that holds at most ``concurrency`` sequences (the
memory plan's ``concurrency_ceiling``) and completes ``requests_per_minute`` of them at full
concurrency. By Little's law a request then lasts ``60 x concurrency / requests_per_minute``
seconds. Demand the fleet cannot serve in a minute waits in a backlog (vLLM's waiting queue)
and is served first (oldest first) the next minute.

Clients give up: with ``patience_s`` set, requests still waiting once their mean wait exceeds it
(arrivals of minute ``a`` unserved at the end of minute ``t`` have waited ``(t - a + 0.5) x 60`` s
on average) leave the backlog and count as abandoned, instead of queueing for the rest of the
week. The CLI sets it to ``container.request_timeout_s`` (55 s): the container answers 504 then,
under SageMaker's 60 s InvokeEndpoint limit, so no client is still waiting after it. Without it
nothing is dropped.

New instances are InService ``provision_min + startup_min`` after the desired capacity rises.
Scale-in removes instances at once: launches still pending go first (newest first), then
InService ones; connection draining is ignored.
"""

import bisect
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineCurve:
    """One instance's steady state against the arrival rate it takes, from the open-loop engine
    model (planning/engine_model.py): what the fleet's minute reads off it.

    Attributes:
        rates: requests per minute per instance, increasing, from 0 to just below the cliff.
        ttft_p95_ms: the worse class's TTFT p95 at each rate, ms.
        kv_cache_usage: the KV cache's share in use at each rate (0-1): the gateway's
            ``KvCacheUsagePercent`` / 100, the leading signal.
        running: requests in the engine at each rate.
        cliff_per_minute: the rate per instance at which it collapses (planning.engine_model.capacity).
        collapsed_ttft_ms: the TTFT p95 a minute past the cliff counts at, at least: the cliff's own
            definition (twice the highest SLO; the H200 runs measured 1.2-5.4 s there).
    """

    rates: tuple[float, ...]
    ttft_p95_ms: tuple[float, ...]
    kv_cache_usage: tuple[float, ...]
    running: tuple[float, ...]
    cliff_per_minute: float
    collapsed_ttft_ms: float

    def at(self, rate: float) -> tuple[float, float, float]:
        """``(TTFT p95 ms, KV usage, running)`` at ``rate`` per instance, linear in between;
        the last point's figures at and past the cliff (the minute's ``past_cliff`` says so)."""
        if rate >= self.rates[-1]:
            return self.ttft_p95_ms[-1], self.kv_cache_usage[-1], self.running[-1]
        index = max(bisect.bisect_right(self.rates, rate) - 1, 0)
        low, high = self.rates[index], self.rates[index + 1]
        share = (rate - low) / (high - low) if high > low else 0.0

        def between(values: tuple[float, ...]) -> float:
            return values[index] + share * (values[index + 1] - values[index])

        return between(self.ttft_p95_ms), between(self.kv_cache_usage), between(self.running)


@dataclass(frozen=True)
class ServiceModel:
    """Per-instance serving capacity and latency.

    Attributes:
        concurrency: sequences one engine runs at once (memory plan ``concurrency_ceiling``).
        requests_per_minute: requests one instance completes per minute at full concurrency.
        base_ttft_ms: time to first token with an empty queue, ms.
        patience_s: seconds a client waits before it gives up on a queued request (module
            docstring); None = clients wait forever.
    """

    concurrency: int
    requests_per_minute: float
    base_ttft_ms: float
    patience_s: float | None = None
    engine: EngineCurve | None = None
    """The open-loop engine model's curve of this instance type. With it, an instance serves up to its
    cliff (past which it has collapsed), and TTFT p95, KV usage and running requests are read off
    it at the minute's rate per instance; without it (``--instance-rpm``), the fluid model above."""

    @property
    def service_rate_per_minute(self) -> float:
        """What one instance completes per minute when full: its cliff with the engine curve, else
        ``requests_per_minute``."""
        return self.engine.cliff_per_minute if self.engine is not None else self.requests_per_minute

    @property
    def request_duration_s(self) -> float:
        """Little's law at full concurrency: D = 60 x C / R seconds."""
        return 60 * self.concurrency / self.requests_per_minute


@dataclass(frozen=True)
class MinuteLoad:
    """What the InService instances did in one minute; per-instance figures are Averages.

    ``queued`` is the backlog left at the end of the minute (requests), after ``abandoned``
    requests gave up; ``ttft_ms`` is the base TTFT plus the mean wait of that backlog at the
    fleet's service rate (``inf`` with no instance in service).
    """

    in_service: int
    offered: float
    served: float
    queued: float
    running: float
    ttft_ms: float
    abandoned: float = 0.0
    kv_cache_usage: float = 0.0
    """The engine curve's KV cache usage at the minute's rate per instance (0-1; 0 without a curve)."""
    past_cliff: bool = False
    """The minute's demand per InService instance reached the engine's cliff (prefix cache lost,
    TTFT in seconds): what the leading-signal policy exists to avoid."""

    def per_instance(self, total: float) -> float:
        return total / self.in_service if self.in_service else 0.0

    @property
    def invocations_per_instance(self) -> float:
        """SageMaker ``InvocationsPerInstance`` (per minute)."""
        return self.per_instance(self.served)

    @property
    def running_per_instance(self) -> float:
        """The container's ``RunningRequests`` (vLLM sequences in the batch), Average."""
        return self.per_instance(self.running)

    @property
    def queue_per_instance(self) -> float:
        """The container's ``QueueDepth`` (vLLM waiting requests), Average."""
        return self.per_instance(self.queued)

    @property
    def kv_cache_usage_percent(self) -> float:
        """The container's ``KvCacheUsagePercent``, Average over the variant."""
        return 100 * self.kv_cache_usage

    @property
    def concurrent_per_instance(self) -> float:
        """``SageMakerVariantConcurrentRequestsPerModelHighResolution``: in flight + queued, per instance."""
        return self.per_instance(self.running + self.queued)


@dataclass
class Fleet:
    """Desired capacity, InService instances and pending launches (their InService minute)."""

    service: ServiceModel
    launch_delay_min: int
    in_service: int
    pending: list[int] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    """Unserved requests by age: ``waiting[0]`` arrived in the minute last served, ``waiting[1]`` the one before."""

    @property
    def backlog(self) -> float:
        """Requests waiting, all ages."""
        return sum(self.waiting)

    @property
    def desired(self) -> int:
        return self.in_service + len(self.pending)

    def set_desired(self, desired: int, minute: int) -> None:
        """Launch or remove instances so that ``desired`` are InService or pending after ``minute``."""
        if desired > self.desired:
            self.pending += [minute + self.launch_delay_min] * (desired - self.desired)
            return
        excess = self.desired - desired
        cancelled = min(excess, len(self.pending))
        # Newest launches go first: their instances are the furthest from serving.
        self.pending = sorted(self.pending)[: len(self.pending) - cancelled]
        self.in_service -= excess - cancelled

    def admit(self, minute: int) -> None:
        """Launches whose provisioning and start-up finished by ``minute`` join the service."""
        ready = [at for at in self.pending if at <= minute]
        if ready:
            self.in_service += len(ready)
            self.pending = [at for at in self.pending if at > minute]

    def serve(self, demand: float) -> MinuteLoad:
        """Serve one minute of ``demand`` (plus the backlog, oldest first) with the InService
        instances; then the requests whose clients' patience ran out leave the backlog."""
        service = self.service
        offered = demand + self.backlog
        capacity = self.in_service * service.service_rate_per_minute
        served = min(offered, capacity)
        left = capacity
        # Oldest first: cohorts in the order they arrived, this minute's demand last.
        cohorts = [*reversed(self.waiting), demand]
        for index, amount in enumerate(cohorts):
            taken = min(amount, left)
            cohorts[index] = amount - taken
            left -= taken
        remaining = list(reversed(cohorts))
        abandoned = 0.0
        if service.patience_s is not None:
            # remaining[age]: arrived ``age`` minutes before this one; mean wait (age + 0.5) x 60 s.
            kept = [amount if (age + 0.5) * 60 <= service.patience_s else 0.0 for age, amount in enumerate(remaining)]
            abandoned = sum(remaining) - sum(kept)
            remaining = kept
        while remaining and remaining[-1] <= 0:
            remaining.pop()
        self.waiting = remaining
        backlog = self.backlog
        base_ttft, kv_usage, past_cliff = service.base_ttft_ms, 0.0, False
        # Little's law: in flight = arrival rate (per s) x duration, at most C per instance.
        running = min(self.in_service * service.concurrency, served / 60 * service.request_duration_s)
        if service.engine is not None and self.in_service:
            per_instance = served / self.in_service
            base_ttft, kv_usage, engine_running = service.engine.at(per_instance)
            running = engine_running * self.in_service
            past_cliff = offered / self.in_service >= service.engine.cliff_per_minute
        if not self.in_service:
            ttft = math.inf
        elif past_cliff and service.engine is not None:
            ttft = max(service.engine.collapsed_ttft_ms, base_ttft + backlog / capacity * 60_000)
        elif backlog <= 0:
            ttft = base_ttft
        elif capacity > 0:
            ttft = base_ttft + backlog / capacity * 60_000
        else:
            ttft = math.inf
        return MinuteLoad(self.in_service, offered, served, backlog, running, ttft, abandoned, kv_usage, past_cliff)
