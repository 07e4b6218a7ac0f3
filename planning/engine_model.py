"""One vLLM engine under open-loop conversations: where it holds each TTFT SLO, and its cliff.

Conversations arrive at random and users pause between turns (``cli_support/open_loop.py`` is the
load that measures it). What ends an engine's capacity then is not a concurrency count but two
limits that feed each other (docs/planning.md, "The open-loop model"):

* **KV residency.** A follow-up turn is warm only while its conversation's history is still in
  the prefix cache. vLLM keeps freed blocks in an LRU queue and evicts from its head (v1
  ``KVCacheManager``'s free block queue), so a history survives its user's pause only while the
  pause is shorter than the cache's *characteristic time* ``T_c``: the age at which the histories
  freed since fill the part of the cache running requests leave free (Che's approximation of an
  LRU cache: H. Che, Y. Tung, Z. Wang, IEEE JSAC 20(7), 2002). With exponential pauses of mean
  ``T`` a follow-up misses with probability ``exp(-T_c / T)``; under least-outstanding routing over
  ``n`` instances it also lands on another engine ``1 - 1/n`` of the time.
* **Engine throughput.** Every step decodes each running request and prefills what arrived. The
  GPU's part of a step reads the weights and each request's KV at the GPU's bandwidth and
  prefills at its measured matmul throughput; the host's part (scheduling, detokenizing and
  streaming each running request on the instance's vCPUs) grows with the running requests. vLLM
  0.26 schedules asynchronously, so a step takes the larger of the two. Running requests hold KV
  blocks, which shrinks the free part of the cache.

More load -> more running requests and longer steps -> less free cache -> more misses -> more
prefill -> longer steps: past a point the fixed point of these equations jumps from mostly warm
to all cold and the running requests outgrow the cache; TTFT goes from hundreds of milliseconds
to seconds. :func:`solve` finds the steady state at one arrival rate, iterating from an empty
cache as a ramp from low load does; :func:`capacity` the highest rate that holds each class's
SLO, and where the collapse (the cliff) starts.

:class:`EngineParts` says where each figure comes from; ``planning/engine_fit.py`` fits them on
the committed GPU runs and reports the model's error against each; ``planning/gpu_projection.py``
carries them to GPUs never measured here. Standard library only: synth runs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

Routing = Literal["least_outstanding", "session_affinity", "prefix_aware"]
CLASSES = ("cold", "warm")
_ITERATIONS = 400
_DAMPING = 0.5


@dataclass(frozen=True)
class ConversationShape:
    """MangaAssist's conversations, tokens (config ``traffic``; seed 002 for the layout).

    Attributes:
        system_prefix_tokens: the shared system prompt every request starts with.
        conversation_tokens: a conversation's own retrieved context, on every turn.
        turn_tokens: a user message.
        output_tokens: an answer.
        mean_turns: turns per conversation (seed 002: 4.2): ``floor`` or ``ceil`` turns.
        think_s: mean pause between an answer and the user's next turn, seconds (exponential;
            config ``traffic.think_s``).
        block_size: vLLM's KV block, tokens: only whole blocks are cached.
        adapters: LoRA adapters the requests spread over (vLLM keys cached blocks by adapter, so
            the shared prefix is held once per adapter).
    """

    system_prefix_tokens: int = 600
    conversation_tokens: int = 1400
    turn_tokens: int = 40
    output_tokens: int = 180
    mean_turns: float = 4.2
    think_s: float = 30.0
    block_size: int = 16
    adapters: int = 3

    @property
    def cached_prefix_tokens(self) -> int:
        """The shared prefix's whole blocks: what every request finds cached (592 of 600)."""
        return self.system_prefix_tokens // self.block_size * self.block_size

    def prompt_tokens(self, turn: int) -> int:
        """Prompt of turn ``turn`` (0-based): prefix, context, earlier turns and answers, the message."""
        return (
            self.system_prefix_tokens
            + self.conversation_tokens
            + turn * (self.turn_tokens + self.output_tokens)
            + self.turn_tokens
        )

    def turn_weights(self) -> list[tuple[int, float, float]]:
        """``(turn, share of requests, share of requests that end their conversation)`` per turn.

        A conversation has ``floor(mean_turns)`` turns, or one more with probability
        ``mean_turns - floor``; the shares follow from counting turns.
        """
        low = math.floor(self.mean_turns)
        p_high = self.mean_turns - low
        weights = []
        for turn in range(low + (1 if p_high > 0 else 0)):
            reached = 1.0 if turn < low else p_high
            last = (1 - p_high if turn == low - 1 else 0.0) + (p_high if turn == low else 0.0)
            weights.append((turn, reached / self.mean_turns, last / self.mean_turns))
        return weights

    def uncached_tokens(self, turn: int, hit: bool) -> int:
        """Prefill work of one request. A first turn or a missed follow-up prefills everything past
        the shared blocks; a follow-up that finds its history prefills its message and the last
        partial block (measured on the H200 runs: 44-56 tokens for 40-token messages, 16-token
        blocks; misses were whole, never partial)."""
        if turn > 0 and hit:
            return self.turn_tokens + self.block_size // 2
        return self.prompt_tokens(turn) - self.cached_prefix_tokens

    def history_tokens(self, turn: int) -> int:
        """The conversation's own cached tokens once turn ``turn`` is answered."""
        return self.prompt_tokens(turn) + self.output_tokens - self.cached_prefix_tokens


@dataclass(frozen=True)
class EngineParts:
    """What one engine is made of; ``planning/engine_fit.py`` says where each figure comes from.

    Attributes:
        gpu: the GPU's name, for reports.
        kv_cache_tokens: the KV cache, tokens (the memory plan's).
        fixed_ms: what a request's TTFT costs whatever its length (API server, scheduling,
            sampling, the first token's trip back).
        gpu_prefill_ms_per_token: prefill of one uncached token on the GPU, ms (scales with the
            GPU's measured matmul throughput).
        host_prefill_ms_per_token: the host's share of a prefilled token, ms (the LoRA path's CPU
            work): it competes with streaming for the vCPUs.
        gpu_step_ms: a decode step on the GPU, ``(a0, a1)``: ``a0 + a1 x running`` ms.
        host_step_ms: the host's work per step, ``(k0, k1, k2)``: ``k0 + k1 x running + k2 x
            running**2`` ms (:meth:`host_step`). The square term is measured, not derived: on the
            runs' steps the step bends upward past ~50 running requests (24 ms at 48, 50 ms at 95 on
            the 4 s L40S-sized run), which a straight line through the lighter steps under-states.
        host_wait_ms: the TTFT tail the host adds while it streams to the running requests,
            ``(w, exponent)``: ``w x u**exponent`` ms at p95, ``u`` the share of a step the host
            spends on running requests.
        max_num_seqs: vLLM's cap on running requests (``engine.max_num_seqs``).
        measured: True when the parts were measured on this GPU, False when projected.
        host_scale: the host's work per running request on this instance over the reference's (the
            runs' 4 dedicated CPUs, no gateway): :func:`host_scale` of its physical cores and whether
            a gateway shares them. It scales the per-request part of the host step (streaming,
            detokenizing each request's token), which is what the busy threads contend for.
        prefill_interference: the share of the GPU's prefill time (``u``) the host's step cannot
            hide: the host step is divided by ``1 - prefill_interference x u`` (chunked prefill puts
            prompt chunks into the steps that decode the running requests; fitted on the runs).
        running_tail_z: how far above its mean the number of running requests reaches before the
            KV cache or ``max_num_seqs`` must hold it: requests in the engine are an M/G/inf
            population (Poisson), and a step holds its TTFT p95 only if the cache overflows less than
            5 % of the time (z = 1.645).
    """

    gpu: str
    kv_cache_tokens: int
    fixed_ms: float
    gpu_prefill_ms_per_token: float
    host_prefill_ms_per_token: float
    gpu_step_ms: tuple[float, float]
    host_step_ms: tuple[float, float, float]
    host_wait_ms: tuple[float, float]
    max_num_seqs: int = 128
    measured: bool = False
    host_scale: float = 1.0
    prefill_interference: float = 0.0
    running_tail_z: float = 1.645

    @property
    def prefill_ms_per_token(self) -> float:
        """One uncached token's prefill at one request: GPU and host parts in sequence."""
        return self.gpu_prefill_ms_per_token + self.host_prefill_ms_per_token

    def host_per_request_ms(self, running: float) -> float:
        """The host step's part that grows with ``running`` requests on this instance, ms."""
        _, k1, k2 = self.host_step_ms
        return self.host_scale * (k1 * running + k2 * running * running)

    def host_step(self, running: float) -> float:
        """The host's work per step with ``running`` requests on this instance, ms (before prefill stalls it)."""
        return self.host_step_ms[0] + self.host_per_request_ms(running)


@dataclass(frozen=True)
class SteadyState:
    """One engine at one arrival rate, in steady state (or saturated).

    Attributes:
        requests_per_min: the arrival rate.
        follow_up_miss: share of follow-up turns that find no history (residency and routing).
        cold_share: share of requests in the cold class (first turns and missed follow-ups).
        running: requests in the engine (Little's law: rate x time in the engine).
        itl_ms: the time between two tokens of a running request (one engine step).
        prefill_share: the share of GPU time spent on prefill.
        kv_in_use: share of the KV cache that running requests hold (vLLM's
            ``kv_cache_usage_perc``, the gateway's ``KvCacheUsagePercent`` / 100).
        ttft_p50_ms, ttft_p95_ms: per class; ``inf`` when saturated.
        saturated: the engine cannot keep up (running requests outgrow ``max_num_seqs`` or the
            KV cache, or prefill fills the GPU or the host): queues grow without bound.
    """

    requests_per_min: float
    follow_up_miss: float
    cold_share: float
    running: float
    itl_ms: float
    prefill_share: float
    kv_in_use: float
    ttft_p50_ms: dict[str, float]
    ttft_p95_ms: dict[str, float]
    saturated: bool

    def holds(self, slo_ms: dict[str, float], margin: float = 0.0) -> bool:
        """Every class's p95, grown by ``margin`` (the model's error), within its SLO."""
        return not self.saturated and all(self.ttft_p95_ms[k] * (1 + margin) <= slo_ms[k] for k in CLASSES)


REFERENCE_HOST_CORES = 4
"""The runs' engines had 4 dedicated CPUs (``gpu_session.sh``: CPUs 0-3) and no gateway."""
HOST_THREADS_BARE = 2
"""Host threads busy every step with no gateway: vLLM's API server (detokenizing, streaming) and its
engine core (scheduling) (vLLM 0.26's V1 architecture: one process each)."""
GATEWAY_BUSY_THREADS = 0.0
"""Of a host thread, what the container's gateway keeps busy while it relays every streamed chunk:
measured, not assumed. Counted as a whole thread (3 busy threads on an ``ml.g6e.xlarge``'s 2 cores:
1.5x), the two runs behind the gateway on 2 cores stepped as fast per running request as the bare
ones on 4 cores: least squares over every steady step of the seven runs puts their host step at
0.95x the bare runs' (``engine_fit.gateway_step_ratio``, reported by ``make capacity-fit``; 1.0-1.1x
with the prefill stretch at 0.6-0.8 instead of the chosen 1), not 1.5x. The gateway relays
asynchronously: its thread mostly waits on sockets."""


def host_scale(cores: float, *, gateway: bool) -> float:
    """How much longer a step's host part takes on ``cores`` physical cores than on the reference.

    The busy host threads (:data:`HOST_THREADS_BARE`, plus :data:`GATEWAY_BUSY_THREADS` with the
    gateway) share the cores: with fewer cores than threads each runs ``threads / cores`` times
    slower, with at least one core each they run as on the reference (4 cores, 2 threads). So an
    ``ml.g6e.xlarge`` (4 vCPUs, 2 physical cores) behind the gateway is 1.0, as the gateway runs on
    2 cores measured, and so is an ``ml.g6e.2xlarge`` (4 cores); one core would be 2.0.

    Raises:
        ValueError: ``cores`` <= 0.
    """
    if not cores > 0:
        raise ValueError(f"cores: {cores!r} must be > 0")
    threads = HOST_THREADS_BARE + (GATEWAY_BUSY_THREADS if gateway else 0.0)
    reference = max(HOST_THREADS_BARE / REFERENCE_HOST_CORES, 1.0)
    return max(threads / cores, 1.0) / reference


def return_probability(routing: Routing, instances: int) -> float:
    """The chance a follow-up reaches the engine that served its conversation's previous turn:
    1 with session affinity or prefix-aware routing, ``1/instances`` under least outstanding."""
    return 1.0 / max(instances, 1) if routing == "least_outstanding" else 1.0


def characteristic_time(free_tokens: float, returning: float, gone: float, think_s: float) -> float:
    """Che's LRU characteristic time, seconds: the age ``t`` at which the histories freed in the
    last ``t`` seconds fill ``free_tokens``.

    ``returning``: tokens freed per second whose conversation comes back after an exponential
    pause of mean ``think_s`` (a history leaves the queue when it is hit); ``gone``: tokens freed
    per second that nobody asks for again (last turns, follow-ups routed elsewhere). ``inf`` when
    everything ever freed fits.
    """
    if free_tokens <= 0:
        return 0.0

    def held(t: float) -> float:
        back = returning * think_s * (1 - math.exp(-t / think_s)) if think_s > 0 else 0.0
        return back + gone * t

    if gone <= 0 and held(1e9) < free_tokens:
        return math.inf
    low, high = 0.0, 1.0
    while held(high) < free_tokens:
        high *= 2
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if held(mid) < free_tokens else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class _Mix:
    """The request mix at one follow-up miss probability (per request averages)."""

    cold_share: float
    uncached_mean: float
    uncached_p95: dict[str, float]
    running_tokens: float
    returning_tokens: float
    gone_tokens: float


def _mix(shape: ConversationShape, miss: float, return_p: float) -> _Mix:
    cold = uncached = running = returning = gone = 0.0
    cold_sizes: list[tuple[int, float]] = []
    for turn, share, last_share in shape.turn_weights():
        cold_p = 1.0 if turn == 0 else miss
        cold += share * cold_p
        uncached += share * (
            cold_p * shape.uncached_tokens(turn, False) + (1 - cold_p) * shape.uncached_tokens(turn, True)
        )
        cold_sizes.append((shape.uncached_tokens(turn, False), share * cold_p))
        # A running request holds its prompt past the shared blocks and, on average, half its answer.
        running += share * (shape.prompt_tokens(turn) - shape.cached_prefix_tokens + shape.output_tokens / 2)
        continuing = share - last_share
        returning += continuing * return_p * shape.history_tokens(turn)
        gone += (last_share + continuing * (1 - return_p)) * shape.history_tokens(turn)
    seen, cold_p95 = 0.0, float(shape.uncached_tokens(0, False))
    for size, weight in sorted(cold_sizes):
        seen += weight
        cold_p95 = float(size)
        if seen >= 0.95 * cold:
            break
    return _Mix(
        cold_share=cold,
        uncached_mean=uncached,
        uncached_p95={"cold": cold_p95, "warm": float(shape.uncached_tokens(1, True))},
        running_tokens=running,
        returning_tokens=returning,
        gone_tokens=gone,
    )


def step_ms(parts: EngineParts, running: float, gpu_busy: float, host_busy: float = 0.0) -> float:
    """One engine step (the time between two tokens of a running request), ms; ``inf`` when prefill
    leaves decode no time.

    The GPU's decode work stretched by the share of GPU time prefill takes (``gpu_busy``), or the
    host's per-step work on this instance (``host_scale`` on its per-request part) stretched by the
    part of that prefill time it cannot hide (``prefill_interference``), whichever is longer (vLLM
    0.26 schedules the next step while the GPU runs this one, so the host's work hides under the
    GPU's up to a point).
    """
    a0, a1 = parts.gpu_step_ms
    stalled = parts.prefill_interference * gpu_busy
    if gpu_busy >= 1 or stalled >= 1 or host_busy >= 1:
        return math.inf
    gpu = (a0 + a1 * running) / (1 - gpu_busy)
    host = parts.host_step(running) / ((1 - stalled) * (1 - host_busy))
    return max(gpu, host)


def _ttft(
    parts: EngineParts, mix: _Mix, running: float, itl_ms: float, busy: float
) -> tuple[dict[str, float], dict[str, float]]:
    """TTFT p50 and p95 per class, ms.

    A request pays ``fixed_ms``, its own prefill, the residual of the step in progress, the host's
    streaming wait (``host_wait_ms``) and the queue of prefills ahead of it: M/G/1 with the
    prefill work's utilization ``busy`` (Pollaczek-Khinchine's mean wait; an exponential tail of
    that mean for the p95).
    """
    host_step = parts.host_step(running)
    streaming = parts.host_per_request_ms(running) / host_step if host_step > 0 else 0.0
    w, exponent = parts.host_wait_ms
    host_p95 = w * streaming**exponent
    per_token = parts.prefill_ms_per_token
    services = {klass: mix.uncached_p95[klass] * per_token for klass in CLASSES}
    mean_service = mix.uncached_mean * per_token
    second_moment = mix.cold_share * services["cold"] ** 2 + (1 - mix.cold_share) * services["warm"] ** 2
    residual = second_moment / (2 * mean_service) if mean_service > 0 else 0.0
    queue_mean = busy / (1 - busy) * residual
    queue_p95 = queue_mean * math.log(20)  # P(wait > t) = exp(-t / mean) -> t95 = mean x ln 20
    p50 = {k: parts.fixed_ms + services[k] + itl_ms / 2 + queue_mean + host_p95 / 3 for k in CLASSES}
    p95 = {k: parts.fixed_ms + services[k] + itl_ms + queue_p95 + host_p95 for k in CLASSES}
    return p50, p95


def _saturated(state: SteadyState) -> SteadyState:
    infinite = {k: math.inf for k in CLASSES}
    return SteadyState(
        state.requests_per_min,
        state.follow_up_miss,
        state.cold_share,
        state.running,
        state.itl_ms,
        state.prefill_share,
        state.kv_in_use,
        infinite,
        infinite,
        True,
    )


@lru_cache(maxsize=65536)
def solve(
    parts: EngineParts,
    shape: ConversationShape,
    requests_per_min: float,
    *,
    routing: Routing = "prefix_aware",
    instances: int = 1,
) -> SteadyState:
    """The steady state of one engine at ``requests_per_min`` arriving at it.

    Iterates the coupled equations of the module docstring from an empty cache with damping; the
    first fixed point reached is the one a ramp from low load settles into. ``instances`` matters
    under ``least_outstanding`` routing only.

    Raises:
        ValueError: a negative or non-finite rate.
    """
    if not math.isfinite(requests_per_min) or requests_per_min < 0:
        raise ValueError(f"requests_per_min: {requests_per_min!r} must be a finite number >= 0")
    if parts.kv_cache_tokens <= 0:  # no room for one sequence: vLLM would not start (planning/checks.py says so)
        nothing = SteadyState(requests_per_min, 1.0, 1.0, 0.0, math.inf, 0.0, 1.0, {}, {}, False)
        return _saturated(nothing)
    rate = requests_per_min / 60
    return_p = return_probability(routing, instances)
    shared = shape.cached_prefix_tokens * shape.adapters
    miss = running = 0.0
    state: SteadyState | None = None
    for _ in range(_ITERATIONS):
        mix = _mix(shape, miss, return_p)
        gpu_busy = rate * mix.uncached_mean * parts.gpu_prefill_ms_per_token / 1000
        host_busy = rate * mix.uncached_mean * parts.host_prefill_ms_per_token / 1000
        busy = max(gpu_busy, host_busy)
        in_use = shared + running * mix.running_tokens
        if busy >= 1:
            itl, p50, p95 = math.inf, {k: math.inf for k in CLASSES}, {k: math.inf for k in CLASSES}
        else:
            itl = step_ms(parts, running, gpu_busy, host_busy)
            p50, p95 = _ttft(parts, mix, running, itl, busy)
        state = SteadyState(
            requests_per_min,
            miss,
            mix.cold_share,
            running,
            itl,
            gpu_busy,
            min(in_use / parts.kv_cache_tokens, 1.0),
            p50,
            p95,
            False,
        )
        # The running requests fluctuate around their mean (Poisson): the cache and max_num_seqs
        # must hold their tail, or requests wait and are preempted and TTFT leaves the SLO.
        tail = running + parts.running_tail_z * math.sqrt(running)
        if busy >= 1 or tail > parts.max_num_seqs or shared + tail * mix.running_tokens >= parts.kv_cache_tokens:
            return _saturated(state)
        ttft_mean = mix.cold_share * p50["cold"] + (1 - mix.cold_share) * p50["warm"]
        new_running = rate * (ttft_mean + (shape.output_tokens - 1) * itl) / 1000
        t_c = characteristic_time(
            parts.kv_cache_tokens - in_use, rate * mix.returning_tokens, rate * mix.gone_tokens, shape.think_s
        )
        # A history is looked up when its turn is scheduled: after the pause and the wait to get in.
        wait_s = max(ttft_mean - parts.fixed_ms, 0.0) / 1000
        evicted = math.exp(-max(t_c - wait_s, 0.0) / shape.think_s) if shape.think_s > 0 and math.isfinite(t_c) else 0.0
        new_miss = 1 - return_p * (1 - evicted)
        if abs(new_miss - miss) < 1e-6 and abs(new_running - running) < 1e-4:
            return state
        miss += _DAMPING * (new_miss - miss)
        running += _DAMPING * (new_running - running)
    assert state is not None
    return state


@dataclass(frozen=True)
class Capacity:
    """Where one engine holds its SLOs under open-loop conversations.

    Attributes:
        holds_per_min: per class and ``both``: the highest arrival rate (requests/min) the planner
            counts on, after the margin asked for (:func:`capacity`); 0 when even the lightest load
            does not hold.
        cliff_per_min: the lowest rate at which the engine saturates or its TTFT p95 reaches twice
            the highest SLO (``inf`` if none below 10^6), as modelled (no margin).
        at_holds: the steady state at ``holds_per_min['both']`` (None when it is 0).
        model_holds_per_min: the same rates as the model gives them, before the margin: what a
            measurement is checked against.
    """

    holds_per_min: dict[str, float]
    cliff_per_min: float
    at_holds: SteadyState | None
    model_holds_per_min: dict[str, float] = field(default_factory=dict)


def _first_failure(fails: Callable[[float], bool], resolution: float, failing: float | None = None) -> float:
    """The highest multiple of ``resolution`` below the first rate that fails (doubling, then
    bisection; bisection alone below ``failing``, a rate known to fail); 0 when ``resolution`` itself
    fails, ``inf`` when nothing below 10^6 does."""
    if fails(resolution):
        return 0.0
    low, high = resolution, 2 * resolution if failing is None else failing
    while not fails(high):
        low, high = high, 2 * high
        if high > 1e6:
            return math.inf
    while high - low > resolution:
        mid = math.floor((low + high) / 2 / resolution) * resolution
        if mid <= low:
            break
        low, high = (low, mid) if fails(mid) else (mid, high)
    return low


def capacity(
    parts: EngineParts,
    shape: ConversationShape,
    slo_ms: dict[str, float],
    *,
    routing: Routing = "prefix_aware",
    instances: int = 1,
    margin: float = 0.0,
    resolution_per_min: float = 1.0,
) -> Capacity:
    """The highest arrival rate each class holds, and the cliff.

    ``margin`` (the model's error on runs it was not fitted on, plus a projection's spread) counts
    where it bites: the rate the model holds is divided by ``1 + margin`` (an engine that saturates
    does so that much earlier), and no rate counts at which the p95 grown by ``1 + margin`` leaves
    the SLO (an engine near its SLO at any load). The lower of the two is the figure.

    Raises:
        ValueError: a negative margin or a resolution <= 0.
    """
    if margin < 0 or resolution_per_min <= 0:
        raise ValueError(f"margin {margin!r} must be >= 0 and resolution_per_min {resolution_per_min!r} > 0")

    def at(rate: float) -> SteadyState:
        return solve(parts, shape, rate, routing=routing, instances=instances)

    def fails(classes: tuple[str, ...], grown: float) -> Callable[[float], bool]:
        def check(rate: float) -> bool:
            state = at(rate)
            return state.saturated or any(state.ttft_p95_ms[k] * (1 + grown) > slo_ms[k] for k in classes)

        return check

    model = {klass: _first_failure(fails((klass,), 0.0), resolution_per_min) for klass in CLASSES}
    holds = {}
    for klass in CLASSES:
        by_rate = (
            model[klass]
            if math.isinf(model[klass])
            else math.floor(model[klass] / (1 + margin) / resolution_per_min) * resolution_per_min
        )
        # The TTFT limit only matters where the margined p95 already fails at the margined rate: search for
        # it there alone (a planner asks thousands of these; each search is ~20 solves).
        if margin and 0 < by_rate < math.inf and fails((klass,), margin)(by_rate):
            by_rate = _first_failure(fails((klass,), margin), resolution_per_min, failing=by_rate)
        holds[klass] = by_rate
    model["both"] = min(model.values())
    holds["both"] = min(holds.values())
    limit = 2 * max(slo_ms.values())

    def collapsed(rate: float) -> bool:
        state = at(rate)
        return state.saturated or max(state.ttft_p95_ms.values()) >= limit

    cliff = _first_failure(collapsed, resolution_per_min) + resolution_per_min
    both = holds["both"]
    return Capacity(holds, cliff, at(both) if 0 < both < math.inf else None, model)
