"""Every figure README.md and docs/ quote from a tool, generated from that tool (issue 44).

A figure a tool prints is never retyped: it sits between ``<!-- generated:NAME ... -->`` and
``<!-- end generated:NAME -->``, on its own lines (a block) or within a line (a figure in prose),
and this module writes it from the tool that prints it: synth's verdicts and memory plan
(``planning/memory_report.py``), ``make plan`` (``planning/fleet_planner.py``), ``make capacity``
(``planning/capacity.py``), the engine model's fit (``planning/engine_fit.py``), the open-loop runs
(``cli_support/open_loop.py`` over ``benchmarks/results/``), ``make simulate``
(``devtools/scaling_doc.py``). A change to any of their inputs (the config, the prices, the
committed runs, ``planning/engine_fit.json``) makes the docs test fail with the file, the line and
the command that regenerates them: ``make docs``.

Usage::

    python -m devtools.doc_figures           # rewrite every generated figure in README.md and docs/
    python -m devtools.doc_figures --check   # exit 1 naming each stale one (tests/unit/docs/test_doc_figures.py)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from app_config.errors import ConfigError
from app_config.loader import CDK_JSON, cdk_json_context, load_cli_config
from app_config.root import AppConfig
from app_config.slo import SloConfig
from cli_support.open_loop import OpenLoopRun, verdict
from devtools import measure_doc, offload_doc
from devtools.synth_summary import summarize
from ops.preflight.account import check_quotas, quota_demands, quota_name
from planning import cost_plan, engine_fit, fleet_planner, memory_report
from planning.capacity import engine_for
from planning.capacity import report as capacity_report
from planning.demand_week import week
from planning.engine_memory import host_tier_for_instance
from planning.engine_model import capacity
from planning.engines import (
    conversation_shape,
    gpu_named,
    instance_host_scale,
    reference_fit,
)
from planning.fleet_planner import Fleet
from planning.gpu_instances import GIB, INSTANCE_GPUS
from planning.gpu_projection import project
from planning.make_plan import load_plan, make_plan
from planning.memory_plan import largest_host_offload_gib, plan_host_offload
from planning.plan import Plan

REPO = Path(__file__).resolve().parent.parent
COMMAND = "make docs"
"""What regenerates them (Makefile: python -m devtools.doc_figures and the scaling week's PNG)."""
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
MARKER = re.compile(
    r"<!-- generated:(?P<name>[a-z0-9-]+)(?P<note>[^\n]*?)-->(?P<body>.*?)<!-- end generated:(?P=name) -->",
    flags=re.DOTALL,
)
SEEDS_G5 = (
    "serving.primary.instance_type=ml.g5.xlarge",
    "serving.canary.instance_type=ml.g5.xlarge",
    "slo.cold.ttft_p95_ms=800",
)
"""Seed 003's ml.g5.xlarge on both variants, at the cold SLO it holds (docs/planning.md, "The seeds' fleet")."""
WHAT_IF_GPUS = (
    ("H200", 111_104, 4.0),
    ("H100", None, None),
    ("L4", None, None),
    ("L40S", None, None),
    ("A10G", None, None),
)
"""``make capacity`` invocations the docs quote: the issue's H200 check, then each GPU with the config's pause."""
THINK_SWEEP_S = (4.0, 12.0, 30.0, 60.0)
MEMORY_TABLE_TYPES = (
    "ml.g4dn.xlarge",
    "ml.g5.xlarge",
    "ml.g6.xlarge",
    "ml.g6e.xlarge",
    "ml.p4d.24xlarge",
    "ml.p5.48xlarge",
)
SYNTH_REFUSALS = (
    "engine.max_model_len=16384",
    "engine.gpu_memory_utilization=0.15",
    "engine.tensor_parallel_size=2",
    "engine.kv_offloading_size_gib=40",
)
"""The overrides docs/memory-plan.md shows synth refusing (one line each)."""


HOST_TIER_TYPES = ("ml.g5.xlarge", "ml.g6.xlarge", "ml.g6e.xlarge", "ml.g6e.2xlarge", "ml.g6e.4xlarge")
"""The instance types docs/memory-plan.md's host-tier table lists (the L40S sizes the issue 56 runs weigh)."""


def _copy_target() -> float:
    """The copy target inference_components mode derives on the default instance type."""
    config = load_cli_config(["serving.mode=inference_components"])
    return make_plan(config).inference_components.scaling.target_value


def synthesize_default() -> Path:
    """Synthesize every stack of the default config into a temporary folder, as ``npx cdk synth``."""
    import tempfile  # noqa: PLC0415 (only for the synth-summary block)

    from stacks.jsii_node import prefer_pinned_node  # noqa: PLC0415

    prefer_pinned_node()  # the pinned Node, before aws_cdk starts the jsii runtime (as app.py)
    import aws_cdk as cdk  # noqa: PLC0415 (starts the jsii runtime: only for the synth-summary block)

    from stacks.composition import build_app, synthesize  # noqa: PLC0415

    outdir = Path(tempfile.mkdtemp(prefix="doc-figures-synth-"))
    config = load_cli_config()
    plan = make_plan(config)
    app = cdk.App(outdir=str(outdir), context=dict(cdk_json_context(CDK_JSON)))
    build_app(app, config, plan)
    failure = synthesize(app)
    if failure is not None:
        raise RuntimeError(f"the default config does not synthesize: {failure}")
    memory_report.write(memory_report.build(config, plan), outdir)  # as app.py does: make synth prints it
    return outdir


@dataclass
class Sources:
    """What the figures are read from, each made once per run."""

    overrides: tuple[str, ...] = ()
    given_outdir: Path | None = None

    @cached_property
    def config(self) -> AppConfig:
        return load_cli_config(list(self.overrides))

    @cached_property
    def plan(self) -> Plan:
        return make_plan(self.config)

    @cached_property
    def best(self) -> Fleet:
        found = fleet_planner.recommend(self.config, self.plan.planner)
        assert found is not None, "the default config has no holding fleet (make plan)"
        return found

    @cached_property
    def memory(self) -> list[memory_report.VariantMemory]:
        return memory_report.build(self.config, self.plan)

    @cached_property
    def seeds(self) -> Sources:
        return Sources(SEEDS_G5)

    @cached_property
    def synth_outdir(self) -> Path:
        """A synth of the default config (``make synth``'s templates), made in a temporary folder
        unless given (tests pass their session's synth)."""
        return self.given_outdir or synthesize_default()


def _primary_lines(sources: Sources) -> str:
    lines = memory_report.render(sources.memory)
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("capacity at TTFT p95"))
    end = next(i for i, line in enumerate(lines[start:], start) if line.lstrip().startswith("variant canary"))
    return "\n".join(["```", *(line.strip() for line in lines[start:end]), "```"])


def _memory_table(sources: Sources) -> str:
    primary = sources.memory[0]
    return "\n".join(
        [
            "| | GiB | source |",
            "|---|---:|---|",
            f"| AWQ-INT4 weights of Llama-3-8B-Instruct | {primary.weights_gib:.2f} | `model.shape.weights_gib`: the "
            "AWQ GEMM layout, 5,727,854,592 bytes |",
            f"| LoRA slot buffers, 3 slots of rank 16 (one per adapter) | {primary.lora_gib:.2f} | vLLM allocates "
            "`max_loras` x `max_lora_rank` buffers on every linear layer, the embedding and the LM head |",
            f"| activation peak, non-torch | {primary.runtime_gib:.2f} | `memory_plan.runtime_overhead_gib`, measured "
            "on an H100 ([docs/performance.md](docs/performance.md)) |",
            f"| **KV cache** | **{primary.kv_gib:.2f}** | **{primary.kv_tokens:,} tokens of "
            f"{primary.kv_kib_per_token:g} KiB** (32 layers x 8 KV heads x 128 x K,V x 2 bytes) |",
        ]
    )


def _fleet_sentence(fleet: Fleet, slo: SloConfig) -> str:
    return (
        f"{fleet.count_at_peak} {fleet.instance_type} at peak, a warm floor of {fleet.warm_floor}, about "
        f"${fleet.usd_per_month:,.0f} a month ({fleet.label}: {fleet.requests_per_minute:,.0f} requests a minute per "
        f"instance at TTFT p95 cold <= {slo.cold.ttft_p95_ms:g} ms, warm <= {slo.warm.ttft_p95_ms:g} ms, "
        f"${fleet.price_usd_per_hour:.3f}/h on demand)"
    )


def _recommendation(sources: Sources) -> str:
    return _fleet_sentence(sources.best, sources.config.slo)


def _seeds_fleet(sources: Sources) -> str:
    seeds = sources.seeds
    cold, warm = (hold for hold in seeds.memory[0].class_slo_lines)
    config, plan = seeds.config, seeds.plan
    g5 = fleet_planner.size_fleet(
        config,
        plan.planner,
        "ml.g5.xlarge",
        config.throughput.routing,
        week(config.traffic),
        cold_p95_ms=config.slo.cold.ttft_p95_ms,
        warm_p95_ms=config.slo.warm.ttft_p95_ms,
    )
    return "\n".join(
        [
            "```",
            cold,
            warm,
            "```",
            "",
            f"Sized for the default week: {_fleet_sentence(g5, config.slo)}. At that cold SLO `make plan` recommends "
            f"{_fleet_sentence(seeds.best, config.slo)}.",
        ]
    )


def _synth_summary(sources: Sources) -> str:
    """What ``make synth`` prints after the templates are written (devtools/synth_summary.py)."""
    outdir = sources.synth_outdir
    return "\n".join(["```", summarize(outdir).replace(str(outdir), "/path/to/repo/cdk.out"), "```"])


def _dev_modes_cost(sources: Sources) -> str:
    del sources
    bands = []
    for overrides in (["stage=dev", "serving.mode=inference_components"], ["stage=dev"]):
        config, plan = load_plan(overrides)
        plans = cost_plan.plan(config, plan)
        low, high = (sum(p.monthly_cost_band_usd[i] for p in plans) for i in (0, 1))
        bands.append(f"${low:,.2f} .. ${high:,.2f}")
    return f"{bands[0]} a month against {bands[1]}"


def _quota_table(sources: Sources) -> str:
    config = sources.config
    (demand, *_) = quota_demands(config.serving)
    canary = config.serving.canary
    primary = config.serving.primary
    return "\n".join(
        [
            f"| What | {demand.instance_type} instances (prod defaults) | Why |",
            "|---|---:|---|",
            f"| creation | {demand.creation} | `serving.primary.initial_instance_count` "
            f"{primary.initial_instance_count} "
            f"+ canary {canary.initial_instance_count} |",
            f"| the most the scaling bounds reach | {demand.reach} | `serving.primary.max_capacity` "
            f"{primary.max_capacity} + canary {canary.max_capacity} |",
            f"| a blue/green update at that size | {demand.needed} | SageMaker provisions the new fleet beside the old "
            "before shifting traffic (UpdateEndpoint) |",
            '| dev stage | see `make synth ARGS="-c stage=dev"` | the dev overlay\'s bounds |',
        ]
    )


class _QuotasOf:
    """Service Quotas answering one applied value for every quota (what the docs' example assumes)."""

    def __init__(self, value: float, names: list[str]) -> None:
        self.pages = [{"Quotas": [{"QuotaName": name, "Value": value} for name in names]}]

    def get_paginator(self, operation: str) -> _QuotasOf:
        del operation
        return self

    def paginate(self, **kwargs: object) -> list[dict[str, list[dict[str, object]]]]:
        del kwargs
        return self.pages


def _preflight_quota(sources: Sources) -> str:
    config = sources.config
    names = [quota_name(d.instance_type, d.usage) for d in quota_demands(config.serving)]
    (finding, *_) = check_quotas(config, _QuotasOf(4, names), "us-east-1")
    return finding.line


def _memory_types_table(sources: Sources) -> str:
    rows = [
        "| instance | budget GiB | KV cache GiB | KV tokens | sequences of 4,096 | of 2,560 (typical) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for instance_type in MEMORY_TABLE_TYPES:
        plan = sources.plan.planner.memory_plan(instance_type)
        gpus = INSTANCE_GPUS[instance_type]
        gpu = gpus.gpu.name if gpus.count == 1 else f"{gpus.gpu.name}, 1 of {gpus.count}"
        rows.append(
            f"| `{instance_type}` ({gpu}) | {plan.budget_bytes / GIB:.2f} | {plan.kv_bytes / GIB:.2f} | "
            f"{plan.kv_tokens:,} | {plan.sequences_at_max_len} | {plan.sequences_at_typical_len} |"
        )
    return "\n".join(rows)


def _host_tier_table(sources: Sources) -> str:
    config = sources.config
    engine = config.engine
    rows = [
        "| instance | host GiB | left per engine GiB | largest offload that fits GiB | its tokens | GPU KV tokens |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for instance_type in HOST_TIER_TYPES:
        tier = host_tier_for_instance(
            instance_type, model=config.model, engine=engine, memory=config.memory_plan, runtime_adapters=False
        )
        largest = largest_host_offload_gib(
            config.model.shape.to_shape(),
            available_bytes=tier.available_bytes,
            tensor_parallel_size=engine.tensor_parallel_size,
            block_size=engine.block_size,
            kv_cache_dtype=engine.kv_cache_dtype,
        )
        held = plan_host_offload(
            config.model.shape.to_shape(),
            size_gib=largest,
            tensor_parallel_size=engine.tensor_parallel_size,
            block_size=engine.block_size,
            kv_cache_dtype=engine.kv_cache_dtype,
        )
        plan = sources.plan.planner.memory_plan(instance_type)
        rows.append(
            f"| `{instance_type}` ({INSTANCE_GPUS[instance_type].gpu.name}) | {tier.host_bytes // GIB} | "
            f"{tier.available_bytes / GIB:.2f} | {largest:g} | {held.tokens:,} | {plan.kv_tokens:,} |"
        )
    return "\n".join(rows)


def _host_tier_line(sources: Sources) -> str:
    """The memory report's host-tier line of the default primary with a 16 GiB offload."""
    del sources
    config, plan = load_plan(["engine.kv_offloading_size_gib=16"])
    report = memory_report.build(config, plan)[0]
    return "\n".join(["```", memory_report.host_tier_line(report), "```"])


def _synth_refusals(sources: Sources) -> str:
    del sources
    lines = ["```"]
    for override in SYNTH_REFUSALS:
        lines.append(f"$ npx cdk synth -c {override}")
        try:
            load_plan([override])
        except ConfigError as error:
            lines.append(str(error))
        else:
            raise AssertionError(f"-c {override} no longer stops synth: rewrite docs/memory-plan.md")
    lines.append("```")
    return "\n".join(lines)


def _plan(sources: Sources) -> str:
    slo = sources.config.slo
    text = fleet_planner.format_planner(
        sources.config, sources.plan, slo.cold.ttft_p95_ms, slo.warm.ttft_p95_ms, runners_up=3
    )
    keep = [
        line
        for line in text.splitlines()
        if "cannot hold" not in line or "ml.g5.xlarge " in line or "ml.g6.xlarge " in line
    ]
    return "\n".join(["```", *keep, "```"])


SEED_001_PEAK = ("traffic.peak_requests_per_minute=8000",)
"""Seed 001's volume (user story 4: 8,000 requests a minute at the evening peak), as docs/planning.md
replays it with ``make plan -c ...``."""


def _plan_at_seed_001(sources: Sources) -> str:
    """``make plan`` at seed 001's volume: its recommendation and the two cheapest rows after it."""
    at_peak = Sources(SEED_001_PEAK)
    slo = at_peak.config.slo
    text = fleet_planner.format_planner(at_peak.config, at_peak.plan, slo.cold.ttft_p95_ms, slo.warm.ttft_p95_ms)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Recommendation:"))
    rows = [line for line in lines[start + 1 :] if line.startswith("  ml.")][:3]
    command = f"$ make plan ARGS='-c {SEED_001_PEAK[0]}'"
    return "\n".join(["```", command, lines[start], lines[start + 1], *rows, "```"])


def _what_if(sources: Sources) -> str:
    config = sources.config
    lines = ["```"]
    for name, kv, think in WHAT_IF_GPUS:
        args = f"--gpu {name}" + (f" --kv-cache-tokens {kv}" if kv else "") + (f" --think-s {think:g}" if think else "")
        engine = engine_for(config, name, kv)
        shape = conversation_shape(config.traffic, config.engine, len(config.model.adapters))
        if think is not None:
            shape = replace(shape, think_s=think)
        lines += [
            f'$ make capacity ARGS="{args}"',
            *capacity_report(engine, shape, config.slo.ttft_p95_ms(), config.throughput.routing, 1),
            "",
        ]
    lines[-1] = "```"
    return "\n".join(lines)


def _think_sensitivity(sources: Sources) -> str:
    config = sources.config
    rows = [
        "| GPU, KV cache | " + " | ".join(f"pause {think:g} s" for think in THINK_SWEEP_S) + " |",
        "|---|" + "---:|" * len(THINK_SWEEP_S),
    ]
    # The H200 on the runs' own host (4 cores, no gateway); the L40S on its instance's (2 cores, gateway).
    for name, instance_type, host in (
        ("H200", "ml.g5.xlarge", 1.0),
        ("L40S", "ml.g6e.xlarge", instance_host_scale("ml.g6e.xlarge", config.engine.tensor_parallel_size)),
    ):
        tokens = sources.plan.planner.memory_plan(instance_type).kv_tokens
        engine = project(
            reference_fit(), gpu_named(name), tokens, max_num_seqs=config.engine.max_num_seqs, host_scale=host
        )
        base = conversation_shape(config.traffic, config.engine, len(config.model.adapters))
        cells = []
        for think in THINK_SWEEP_S:
            result = capacity(
                engine.parts, replace(base, think_s=think), config.slo.ttft_p95_ms(), margin=engine.margin
            )
            cells.append(
                f"{result.model_holds_per_min['both']:,.0f} / {result.holds_per_min['both']:,.0f} "
                f"(cliff {result.cliff_per_min:,.0f})"
            )
        rows.append(
            f"| {name}, {tokens:,} tokens ({instance_type}'s), host x{host:g}, margin {engine.margin:.0%} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(rows)


def _engine_fit(sources: Sources) -> str:
    del sources
    return "\n".join(["```", "$ make capacity-fit", *engine_fit.report(engine_fit.load_fit()), "```"])


def _open_loop_runs(sources: Sources) -> str:
    del sources
    rows = [
        "| run | offered /min | arrived /min | paced /min | completed /min | cold share | TTFT p95 cold / warm, ms | "
        "ITL ms | running | KV in use | preemptions | held |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for run in engine_fit.load_runs():
        judged = verdict(run.summaries, engine_fit.RUN_SLO_MS)
        host = f"{run.host_cores} cores{' + gateway' if run.gateway else ''}"
        for index, summary in enumerate(run.summaries):
            cold, warm = summary.classes["cold"].ttft_p95_ms, summary.classes["warm"].ttft_p95_ms
            kv = summary.engine.get("kv_cache_usage_mean")
            running = summary.engine.get("running_mean")
            paced = "-" if summary.paced_per_min is None else f"{summary.paced_per_min:,.0f}"
            held = "yes" if index < judged.steps_held else "no"
            rows.append(
                f"| {run.label} (think {run.think_s:g} s, KV {run.kv_cache_tokens:,}, {host}) | "
                f"{summary.requests_per_min:,.0f} | {summary.arrived_per_min:,.0f} | {paced} | "
                f"{summary.completed_per_min:,.0f} | {summary.cold_share:.0%} | {_ms(cold)} / {_ms(warm)} | "
                f"{_ms(summary.itl_mean_ms)} | {'-' if running is None else f'{running:,.0f}'} | "
                f"{'-' if kv is None else f'{kv:.0%}'} | {_preemptions(run.run, index)} | {held} |"
            )
    return "\n".join(rows)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _preemptions(run: OpenLoopRun, index: int) -> str:
    samples = [s for s in run.samples if s.step == index and "preemptions" in s.figures]
    return "-" if len(samples) < 2 else f"{samples[-1].figures['preemptions'] - samples[0].figures['preemptions']:,.0f}"


def _migration_example_report(sources: Sources) -> str:
    """``ops migrate report`` on the invented example (docs/examples/migration-invented), as a user runs it."""
    import datetime as dt  # noqa: PLC0415

    from ops.cli import Deps  # noqa: PLC0415
    from ops.cli import main as ops_main  # noqa: PLC0415

    folder = "docs/examples/migration-invented"
    lines: list[str] = []

    def no_aws(region: str | None, profile: str | None, what: str) -> object:
        raise AssertionError(f"the example's report asked for AWS: {what}")

    deps = Deps(migrate_clients=no_aws, out=lines.append, now=lambda: dt.datetime(2026, 11, 16, tzinfo=dt.UTC))
    code = ops_main(["migrate", "report", "--from", str(REPO / folder), "--cdk-json", str(CDK_JSON)], deps)
    shown = [line.replace(str(REPO / folder), folder) for line in lines]
    return "\n".join(["```", f"$ python -m ops migrate report --from {folder}", *shown, f"$ echo $?\n{code}", "```"])


def _scaling_blocks() -> dict[str, Callable[[Sources], str]]:
    from devtools import scaling_doc  # noqa: PLC0415 (runs the week's simulations: only when asked)

    return {
        "cost": lambda sources: "\n".join(scaling_doc.cost_block(sources.config, sources.plan)),
        "simulation": lambda sources: "\n".join(
            scaling_doc.simulation_block(sources.config.serving, scaling_doc.cached_runs())
        ),
    }


def _g5_refused(sources: Sources) -> str:
    """The one line synth stops with when the primary alone moves to the seeds' ml.g5.xlarge."""
    del sources
    config = load_cli_config(["serving.primary.instance_type=ml.g5.xlarge"])
    try:
        make_plan(config)
    except ConfigError as error:
        return "\n".join(["```", str(error), "```"])
    raise AssertionError("the default SLOs on ml.g5.xlarge no longer stop synth: rewrite docs/observability.md")


SCHEDULE_WHY = {
    "off-peak": "off-peak floor, seed 001 US 4 (its max 6 dropped)",
    "business-hours": "seed 001 US 4",
    "jp-evening-peak": "18:00-22:00 JST peak, 15 min early, seed 003 §9",
    "jp-evening-end": "down to the late-evening floor, seed 003 §9",
    "shonen-jump-prescale": "Shonen Jump MON 18:00 minus 2 h lead, seed 001 US 7",
    "shonen-magazine-prescale": "Shonen Magazine WED 18:00 minus 2 h, seed 001 US 7",
    "friday-release-prescale": "Friday release 18:00 minus 2 h, seed 001 US 4",
}


def _schedule_table(sources: Sources) -> str:
    rows = ["| Action | Cron | Min (derived) | Max | Why |", "|---|---|---|---|---|"]
    for action in sources.plan.variant("primary").scaling.resolved_schedule:
        ceiling = "hard max" if action.max_capacity is None else str(action.max_capacity)
        why = SCHEDULE_WHY.get(action.name, action.description)
        rows.append(f"| `{action.name}` | `{action.schedule}` | {action.min_capacity} | {ceiling} | {why} |")
    return "\n".join(rows)


def _hard_bounds(sources: Sources) -> str:
    serving = sources.config.serving
    return (
        f"primary {serving.primary.min_capacity}..{serving.primary.max_capacity}, "
        f"canary {serving.canary.min_capacity}..{serving.canary.max_capacity}"
    )


BLOCKS: dict[str, Callable[[Sources], str]] = {
    "schedule-table": _schedule_table,
    "hard-bounds": _hard_bounds,
    "primary-max": lambda sources: str(sources.config.serving.primary.max_capacity),
    "concurrency-target": lambda sources: f"{sources.plan.variant('primary').scaling.target_tracking.target_value:g}",
    "kv-target": lambda sources: f"{sources.plan.variant('primary').scaling.kv_cache_tracking.target_value:g}",
    "g5-refused": _g5_refused,
    "synth-summary": _synth_summary,
    "dev-modes-cost": _dev_modes_cost,
    "quota-table": _quota_table,
    "preflight-quota": _preflight_quota,
    "memory-types-table": _memory_types_table,
    "synth-refusals": _synth_refusals,
    "host-tier-table": _host_tier_table,
    "host-tier-line": _host_tier_line,
    "ic-copy-target": lambda sources: f"{_copy_target():g}",
    "memory-table": _memory_table,
    "fleet-verdicts": _primary_lines,
    "recommendation": _recommendation,
    "seeds-fleet": _seeds_fleet,
    "plan": _plan,
    "plan-seed-001": _plan_at_seed_001,
    "what-if": _what_if,
    "think-sensitivity": _think_sensitivity,
    "engine-fit": _engine_fit,
    "open-loop-runs": _open_loop_runs,
    "offload-runs": lambda sources: offload_doc.table(),
    "model-error": lambda sources: f"{reference_fit().model_error:.0%}",
    "default-instance-type": lambda sources: sources.config.serving.primary.instance_type,
    "default-rate": lambda sources: f"{sources.best.requests_per_minute:,.0f}",
    "default-monthly": lambda sources: f"${sources.best.usd_per_month:,.0f}",
    "capacity-job-cost": lambda sources: measure_doc.cost_block(),
    "measured-plan-change": lambda sources: measure_doc.plan_change_block(),
    "migration-example-report": _migration_example_report,
}
"""Block name -> what writes it. A block is inline (a figure in a sentence) when its marker and its
end share a line; otherwise its body is the lines between them."""


@dataclass(frozen=True)
class Stale:
    """One generated figure that no longer matches its tool."""

    path: Path
    line: int
    name: str

    def __str__(self) -> str:
        return (
            f"{self.path.relative_to(REPO)}:{self.line}: generated:{self.name} is stale (its tool prints something "
            f"else now); regenerate with `{COMMAND}`"
        )


def render(text: str, sources: Sources, path: Path) -> str:
    """``text`` with every generated block rewritten.

    Raises:
        ValueError: a block names no known generator (one line naming the file, line and name).
    """
    blocks = dict(BLOCKS)
    out, last = [], 0
    for match in MARKER.finditer(text):
        name = match.group("name")
        if name not in blocks and name in ("cost", "simulation"):
            blocks.update(_scaling_blocks())
        if name not in blocks:
            line = text.count("\n", 0, match.start()) + 1
            raise ValueError(
                f"{path.relative_to(REPO)}:{line}: generated:{name} has no generator in devtools/doc_figures.py"
            )
        body = match.group("body")
        value = blocks[name](sources)
        inline = "\n" not in body
        new_body = value if inline else f"\n{value}\n"
        out += [text[last : match.start("body")], new_body]
        last = match.end("body")
    out.append(text[last:])
    return "".join(out)


def stale(paths: Sequence[Path] = DOCS, sources: Sources | None = None) -> list[Stale]:
    """Every generated figure in ``paths`` that its tool would now write differently."""
    sources = sources or Sources()
    found = []
    for path in paths:
        text = path.read_text()
        if "<!-- generated:" not in text:
            continue
        fresh = render(text, sources, path)
        if fresh == text:
            continue
        old, new = list(MARKER.finditer(text)), list(MARKER.finditer(fresh))
        for before, after in zip(old, new, strict=True):
            if before.group("body") != after.group("body"):
                found.append(Stale(path, text.count("\n", 0, before.start()) + 1, before.group("name")))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    sources = Sources()
    if "--check" in args:
        problems = stale(sources=sources)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in DOCS:
        text = path.read_text()
        if "<!-- generated:" in text:
            fresh = render(text, sources, path)
            if fresh != text:
                path.write_text(fresh)
                print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
