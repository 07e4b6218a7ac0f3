"""What one engine holds: ``make capacity ARGS="--gpu H200 --kv-cache-tokens 111104 --think-s 4"``.

Prints one line, ``holds both SLOs up to N req/min per engine``, N as the open-loop engine model
(``planning/engine_model.py``) gives it, then what the planner counts on (N divided by one plus the
margin: the model's held-out error, plus a projection's spread), then where the cliff starts and
what the engine looks like there. Anything not given comes from the config (``cdk.json`` and
``-c key=value``, as ``cdk synth`` reads them): the SLOs (``slo.<class>.ttft_p95_ms``), the request
shape and pauses (``traffic``), the KV cache (the memory plan of the smallest instance type with
that GPU), the routing (``throughput.routing``). The host: on the GPU the runs were made on (the H200),
the runs' own (4 dedicated cores, no gateway); elsewhere the smallest instance type's cores behind
the gateway (``--host-cores``, ``--gateway`` say otherwise).

Usage::

    python -m planning.capacity --gpu L4
    python -m planning.capacity --gpu H200 --kv-cache-tokens 111104 --think-s 4
    python -m planning.capacity --gpu L40S --sweep-think 4,12,30,60
    python -m planning.capacity --gpu H200 --kv-cache-tokens 280176 --host-cores 2 --gateway
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace

from app_config import AppConfig, ConfigError
from app_config.loader import load_cli_config
from cli_support.argtypes import int_in, non_negative_float, positive_float, positive_float_list
from planning.engine_memory import plan_for_instance
from planning.engine_model import (
    CLASSES,
    REFERENCE_HOST_CORES,
    Capacity,
    ConversationShape,
    Routing,
    capacity,
    host_scale,
    solve,
)
from planning.engines import (
    conversation_shape,
    gpu_named,
    instance_cores_per_engine,
    reference_fit,
    smallest_instance_with,
)
from planning.gpu_projection import ProjectedEngine, project


def _rate(value: float) -> str:
    return "no rate" if value <= 0 else ("every rate" if math.isinf(value) else f"{value:,.0f} req/min")


def holds_line(result: Capacity, slo_ms: dict[str, float]) -> str:
    """``holds both SLOs up to N req/min per engine (...)``: the line a check reads; N as modelled,
    before the margin (what a measurement is compared with)."""
    model = result.model_holds_per_min
    both = model["both"]
    per_class = ", ".join(f"{k} TTFT p95 <= {slo_ms[k]:g} ms up to {_rate(model[k])}" for k in CLASSES)
    if both <= 0:
        return f"holds both SLOs up to 0 req/min per engine: it cannot hold them at any load ({per_class})"
    return f"holds both SLOs up to {both:,.0f} req/min per engine ({per_class})"


def margin_line(result: Capacity, margin: float) -> str:
    """What the planner counts on: the modelled rate with the margin taken off."""
    return (
        f"the planner counts {_rate(result.holds_per_min['both'])} per engine: the model's "
        f"{_rate(result.model_holds_per_min['both'])} with its {margin:.0%} margin taken off"
    )


def cliff_line(engine: ProjectedEngine, shape: ConversationShape, result: Capacity, routing: Routing) -> str:
    """Where the cliff starts, and the engine just before and at it."""
    if math.isinf(result.cliff_per_min):
        return "no cliff below 10^6 req/min"
    before = solve(engine.parts, shape, max(result.cliff_per_min - 1, 0), routing=routing)
    at = solve(engine.parts, shape, result.cliff_per_min, routing=routing)
    why = (
        "the engine saturates (running requests outgrow the KV cache or max_num_seqs, or prefill fills the GPU)"
        if at.saturated
        else f"TTFT p95 reaches {max(at.ttft_p95_ms.values()):,.0f} ms"
    )
    return (
        f"cliff starts at {result.cliff_per_min:,.0f} req/min per engine: {why}; just below it "
        f"{before.follow_up_miss:.0%} of follow-ups miss the prefix cache, {before.cold_share:.0%} of requests "
        f"are cold, {before.running:.0f} requests run, KV cache {before.kv_in_use:.0%} in use, "
        f"ITL {before.itl_ms:.0f} ms"
    )


def report(
    engine: ProjectedEngine, shape: ConversationShape, slo_ms: dict[str, float], routing: Routing, instances: int
) -> list[str]:
    """The engine's header, the holds line and the cliff line."""
    result = capacity(
        engine.parts,
        shape,
        slo_ms,
        routing=routing,
        instances=instances,
        margin=engine.margin,
    )
    return [
        f"{engine.parts.gpu}, KV cache {engine.parts.kv_cache_tokens:,} tokens, users pause {shape.think_s:g} s on "
        f"average, {routing} routing, host step x{engine.parts.host_scale:g} of the runs': {engine.source}",
        holds_line(result, slo_ms),
        margin_line(result, engine.margin),
        cliff_line(engine, shape, result, routing),
    ]


def engine_for(
    config: AppConfig,
    gpu_name: str,
    kv_cache_tokens: int | None = None,
    *,
    host_cores: float | None = None,
    gateway: bool | None = None,
) -> ProjectedEngine:
    """The engine ``make capacity`` reports on: ``gpu_name``'s parts with ``kv_cache_tokens`` (default:
    the memory plan of the smallest instance type with that GPU), on the runs' own host on the
    reference GPU (4 cores, no gateway) and on that instance type's cores behind the gateway
    elsewhere, unless ``host_cores`` / ``gateway`` say otherwise.

    Raises:
        ValueError: an unknown GPU, or a model that does not fit it (one line).
    """
    gpu = gpu_named(gpu_name)
    instance_type = smallest_instance_with(gpu)
    kv = kv_cache_tokens or (
        plan_for_instance(instance_type, model=config.model, engine=config.engine, memory=config.memory_plan).kv_tokens
    )
    fit = reference_fit()
    on_reference = gpu.name == fit.gpu
    cores = (
        REFERENCE_HOST_CORES
        if on_reference
        else instance_cores_per_engine(instance_type, config.engine.tensor_parallel_size)
    )
    scale = host_scale(host_cores or cores, gateway=(not on_reference) if gateway is None else gateway)
    return project(fit, gpu, kv, max_num_seqs=config.engine.max_num_seqs, host_scale=scale)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m planning.capacity", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H200", help="GPU name (H100, H200, L4, L40S, A10G, T4, A100-SXM4-40GB, ...)")
    parser.add_argument(
        "--kv-cache-tokens", type=int_in(1), help="default: the memory plan on the GPU's smallest instance type"
    )
    parser.add_argument("--think-s", type=non_negative_float, help="mean pause between turns (default traffic.think_s)")
    parser.add_argument(
        "--sweep-think", type=positive_float_list(increasing=True), help="one report per mean pause, seconds"
    )
    parser.add_argument("--instances", type=int_in(1), default=1, help="instances behind least_outstanding routing")
    parser.add_argument(
        "--host-cores",
        type=positive_float,
        help="physical cores per engine (default: the runs' 4 on the H200, else the smallest instance type's)",
    )
    parser.add_argument(
        "--gateway",
        action=argparse.BooleanOptionalAction,
        help="the container's gateway shares the cores (default: no on the H200, as the runs; yes elsewhere)",
    )
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="config override")
    args = parser.parse_args(argv)
    try:
        config = load_cli_config(args.context)
        engine = engine_for(config, args.gpu, args.kv_cache_tokens, host_cores=args.host_cores, gateway=args.gateway)
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    base = conversation_shape(config.traffic, config.engine, len(config.model.adapters))
    slo_ms = config.slo.ttft_p95_ms()
    thinks = args.sweep_think or [base.think_s if args.think_s is None else args.think_s]
    for index, think in enumerate(thinks):
        if index:
            print()
        print(
            "\n".join(report(engine, replace(base, think_s=think), slo_ms, config.throughput.routing, args.instances))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
