"""Each gated metric of one candidate's answers, pooled and per language: BLEU from sacrebleu, seed 001's
quality score and the invented-titles check against the release's catalog (``titles.py``), the rest judged
(``judge.py``).

A metric that cannot be computed (no rows in its subset, rows without an answer, a failed judge call,
no catalog, sacrebleu refusing its input) is returned with ``value = None`` and the reason; its gate then
fails closed (``quality_gates.Gate.passes``). A metric is computed row by row once and then averaged over
the release's rows and over each language's rows (``EvalRow.language``), so the pooled and the
per-language verdicts read the same judge answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Final

from .eval_set import EvalRow
from .judge import CRITERIA, JudgeError, verdict
from .quality_gates import INVENTED_TITLE_PENALTY, METRIC_DIRECTIONS, REQUIRED_TERMS, SUBSET_TAGS
from .titles import Catalog, CatalogError, invented_titles, mentions

BLEU_TOKENIZERS: Final = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}
"""sacrebleu's tokenizer per row language; other languages take its default, ``13a``. Japanese has no
spaces between words, so ``13a`` would score a whole sentence as one token; ``ja-mecab`` is sacrebleu's
own (the ``sacrebleu[ja]`` extra)."""


@dataclass(frozen=True)
class MetricResult:
    """One metric: ``value`` a fraction in [0, 1] (None: not computed, see ``reason``) over ``rows`` rows;
    ``languages``: the same metric on each language's rows alone (empty when not computed at all)."""

    metric: str
    value: float | None
    rows: int
    reason: str | None = None
    languages: dict[str, MetricResult] = field(default_factory=dict)


@dataclass(frozen=True)
class Scoring:
    """What the row-by-row metrics need besides the rows and answers.

    Attributes:
        judge_client / judge_model_id: the Bedrock judge (``judge.py``), which also lists named titles.
        catalog: the release's title catalog, or None (quality_score and invented_titles are then not computed).
    """

    judge_client: Any
    judge_model_id: str
    catalog: Catalog | None = None


def by_language(rows: Sequence[EvalRow]) -> dict[str, list[EvalRow]]:
    """``rows`` grouped by language, languages sorted."""
    groups: dict[str, list[EvalRow]] = {}
    for row in rows:
        groups.setdefault(row.language, []).append(row)
    return dict(sorted(groups.items()))


def corpus_bleu(rows: Sequence[EvalRow], answers: dict[str, str]) -> float:
    """Corpus BLEU on the 0-1 scale (sacrebleu's score / 100): per language with its tokenizer
    (``BLEU_TOKENIZERS``), then the mean weighted by rows.

    Raises:
        Exception: whatever sacrebleu raises (e.g. ``ja-mecab`` without its extra installed).
    """
    groups = by_language(rows)
    return sum(_bleu(language, group, answers) * len(group) for language, group in groups.items()) / len(rows)


def _bleu(language: str, rows: Sequence[EvalRow], answers: dict[str, str]) -> float:
    import sacrebleu  # the evaluate step's image has it; imported here so the judge alone needs only boto3

    return float(
        sacrebleu.corpus_bleu(
            [answers[row.id] for row in rows],
            [[row.reference for row in rows]],
            tokenize=BLEU_TOKENIZERS.get(language, "13a"),
        ).score
        / 100.0
    )


def subset(metric: str, rows: Sequence[EvalRow]) -> list[EvalRow]:
    """The rows ``metric`` scores: those tagged with its subset tag, those listing ``required`` terms
    (``REQUIRED_TERMS``), or all of them."""
    tag = SUBSET_TAGS[metric]
    if tag == REQUIRED_TERMS:
        return [row for row in rows if row.required]
    return [row for row in rows if tag is None or tag in row.tags]


def _empty_reason(metric: str) -> str:
    tag = SUBSET_TAGS[metric]
    return "no eval rows list required terms" if tag == REQUIRED_TERMS else f"no eval rows tagged {tag!r}"


class _Titles:
    """Each answer's invented titles, listed once per row and shared by quality_score and invented_titles."""

    def __init__(self, scoring: Scoring, answers: dict[str, str]) -> None:
        self._scoring, self._answers = scoring, answers
        self._invented: dict[str, list[str] | JudgeError] = {}

    def of(self, row: EvalRow) -> list[str]:
        """The row's invented titles.

        Raises:
            CatalogError: no catalog. JudgeError: the listing failed (once per row: a failure is kept too).
        """
        catalog = self._scoring.catalog
        if catalog is None:
            raise CatalogError("no title catalog (the release's --catalog)")
        if row.id not in self._invented:
            answer = self._answers[row.id]
            try:
                self._invented[row.id] = invented_titles(
                    self._scoring.judge_client, self._scoring.judge_model_id, catalog, answer
                )
            except JudgeError as error:
                self._invented[row.id] = JudgeError(f"row {row.id}: {error}")
        found = self._invented[row.id]
        if isinstance(found, JudgeError):
            raise found
        return found


def quality_score(row: EvalRow, answer: str, invented: Sequence[str]) -> float:
    """Seed 001's ``score_response`` on the 0-1 scale: the share of ``row.required`` the answer mentions,
    less ``INVENTED_TITLE_PENALTY`` per invented title, clamped to [0, 1] (x 5 is the seed's score)."""
    coverage = sum(mentions(answer, term) for term in row.required) / len(row.required)
    return max(0.0, min(1.0, coverage - INVENTED_TITLE_PENALTY * len(invented)))


def _row_scorer(metric: str, answers: dict[str, str], scoring: Scoring, titles: _Titles) -> Callable[[EvalRow], float]:
    """The function giving one row's value of a row-by-row metric (every metric but BLEU)."""
    if metric == "quality_score":
        return lambda row: quality_score(row, answers[row.id], titles.of(row))
    if metric == "invented_titles":
        return lambda row: float(bool(titles.of(row)))
    criterion = CRITERIA[metric]
    return lambda row: float(verdict(scoring.judge_client, scoring.judge_model_id, criterion, row, answers[row.id]))


PerLanguage = Callable[[str, list[EvalRow]], float]
"""A metric's value on one language's rows: ``(language, rows) -> fraction``."""


def _aggregate(metric: str, rows: Sequence[EvalRow], per_language: PerLanguage) -> MetricResult:
    """The pooled result (row-weighted mean of the languages') and each language's, or not computed."""
    try:
        values = {
            language: (per_language(language, group), len(group)) for language, group in by_language(rows).items()
        }
    except (JudgeError, CatalogError) as error:
        return MetricResult(metric, None, len(rows), str(error))
    except Exception as error:  # sacrebleu's own errors are plain exceptions; fail closed on any
        return MetricResult(metric, None, len(rows), f"{type(error).__name__}: {error}")
    pooled = sum(value * count for value, count in values.values()) / len(rows)
    languages = {language: MetricResult(metric, value, count) for language, (value, count) in values.items()}
    return MetricResult(metric, pooled, len(rows), languages=languages)


def compute_metrics(rows: Sequence[EvalRow], answers: dict[str, str], scoring: Scoring) -> dict[str, MetricResult]:
    """Every metric of ``METRIC_DIRECTIONS``, in its order, pooled and per language. Rows without an answer
    make every metric not computed (the load test lost answers: nothing about the candidate is known)."""
    missing = [row.id for row in rows if row.id not in answers]
    if missing:
        reason = f"{len(missing)} eval row(s) have no answer, e.g. {', '.join(missing[:3])}"
        return {metric: MetricResult(metric, None, len(rows), reason) for metric in METRIC_DIRECTIONS}
    titles = _Titles(scoring, answers)
    results = {}
    for metric in METRIC_DIRECTIONS:
        chosen = subset(metric, rows)
        if not chosen:
            results[metric] = MetricResult(metric, None, 0, _empty_reason(metric))
        elif metric == "bleu":
            results[metric] = _aggregate(metric, chosen, lambda language, group: _bleu(language, group, answers))
        else:
            results[metric] = _aggregate(metric, chosen, _mean_of(_row_scorer(metric, answers, scoring, titles)))
    return results


def _mean_of(score: Callable[[EvalRow], float]) -> PerLanguage:
    """A :data:`PerLanguage` that averages ``score`` over the rows."""
    return lambda _language, group: fmean(score(row) for row in group)
