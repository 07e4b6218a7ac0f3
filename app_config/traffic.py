"""Demand as config: how many requests a week brings, when, and what they look like.

``make simulate``, ``make plan`` and the planner's floors read this section; synth does not
(nothing in a template depends on it). Minute 0 of the week is Monday 00:00 in
``scaling.timezone``, as in :mod:`planning.weekly_cron`.

**The seeds disagree about the volume by about 60x** (issue 34):

* seed 001 user story 4: "At 3 AM JST, traffic dropped to ~500 requests/minute" with "One
  instance capacity: ~1,200 requests/minute" (one ml.g5.xlarge). The week the simulation used
  until now was fitted to those figures: it peaks at 8,000 req/min and brings ~2.95 M requests on
  a day without a release (3.2 M a day over the week).
* seed 003 (why an A10G, not an A100): "our traffic volume (~50K requests/day across 4
  instances)".

The default is seed 003's **50,000 requests a day**, because it is the figure consistent with
what was measured: at MangaAssist's request shape a whole H100 completes 164-268 requests a
minute within a ~500 ms TTFT p95 (../shared/measurements/, 2026-11-26, c = 4-8), so seed 001's
1,200 a minute on one A10G (70 vs 989 dense FP16 TFLOPS) cannot be requests of this shape, and
its 500 a minute at 3 AM came with that capacity figure. 50,000 a day on seed 003's 4 instances
is ~25 requests a minute per instance at the evening peak, which an A10G-class engine serves at
low concurrency. ``-c traffic.peak_requests_per_minute=8000`` replays seed 001's volume.

The shape (when in the day, which evenings spike) is the seeds' either way: seed 001's 3 AM
trough, seed 003 §9's 18:00-22:00 JST evening peak, seed 001 user story 7's release evenings
(Shonen Jump MON 18:00 x2.0, Shonen Magazine WED 18:00 x1.8, "traffic spiked 3x in 15
minutes" for the ramp) and seed 001 user story 4's Friday release (its x2.0 ASSUMED).
"""

import itertools
from typing import Literal

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel

DayOfWeek = Literal["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]


def _minute_of_day(text: str) -> int:
    hours, sep, minutes = text.partition(":")
    if not sep or not hours.isdigit() or not minutes.isdigit() or int(hours) > 24 or int(minutes) > 59:
        raise ValueError(f"{text!r}: must be HH:MM between 00:00 and 24:00")
    value = int(hours) * 60 + int(minutes)
    if value > 1440:
        raise ValueError(f"{text!r}: must be HH:MM between 00:00 and 24:00")
    return value


# (time of day, relative demand): linear in between, 24:00 closes the day. The relative
# values are the simulation's earlier curve (planning/scaling_sim/demand.py before issue 34),
# whose absolute level was fitted to seed 001; only the shape is kept.
_DAILY_SHAPE: tuple[tuple[str, float], ...] = (
    ("00:00", 1_200.0),
    ("03:00", 500.0),  # seed 001 user story 4: the 3 AM JST trough
    ("06:00", 600.0),
    ("09:00", 2_000.0),  # business hours
    ("12:00", 2_400.0),
    ("15:00", 2_200.0),
    ("18:00", 3_600.0),  # seed 003 §9: the JP evening peak starts
    ("20:00", 4_000.0),
    ("22:00", 3_000.0),  # seed 003 §9: the evening peak ends
    ("24:00", 1_200.0),
)


class ReleaseDemandConfig(ConfigModel):
    """A weekly release evening: demand x ``multiplier`` from ``time`` on ``day_of_week``."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$", description="Release name, e.g. shonen-jump.")
    day_of_week: DayOfWeek = Field(description="Day of the release, in scaling.timezone.")
    time: str = Field(default="18:00", description="HH:MM the demand starts to rise, in scaling.timezone.")
    multiplier: float = Field(gt=1.0, le=20.0, description="Demand at the release over the usual demand then.")

    @field_validator("time")
    @classmethod
    def _time(cls, value: str) -> str:
        if _minute_of_day(value) >= 1440:
            raise ValueError(f"{value!r}: must be HH:MM between 00:00 and 23:59")
        return value

    @property
    def minute_of_week(self) -> int:
        """Minutes after Monday 00:00 that the release starts."""
        days = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
        return days.index(self.day_of_week) * 1440 + _minute_of_day(self.time)


_RELEASES = (
    ReleaseDemandConfig(name="shonen-jump", day_of_week="MON", multiplier=2.0),  # seed 001 user story 7
    ReleaseDemandConfig(name="shonen-magazine", day_of_week="WED", multiplier=1.8),  # seed 001 user story 7
    ReleaseDemandConfig(name="friday-release", day_of_week="FRI", multiplier=2.0),  # seed 001 us 4; x2.0 ASSUMED
)


class RequestShapeConfig(ConfigModel):
    """The prompt layout and answer length of one request, tokens.

    Sources: seed 002 (the ~600 shared system-prefix tokens "recomputed on every single turn", the
    1,400-token retrieval budget, 4.2 turns per conversation) and the GPU measurements' request
    shape (benchmarks/conversations.py ``RequestShape``: 600 + 1,400 + 40 per turn, 180 output).
    """

    system_prefix_tokens: int = Field(
        default=600, ge=0, le=32768, description="Shared system prompt, identical for every request (seed 002)."
    )
    conversation_tokens: int = Field(
        default=1400, ge=0, le=32768, description="A conversation's own context on its first turn (seed 002)."
    )
    turn_tokens: int = Field(default=40, ge=1, le=8192, description="A user turn (the measurements' shape).")
    output_tokens: int = Field(default=180, ge=1, le=8192, description="An answer (the measurements' shape).")
    bytes_per_token: float = Field(
        default=4.0,
        gt=0,
        le=16,
        description=(
            "Request-body bytes per prompt token, to turn token counts into SageMaker's PrefixLength bytes; ~4 for "
            "English with Llama-3's tokenizer (its ~128K vocabulary averages ~4 characters a token), less for "
            "Japanese, whose UTF-8 characters take 3 bytes but tokenize to about one token each."
        ),
    )

    @property
    def cold_uncached_tokens(self) -> int:
        """Prefill work of a conversation's first turn when only the system prefix is cached."""
        return self.conversation_tokens + self.turn_tokens

    @property
    def warm_uncached_tokens(self) -> int:
        """Prefill work of a follow-up turn whose history is in the engine's prefix cache: the last
        answer and the new user turn (~220 tokens with the defaults)."""
        return self.output_tokens + self.turn_tokens


class TrafficConfig(ConfigModel):
    """The week's demand (module docstring: the seeds' conflict and why 50,000 a day)."""

    requests_per_day: float = Field(
        default=50_000.0,
        gt=0,
        le=1e9,
        description=(
            "Mean requests a day over the week, release evenings included. Source: seed 003 (~50K requests/day); "
            "seed 001's figures imply ~3.2 M (docs/planning.md says why 50K)."
        ),
    )
    peak_requests_per_minute: float | None = Field(
        default=None,
        gt=0,
        le=1e7,
        description=(
            "Set instead of the daily volume: the week's busiest minute, requests/min (8000 replays the simulation's "
            "earlier week, fitted to seed 001). Wins over requests_per_day when set."
        ),
    )
    daily_shape: tuple[tuple[str, float], ...] = Field(
        default=_DAILY_SHAPE,
        min_length=2,
        max_length=48,
        description=(
            "Relative demand at times of day (HH:MM, weight), linear in between, from 00:00 to 24:00 in "
            "scaling.timezone. Sources: seed 001 (3 AM trough), seed 003 §9 (18:00-22:00 peak)."
        ),
    )
    releases: tuple[ReleaseDemandConfig, ...] = Field(
        default=_RELEASES,
        max_length=20,
        description="Weekly release evenings and their demand multipliers (seed 001 user stories 4 and 7).",
    )
    release_ramp_min: int = Field(
        default=15, ge=1, le=240, description="Minutes to reach a release's multiplier (seed 001: 3x in 15 minutes)."
    )
    release_hold_min: int = Field(default=120, ge=0, le=720, description="Minutes at the multiplier (ASSUMED ~2 h).")
    release_decay_min: int = Field(
        default=120, ge=1, le=720, description="Minutes back to the usual demand (ASSUMED ~2 h)."
    )
    turns_per_conversation: float = Field(
        default=4.2, ge=1.0, le=100.0, description="Mean turns of a conversation (seed 002: 4.2)."
    )
    think_s: float = Field(
        default=30.0,
        ge=0.0,
        le=3600.0,
        description=(
            "Mean pause between an answer and the user's next turn, seconds (exponentially distributed): how long a "
            "conversation's history must survive in the prefix cache. No seed gives it; 30 s is between a quick reply "
            "(a few seconds) and reading the 180-token answer and typing a 40-token message (about 85 s at 238 "
            'words/min reading and 36 words/min mobile typing; docs/sources.md, "Users\' pauses"). docs/planning.md '
            "shows how the plan moves from 4 s to 60 s."
        ),
    )
    request_shape: RequestShapeConfig = Field(default=RequestShapeConfig(), description="Prompt layout, tokens.")

    @field_validator("daily_shape")
    @classmethod
    def _shape(cls, value: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
        minutes = [_minute_of_day(time) for time, _ in value]
        if minutes[0] != 0 or minutes[-1] != 1440:
            raise ValueError("must start at 00:00 and end at 24:00")
        if any(b <= a for a, b in itertools.pairwise(minutes)):
            raise ValueError("times must increase")
        if any(weight < 0 for _, weight in value) or not any(weight > 0 for _, weight in value):
            raise ValueError("weights must be >= 0 and at least one > 0")
        return value

    @model_validator(mode="after")
    def _unique_releases(self) -> "TrafficConfig":
        names = [release.name for release in self.releases]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"releases: names must be unique; repeated: {', '.join(repeated)}")
        return self

    @property
    def cold_share(self) -> float:
        """The share of requests that open a conversation (1 / turns per conversation)."""
        return 1.0 / self.turns_per_conversation

    def key_points(self) -> list[tuple[int, float]]:
        """``daily_shape`` as (minute of the day, weight)."""
        return [(_minute_of_day(time), weight) for time, weight in self.daily_shape]
