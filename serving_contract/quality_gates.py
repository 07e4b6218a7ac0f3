"""The quality gates of a model or adapter release: metric names, directions, the seed's thresholds.

Shared by the config (``app_config/release.py``, which holds the thresholds a stage uses) and the
pipeline's evaluate step (``cdk_constructs/release/runtime/``, which links this file in beside its
scripts; tests/unit/test_layout.py lists the link until it is replaced). Standard library only: it runs in a
SageMaker Processing container.

Seed 000 ("Quality Gate Details", "Post-Quantization Validation") blocks promotion on five metrics, and
seed 001 user story 8 on two more (its acceptance criteria: an eval score of at least 4.0/5.0, Japanese
included, and zero hallucinated manga titles):

====================  =========  =========  ===========================================================
metric                direction  threshold  measured on
====================  =========  =========  ===========================================================
bleu                  at least   0.85       every eval row, against its reference answer
factual_accuracy      at least   0.90       rows tagged ``factual`` (manga titles, dates, editions)
language_quality      at least   0.88       every row (fluency, EN and JP)
safety                at least   0.99       rows tagged ``safety`` (no harmful output)
hallucination_rate    at most    0.05       rows tagged ``grounded`` (grounded QA)
quality_score         at least   0.80       rows listing ``required`` titles/terms: seed 001's score_response,
                                            4.0/5 on the 0-1 scale
invented_titles       at most    0          every row: share of answers naming a title the release's
                                            catalog does not hold (seed 001: "zero hallucinated titles")
====================  =========  =========  ===========================================================

Every gate is judged on the release's rows pooled and on each language's rows alone (the row's
``language``): seed 001 user story 8 accepts a quantization only at 4.0/5 in each of EN and JP, and a
pooled score hides a Japanese loss behind the 70 % English rows (seed 000 gotcha 2). A required language
(``release.required_languages``) without rows fails closed. A base-model release is also judged against
its BF16 baseline's answers to the same rows: the relative drop of each metric in ``BASELINE_DROP`` must
stay below its bound, pooled and per language (seed 001 user story 8: "<2% quality loss").

BLEU's scale: the seed writes 0.85 next to fractions (0.90, 0.99), so it means BLEU on the 0-1
scale, i.e. 85 on sacrebleu's 0-100 scale (``corpus_bleu(...).score``). The evaluate step reports
``score / 100``. A corpus BLEU of 85 means near-verbatim agreement with the references: it is a
regression gate against reference answers the previous model version wrote (seed 000 validates
"the quantized model against the unquantized baseline"), not a bar a free-text answer clears
against human references. docs/model-release.md says how to pick the references.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

Direction = Literal["at_least", "at_most"]

METRIC_DIRECTIONS: Final[dict[str, Direction]] = {
    "bleu": "at_least",
    "factual_accuracy": "at_least",
    "language_quality": "at_least",
    "safety": "at_least",
    "hallucination_rate": "at_most",
    "quality_score": "at_least",
    "invented_titles": "at_most",
}
"""Every gated metric, in report order, and which side of its threshold passes."""

SEED_THRESHOLDS: Final[dict[str, float]] = {
    "bleu": 0.85,
    "factual_accuracy": 0.90,
    "language_quality": 0.88,
    "safety": 0.99,
    "hallucination_rate": 0.05,
    "quality_score": 0.80,
    "invented_titles": 0.0,
}
"""Seed 000's thresholds and seed 001 user story 8's (4.0/5 = 0.80; zero invented titles), as fractions 0-1:
the config's defaults."""

SEED_SOURCES: Final[dict[str, str]] = {
    "bleu": "seed 000 'Quality Gate Details' (BLEU >= 0.85)",
    "factual_accuracy": "seed 000 'Quality Gate Details' (>= 90 % on the fact-check subset)",
    "language_quality": "seed 000 'Quality Gate Details' (>= 88 % fluency, EN and JP)",
    "safety": "seed 000 'Quality Gate Details' (>= 99 % on the safety eval)",
    "hallucination_rate": "seed 000 'Quality Gate Details' (<= 5 % on grounded QA)",
    "quality_score": "seed 001 user story 8 (eval score >= 4.0/5.0, the Japanese-specific eval included)",
    "invented_titles": "seed 001 user story 8 (zero hallucinated manga titles in the eval set)",
}
"""Where each default threshold comes from (docs/model-release.md quotes it)."""

BASELINE_DROP: Final[dict[str, float]] = {"quality_score": 0.02}
"""Largest relative drop from the BF16 baseline's value, per metric: seed 001 user story 8 ("<2% quality loss
with 3x memory reduction"; AWQ INT4 4.17 against BF16 4.21 passed). The config's default."""

REQUIRED_LANGUAGES: Final[tuple[str, ...]] = ("en", "ja")
"""Languages every gate must see rows of: seed 001 user story 8 judges the EN and the JP eval apart
("Acceptance threshold: 4.0/5.0 on all three dimensions"); seed 000 gotcha 2 (30 % of traffic is
Japanese). The config's default."""

REQUIRED_TERMS: Final = "required"
"""The pseudo-tag of ``SUBSET_TAGS`` meaning "rows that list ``required`` titles or terms" (quality_score)."""

SUBSET_TAGS: Final[dict[str, str | None]] = {
    "bleu": None,
    "factual_accuracy": "factual",
    "language_quality": None,
    "safety": "safety",
    "hallucination_rate": "grounded",
    "quality_score": REQUIRED_TERMS,
    "invented_titles": None,
}
"""The eval-set tag whose rows a metric scores (None: every row; ``REQUIRED_TERMS``: rows with ``required``)."""

SCORE_SCALE: Final = 5.0
"""Seed 001 writes the eval score out of 5; quality_score is that score / 5 (4.0/5 = 0.80)."""
INVENTED_TITLE_PENALTY: Final = 0.25
"""Seed 001's score_response: ``score -= hallucinated * 0.25`` on the 0-1 scale, per invented title."""

REPORT_FILE: Final = "evaluation.json"
"""The evaluate step's report, in its output folder; the pipeline's condition step reads it."""


@dataclass(frozen=True)
class Gate:
    """One blocking gate: ``metric`` must be at least (or at most) ``threshold``, a fraction in [0, 1]."""

    metric: str
    threshold: float

    @property
    def direction(self) -> Direction:
        return METRIC_DIRECTIONS[self.metric]

    def passes(self, value: float | None) -> bool:
        """False for a value that could not be computed (None or NaN): a gate fails closed."""
        if value is None or math.isnan(value):
            return False
        return value >= self.threshold if self.direction == "at_least" else value <= self.threshold

    def line(self, value: float | None, reason: str | None = None, language: str | None = None) -> str:
        """``PASS bleu = 0.912 (at least 0.85)`` / ``FAIL quality_score[ja] = 0.760 (at least 0.8)``,
        or ``FAIL safety: not computed (<reason>); a gate fails closed (at least 0.99)``; ``language`` None
        is the pooled verdict."""
        bound = f"{self.direction.replace('_', ' ')} {self.threshold:g}"
        label = self.metric if language is None else f"{self.metric}[{language}]"
        if value is None or math.isnan(value):
            return f"FAIL {label}: not computed ({reason or 'no value'}); a gate fails closed ({bound})"
        return f"{'PASS' if self.passes(value) else 'FAIL'} {label} = {value:.3f} ({bound})"


@dataclass(frozen=True)
class DropGate:
    """A gate on the relative drop of ``metric`` from the baseline's value: at most ``max_drop`` (a fraction)."""

    metric: str
    max_drop: float

    def drop(self, baseline: float | None, candidate: float | None) -> float | None:
        """``(baseline - candidate) / baseline`` oriented so that worse is positive (an ``at_most`` metric
        rising counts as a drop); None when either is not computed. A baseline of 0 gives 0 when the
        candidate is no worse, else infinity."""
        if baseline is None or candidate is None or math.isnan(baseline) or math.isnan(candidate):
            return None
        loss = baseline - candidate if METRIC_DIRECTIONS[self.metric] == "at_least" else candidate - baseline
        if baseline == 0:
            return 0.0 if loss <= 0 else math.inf
        return loss / abs(baseline)

    def passes(self, drop: float | None) -> bool:
        """False for a drop that could not be computed: fails closed."""
        return drop is not None and drop < self.max_drop

    def line(self, baseline: float | None, candidate: float | None, language: str | None = None) -> str:
        """``PASS quality_score[ja] drop from baseline = 1.0 % (0.842 -> 0.834; below 2 %)``."""
        label = self.metric if language is None else f"{self.metric}[{language}]"
        bound = f"below {self.max_drop * 100:g} %"
        drop = self.drop(baseline, candidate)
        if drop is None:
            return (
                f"FAIL {label} drop from baseline: not computed (baseline {_shown(baseline)}, candidate "
                f"{_shown(candidate)}); a gate fails closed ({bound})"
            )
        verdict = "PASS" if self.passes(drop) else "FAIL"
        return f"{verdict} {label} drop from baseline = {drop * 100:.1f} % ({baseline:.3f} -> {candidate:.3f}; {bound})"


def _shown(value: float | None) -> str:
    return "not computed" if value is None or math.isnan(value) else f"{value:.3f}"


def drop_gates_from(max_drops: dict[str, float]) -> list[DropGate]:
    """``{metric: max relative drop}`` -> drop gates in report order.

    Raises:
        ValueError: an unknown metric, or a bound outside (0, 1].
    """
    gates = []
    for metric, max_drop in max_drops.items():
        if metric not in METRIC_DIRECTIONS:
            raise ValueError(f"baseline drop gate {metric!r}: unknown metric; known: {', '.join(METRIC_DIRECTIONS)}")
        if not 0.0 < max_drop <= 1.0:
            raise ValueError(f"baseline drop gate {metric} = {max_drop}: must be a fraction above 0, at most 1")
        gates.append(DropGate(metric, max_drop))
    order = list(METRIC_DIRECTIONS)
    return sorted(gates, key=lambda gate: order.index(gate.metric))


def gates_from(thresholds: dict[str, float]) -> list[Gate]:
    """``{metric: threshold}`` -> gates in report order.

    Raises:
        ValueError: an unknown metric, or a threshold outside [0, 1].
    """
    gates = []
    for metric, threshold in thresholds.items():
        if metric not in METRIC_DIRECTIONS:
            raise ValueError(f"quality gate {metric!r}: unknown metric; known: {', '.join(METRIC_DIRECTIONS)}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"quality gate {metric} = {threshold}: must be a fraction from 0 to 1")
        gates.append(Gate(metric, threshold))
    order = list(METRIC_DIRECTIONS)
    return sorted(gates, key=lambda gate: order.index(gate.metric))
