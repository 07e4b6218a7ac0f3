"""Each gated metric of one candidate's answers: BLEU from sacrebleu, the rest judged (``judge.py``).

A metric that cannot be computed (no rows in its subset, rows without an answer, a failed judge
call, sacrebleu refusing its input) is returned with ``value = None`` and the reason; its gate then
fails closed (``quality_gates.Gate.passes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from .eval_set import EvalRow
from .judge import CRITERIA, JudgeError, judged_rate
from .quality_gates import METRIC_DIRECTIONS, SUBSET_TAGS

BLEU_TOKENIZERS: Final = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}
"""sacrebleu's tokenizer per ``lang:`` tag; other languages take its default, ``13a``. Japanese has no
spaces between words, so ``13a`` would score a whole sentence as one token; ``ja-mecab`` is sacrebleu's
own (the ``sacrebleu[ja]`` extra)."""


@dataclass(frozen=True)
class MetricResult:
    """One metric: ``value`` a fraction in [0, 1] (None: not computed, see ``reason``) over ``rows`` rows."""

    metric: str
    value: float | None
    rows: int
    reason: str | None = None


def corpus_bleu(rows: Sequence[EvalRow], answers: dict[str, str]) -> float:
    """Corpus BLEU on the 0-1 scale (sacrebleu's score / 100): per language with its tokenizer
    (``BLEU_TOKENIZERS``), then the mean weighted by rows.

    Raises:
        Exception: whatever sacrebleu raises (e.g. ``ja-mecab`` without its extra installed).
    """
    import sacrebleu  # the evaluate step's image has it; imported here so the judge alone needs only boto3

    by_language: dict[str, list[EvalRow]] = {}
    for row in rows:
        by_language.setdefault(row.language, []).append(row)
    total = 0.0
    for language, group in by_language.items():
        score = sacrebleu.corpus_bleu(
            [answers[row.id] for row in group],
            [[row.reference for row in group]],
            tokenize=BLEU_TOKENIZERS.get(language, "13a"),
        ).score
        total += score / 100.0 * len(group)
    return total / len(rows)


def subset(metric: str, rows: Sequence[EvalRow]) -> list[EvalRow]:
    """The rows ``metric`` scores: those tagged with its subset tag, or all of them."""
    tag = SUBSET_TAGS[metric]
    return [row for row in rows if tag is None or tag in row.tags]


def _computed(metric: str, rows: list[EvalRow], score: Callable[[], float]) -> MetricResult:
    if not rows:
        return MetricResult(metric, None, 0, f"no eval rows tagged {SUBSET_TAGS[metric]!r}")
    try:
        return MetricResult(metric, score(), len(rows))
    except JudgeError as error:
        return MetricResult(metric, None, len(rows), str(error))
    except Exception as error:  # sacrebleu's own errors are plain exceptions; fail closed on any
        return MetricResult(metric, None, len(rows), f"{type(error).__name__}: {error}")


def compute_metrics(
    rows: Sequence[EvalRow], answers: dict[str, str], *, judge_client: Any, judge_model_id: str
) -> dict[str, MetricResult]:
    """Every metric of ``METRIC_DIRECTIONS``, in its order. Rows without an answer make every metric
    not computed (the load test lost answers: nothing about the candidate is known)."""
    missing = [row.id for row in rows if row.id not in answers]
    if missing:
        reason = f"{len(missing)} eval row(s) have no answer, e.g. {', '.join(missing[:3])}"
        return {metric: MetricResult(metric, None, len(rows), reason) for metric in METRIC_DIRECTIONS}

    def score(metric: str, chosen: list[EvalRow]) -> Callable[[], float]:
        if metric == "bleu":
            return partial(corpus_bleu, chosen, answers)
        assert metric in CRITERIA, metric
        return lambda: judged_rate(judge_client, judge_model_id, metric, chosen, answers)[0]

    results = {}
    for metric in METRIC_DIRECTIONS:
        chosen = subset(metric, rows)
        results[metric] = _computed(metric, chosen, score(metric, chosen))
    return results
