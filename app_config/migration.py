"""The Bedrock-to-endpoint migration (seed 002 scenario 6; issue 54): its store, gates and ramp.

Seed 002's phases: (1) **shadow**, Bedrock answers every user and ~10 % of the calls are copied to the
self-hosted engine, the answers compared "on response length distribution, guardrail pass rate, latency
percentiles and a sample of human preference evaluations" over 2 weeks; (2) **canary**, the engine answers 5 %
for a week; (3) **ramp**, 25 -> 50 -> 75 %, "each step held for 2-3 days"; (4) **full**, 100 % with Bedrock kept
as the fallback. ``migration.enabled`` adds the Migration stack (the comparison store and the ramp's state
machine); the client's migration mode writes the pairs, ``ops migrate report`` judges them against
``migration.gates``, and the state machine walks ``migration.ramp.steps`` (docs/migration.md).
"""

import itertools
from typing import Final

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel

SEED_002_SHADOW_PERCENT: Final = 10
"""Seed 002: "100% traffic to Bedrock, 10% shadow-copied to vLLM"."""
EXECUTION_HISTORY_EVENTS: Final = 25_000
"""Step Functions quota: events in one Standard execution's history (developer guide, "Step Functions service
quotas": "Maximum execution history size 25,000 events")."""
EVENTS_PER_CHECK: Final = 9
"""Events one hold loop adds: the Wait state's entered and exited, the Lambda task's entered, scheduled, started,
succeeded and exited, the Choice's entered and exited (cdk_constructs/migration/migration_ramp.py)."""


class MigrationStoreConfig(ConfigModel):
    """The comparison store: one S3 bucket under a key of its own (docs/security.md)."""

    retention_days: int = Field(
        default=60,
        ge=1,
        le=365,
        description=(
            "Days a pair, its scores, a human sample and a report are kept, then expired (every version). Pairs "
            "hold users' answers: keep them no longer than the migration needs. Default: seed 002's migration ran 7 "
            "weeks (2 shadow, 1 canary, 2 ramp, then full), so 60 days keep the first shadow pair through the last "
            "ramp step's report."
        ),
    )


class MigrationGatesConfig(ConfigModel):
    """What ``ops migrate report`` requires of the endpoint against Bedrock, per adapter and language and over all
    pairs (docs/migration.md, "The report"); the error rate is ``slo.max_error_rate``."""

    min_pairs: int = Field(
        default=100,
        ge=2,
        le=1_000_000,
        description=(
            "Pairs a group (all pairs, or one adapter and language) needs for its gates to be judged; fewer are "
            "reported, not judged. 100 per side gives the two-sample KS test a critical D of about 0.19 at "
            "alpha 0.05 (scipy.stats.kstwo), i.e. it can see the gap length_ks_max allows."
        ),
    )
    length_ks_max: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description=(
            "Largest two-sample Kolmogorov-Smirnov statistic D (scipy.stats.ks_2samp) between the endpoint's and "
            "Bedrock's answer lengths in characters: the widest gap between the two cumulative distributions, "
            "0 (same) to 1. Gated on D, not the p-value, which falls below any alpha for a trivial gap once "
            "there are thousands of pairs; the p-value is printed."
        ),
    )
    ttft_p95_ms: float = Field(
        default=500,
        gt=0,
        le=60_000,
        description=(
            "Highest p95 time to first token of the endpoint's streamed answers, ms, as the client measured it. "
            "Source: seed 002 (alert on p95 > 500 ms) and seed 000 (canary TTFT p95 < 500 ms)."
        ),
    )
    latency_p95_max_ratio: float = Field(
        default=1.25,
        gt=0,
        le=100,
        description="Highest endpoint / Bedrock ratio of p95 latency (whole answers, ms) over the same calls.",
    )
    guardrail_share_tolerance: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description=(
            "How far the endpoint's guardrail pass share may be below Bedrock's, a fraction (0.02 = 2 points): "
            "the same tolerance as the shadow variant's (serving.shadow.guardrail_share_tolerance)."
        ),
    )
    similarity_min_median: float = Field(
        default=0.80,
        ge=-1,
        le=1,
        description=(
            "Lowest median cosine similarity between the two answers' embeddings (migration.embedding_model_id): "
            "semantic agreement, 1 = same meaning."
        ),
    )
    preference_min_share: float = Field(
        default=0.45,
        ge=0,
        le=1,
        description=(
            "Lowest share of labelled pairs in which the raters preferred the endpoint's answer or called a tie "
            "(the human-preference sample, exported in random A/B order)."
        ),
    )
    min_labels: int = Field(
        default=30, ge=1, le=100_000, description="Labelled pairs needed for the preference gate to be judged."
    )


class RampStepConfig(ConfigModel):
    """One step of the ramp: the endpoint answers ``percent`` of the calls for at least ``hold_hours``."""

    percent: int = Field(ge=1, le=100, description="Share of calls the endpoint answers, percent.")
    hold_hours: float = Field(
        ge=1,
        le=720,
        description="Hours the step is held before the next may start (1 hour to 30 days).",
    )


DEFAULT_STEPS: Final = (
    RampStepConfig(percent=5, hold_hours=168),
    RampStepConfig(percent=25, hold_hours=60),
    RampStepConfig(percent=50, hold_hours=60),
    RampStepConfig(percent=75, hold_hours=60),
    RampStepConfig(percent=100, hold_hours=24),
)
"""Seed 002: canary 5 % for 1 week, then 25, 50 and 75 % "each step held for 2-3 days" (60 h: 2.5 days), then
full; seed 000: 24 hours at 100 % before the old path is retired."""


class MigrationRampConfig(ConfigModel):
    """The ramp's steps and what the state machine checks between them (docs/migration.md, "The ramp")."""

    steps: tuple[RampStepConfig, ...] = Field(
        default=DEFAULT_STEPS,
        description=(
            "The steps in order: percents rising, the last 100. Before each step the state machine requires the "
            "previous step's hold to have passed, every watched alarm out of ALARM and a passing report published "
            "since the previous step began."
        ),
    )
    check_interval_min: int = Field(
        default=15,
        ge=1,
        le=1440,
        description=(
            "Minutes between the state machine's checks while a step is held: an alarm in ALARM or a failing report "
            "rolls back within this (plus the clients' ramp refresh, 60 s)."
        ),
    )
    report_max_age_hours: float = Field(
        default=24,
        gt=0,
        le=720,
        description="A passing report older than this does not open the next step (publish a new one).",
    )
    alarm_names: tuple[str, ...] = Field(
        default=(),
        max_length=50,
        description=(
            "Alarms watched besides the endpoint's critical composite (<endpoint>-critical, which holds the "
            "client-unanswered and engine alarms) and the client fallback rate (<endpoint>-client-fallback-rate: "
            "canary calls the endpoint failed and Bedrock answered); any of them in ALARM rolls back."
        ),
    )

    @model_validator(mode="after")
    def _fits_one_execution(self) -> "MigrationRampConfig":
        held_min = sum(step.hold_hours for step in self.steps) * 60
        events = int((held_min / self.check_interval_min + len(self.steps)) * EVENTS_PER_CHECK)
        budget = EXECUTION_HISTORY_EVENTS * 0.9
        if events > budget:
            least = int(held_min * EVENTS_PER_CHECK / budget) + 1
            raise ValueError(
                f"check_interval_min = {self.check_interval_min}: the steps' holds ({held_min / 60:g} h) take "
                f"~{events:,} history events, above 90 % of one Step Functions execution's 25,000; set it to at least "
                f"{least}, or shorten the holds"
            )
        return self

    @field_validator("steps")
    @classmethod
    def _rising_to_full(cls, steps: tuple[RampStepConfig, ...]) -> tuple[RampStepConfig, ...]:
        if not steps:
            raise ValueError("steps = []: name at least one step, the last at 100 percent")
        percents = [step.percent for step in steps]
        if any(b <= a for a, b in itertools.pairwise(percents)):
            raise ValueError(f"percents {percents}: must rise from step to step")
        if percents[-1] != 100:
            raise ValueError(f"percents {percents}: the last step must be 100 (full, Bedrock as the fallback)")
        return steps


class MigrationConfig(ConfigModel):
    """The migration from Bedrock to the self-hosted endpoint (module docstring). Off by default."""

    enabled: bool = Field(
        default=False, description="Add the Migration stack: the comparison store and the ramp's state machine."
    )
    bedrock_model_id: str = Field(
        default="meta.llama3-1-8b-instruct-v1:0",
        pattern=r"^[a-z0-9-]+\.[a-zA-Z0-9.:_-]+$",
        description=(
            "The Bedrock model users are on (Converse), whose answers the endpoint's are compared with. Default: "
            "Llama 3.1 8B Instruct, the managed model of the endpoint's family (docs/planning.md prices it)."
        ),
    )
    shadow_percent: int = Field(
        default=SEED_002_SHADOW_PERCENT,
        ge=1,
        le=100,
        description="Percent of calls the clients copy to the other backend and store as pairs (seed 002: 10).",
    )
    embedding_model_id: str = Field(
        default="amazon.titan-embed-text-v2:0",
        pattern=r"^[a-z0-9-]+\.[a-zA-Z0-9.:_-]+$",
        description=(
            "Bedrock embedding model of the semantic-agreement score (InvokeModel; Titan Text Embeddings V2 takes "
            "up to 8,192 tokens, Bedrock user guide 'Amazon Titan Text Embeddings')."
        ),
    )
    guardrail_id: str | None = Field(
        default=None,
        pattern=r"^(arn:aws[a-z-]*:bedrock:[a-z0-9-]+:\d{12}:guardrail/)?[a-z0-9]+$",
        description=(
            "Amazon Bedrock Guardrails guardrail (id or ARN) that judges both answers with ApplyGuardrail (source "
            "OUTPUT); None: only the invented-titles check judges them."
        ),
    )
    guardrail_version: str = Field(
        default="DRAFT",
        pattern=r"^(([1-9][0-9]{0,7})|(DRAFT))$",
        description="The guardrail's version: a number, or DRAFT (ApplyGuardrail's guardrailVersion).",
    )
    store: MigrationStoreConfig = Field(default=MigrationStoreConfig(), description="The comparison store.")
    gates: MigrationGatesConfig = Field(default=MigrationGatesConfig(), description="The report's gates.")
    ramp: MigrationRampConfig = Field(default=MigrationRampConfig(), description="The ramp's steps and checks.")
