"""The evaluate step: score a candidate's answers on the eval set and judge them against the gates, pooled
and per language, and against the baseline's answers.

    python3 -m runtime.evaluate --eval-set eval.jsonl --answers answers.jsonl --catalog catalog.jsonl \\
        --gates '{"bleu": 0.85, ...}' --required-languages en,ja --judge-model-id <bedrock model> \\
        [--min-rows 200 --min-title-rows 500] \\
        [--baseline-answers baseline.jsonl --baseline-gates '{"quality_score": 0.02}'] --report-dir out/

Writes ``<report-dir>/evaluation.json`` (``quality_gates.REPORT_FILE``)::

    {"passed": false,
     "summary": "FAIL quality_score[ja] = 0.760 (at least 0.8); ...",
     "lines": ["PASS bleu = 0.912 (at least 0.85)", "PASS bleu[en] = ...", ...],
     "languages": ["en", "ja"],
     "metrics": {"quality_score": {"value": 0.83, "threshold": 0.8, "direction": "at_least", "rows": 200,
                                    "passed": false, "reason": null,
                                    "languages": {"en": {"value": 0.86, "rows": 140, "reason": null,
                                                          "passed": true}, "ja": {...}}}, ...},
     "baseline": {"quality_score": {"max_drop": 0.02, "passed": true,
                                     "pooled": {"baseline": 0.84, "candidate": 0.83, "drop": 0.012, "passed": true},
                                     "languages": {"ja": {...}}}},
     "gates": {"bleu": 0.85, ...}}

A gate passes only when its metric passes on the pooled rows and on each language's rows, and every
required language (``--required-languages``) has rows; the release passes only with at least ``--min-rows`` eval rows
(seed 000's offline eval suite: 200 test cases) and an invented-titles check over at least ``--min-title-rows``
answers (seed 001: "zero hallucinated manga titles in 500-prompt eval set"): a two-row eval set passed every judged
gate (issue 53, finding 13); a drop gate only when the candidate's metric is no
more than ``max_drop`` (relative) below the baseline's, pooled and in each language. It prints one line per
verdict, and exits 1 when one fails, unless ``--exit-zero`` (the pipeline's step, whose condition step reads
``passed`` and whose fail step quotes ``summary``). A metric without a gate is still reported; a gate whose
metric is not computed fails (fails closed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .eval_set import EvalRow, EvalSetError, add_row_filter, load_answers, load_eval_set, rows_for
from .metrics import MetricResult, Scoring, compute_metrics
from .quality_gates import METRIC_DIRECTIONS, REPORT_FILE, DropGate, Gate, drop_gates_from, gates_from
from .titles import CatalogError, load_catalog


def _judged(gate: Gate, result: MetricResult, required: Sequence[str], lines: list[str]) -> dict[str, Any]:
    """One gated metric's report entry, pooled and per language, appending its verdict lines."""
    entry: dict[str, Any] = {
        "value": result.value,
        "rows": result.rows,
        "reason": result.reason,
        "threshold": gate.threshold,
        "direction": gate.direction,
    }
    lines.append(gate.line(result.value, result.reason))
    passed = gate.passes(result.value)
    languages: dict[str, Any] = {}
    if result.value is not None:
        for language in sorted({*result.languages, *required}):
            one = result.languages.get(language)
            value = one.value if one else None
            reason = one.reason if one else f"no eval rows in language {language!r}, a required language"
            ok = gate.passes(value)
            languages[language] = {"value": value, "rows": one.rows if one else 0, "reason": reason, "passed": ok}
            lines.append(gate.line(value, reason, language))
            passed = passed and ok
    return entry | {"passed": passed, "languages": languages}


def _dropped(gate: DropGate, baseline: MetricResult, candidate: MetricResult, lines: list[str]) -> dict[str, Any]:
    """One drop gate's report entry, pooled and per language of the candidate, appending its verdict lines."""

    def verdict(base: float | None, cand: float | None, language: str | None) -> dict[str, Any]:
        lines.append(gate.line(base, cand, language))
        drop = gate.drop(base, cand)
        return {"baseline": base, "candidate": cand, "drop": drop, "passed": gate.passes(drop)}

    pooled = verdict(baseline.value, candidate.value, None)
    languages = {
        language: verdict(
            baseline.languages[language].value if language in baseline.languages else None, one.value, language
        )
        for language, one in sorted(candidate.languages.items())
    }
    passed = pooled["passed"] and all(v["passed"] for v in languages.values())
    return {"max_drop": gate.max_drop, "passed": passed, "pooled": pooled, "languages": languages}


@dataclass(frozen=True)
class SizeFloor:
    """The fewest eval rows a release is judged on, and the fewest answers its invented-titles check reads.

    Attributes:
        rows: the release's eval rows (``release.min_eval_rows``; seed 000: 200 test cases).
        title_rows: answers the ``invented_titles`` metric scores (``release.min_invented_titles_rows``; seed 001:
            a 500-prompt eval set). 0 for either: no floor.
    """

    rows: int = 0
    title_rows: int = 0

    def lines(self, rows: int, results: dict[str, MetricResult]) -> list[str]:
        """One FAIL line per floor the release's ``rows`` and ``results`` fall under."""
        found = []
        if rows < self.rows:
            found.append(f"FAIL eval rows = {rows} (at least {self.rows}: seed 000's offline eval suite of 200 cases)")
        titles = results.get("invented_titles")
        scored = titles.rows if titles is not None and titles.value is not None else 0  # not computed: none read
        if self.title_rows and scored < self.title_rows:
            found.append(
                f"FAIL invented_titles rows = {scored} (at least {self.title_rows}: seed 001's 500-prompt eval set)"
            )
        return found


def report(
    results: dict[str, MetricResult],
    gates: Sequence[Gate],
    *,
    required_languages: Sequence[str] = (),
    baseline: dict[str, MetricResult] | None = None,
    drop_gates: Sequence[DropGate] = (),
    size_failures: Sequence[str] = (),
) -> dict[str, Any]:
    """The report's JSON (module docstring) of computed ``results`` judged against ``gates``, the
    ``required_languages`` and, with ``baseline`` (the baseline's answers' results), the ``drop_gates``;
    ``size_failures`` (:meth:`SizeFloor.lines`) fail the release too."""
    by_metric = {gate.metric: gate for gate in gates}
    metrics: dict[str, Any] = {}
    lines: list[str] = list(size_failures)
    for metric in METRIC_DIRECTIONS:
        result = results.get(metric) or MetricResult(metric, None, 0, "not computed")
        gate = by_metric.get(metric)
        if gate is not None:
            metrics[metric] = _judged(gate, result, required_languages, lines)
        elif metric in results:
            metrics[metric] = {"value": result.value, "rows": result.rows, "reason": result.reason}
    drops: dict[str, Any] = {}
    if baseline is not None:
        for drop_gate in drop_gates:
            metric = drop_gate.metric
            drops[metric] = _dropped(
                drop_gate, baseline.get(metric) or MetricResult(metric, None, 0), results[metric], lines
            )
    passed = (
        bool(gates)
        and not size_failures
        and all(metrics[g.metric]["passed"] for g in gates)
        and all(d["passed"] for d in drops.values())
    )
    failing = [line for line in lines if line.startswith("FAIL")]
    checks = len(gates) + len(drops)
    summary = "; ".join(failing) if failing else f"all {checks} quality gates passed, pooled and per language"
    languages = sorted({lang for r in results.values() for lang in r.languages} | set(required_languages))
    return {
        "passed": passed,
        "summary": summary,
        "lines": lines,
        "languages": languages,
        "metrics": metrics,
        "baseline": drops,
        "gates": {gate.metric: gate.threshold for gate in gates},
    }


def evaluate(
    rows: Sequence[EvalRow],
    answers: dict[str, str],
    gates: Sequence[Gate],
    *,
    scoring: Scoring,
    required_languages: Sequence[str] = (),
    baseline_answers: dict[str, str] | None = None,
    drop_gates: Sequence[DropGate] = (),
    floor: SizeFloor = SizeFloor(),
) -> dict[str, Any]:
    """Compute every metric (and the baseline's, when given) and judge the gates and the eval set's ``floor``; the
    report (module docstring)."""
    results = compute_metrics(rows, answers, scoring)
    baseline = compute_metrics(rows, baseline_answers, scoring) if baseline_answers is not None else None
    return report(
        results,
        gates,
        required_languages=required_languages,
        baseline=baseline,
        drop_gates=drop_gates,
        size_failures=floor.lines(len(rows), results),
    )


def _jsonl(path: Path) -> Path:
    """``path``, or the one ``*.jsonl`` file in it when it is a folder (a Processing input's local path)."""
    if not path.is_dir():
        return path
    files = sorted(path.glob("*.jsonl"))
    if len(files) != 1:
        raise EvalSetError(f"{path}: expected one *.jsonl file, found {len(files)}")
    return files[0]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m runtime.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--eval-set", type=Path, required=True, help="The eval set JSONL (runtime/eval_set.py).")
    parser.add_argument("--answers", type=Path, required=True, help="The load-test step's answers JSONL.")
    parser.add_argument("--catalog", type=Path, required=True, help="The release's title catalog (runtime/titles.py).")
    parser.add_argument("--gates", required=True, help="JSON {metric: threshold}, fractions in [0, 1].")
    parser.add_argument(
        "--required-languages", default="", help="Comma-separated languages every gate must have rows of (en,ja)."
    )
    parser.add_argument("--baseline-answers", type=Path, help="The baseline model's answers JSONL to the same rows.")
    parser.add_argument(
        "--baseline-gates", default="{}", help="JSON {metric: largest relative drop from the baseline}, e.g. 0.02."
    )
    parser.add_argument(
        "--min-rows", type=int, default=0, help="Fewest eval rows the release is judged on (release.min_eval_rows)."
    )
    parser.add_argument(
        "--min-title-rows",
        type=int,
        default=0,
        help="Fewest answers the invented-titles check reads (release.min_invented_titles_rows).",
    )
    parser.add_argument("--judge-model-id", required=True, help="Bedrock model id or inference profile of the judge.")
    parser.add_argument("--region", default=None, help="Bedrock region (default: the SDK's).")
    parser.add_argument("--report-dir", type=Path, required=True)
    add_row_filter(parser)
    parser.add_argument("--exit-zero", action="store_true", help="Exit 0 on a failing gate (the pipeline decides).")
    return parser


def _thresholds(flag: str, text: str) -> dict[str, float]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{flag} = {text!r}: expected a JSON object of metric -> fraction")
    return {str(k): float(v) for k, v in value.items()}


def main(argv: Sequence[str] | None = None, *, judge_client: Any = None) -> int:
    """Run the step; 0 when every gate passed (or ``--exit-zero``), 1 when one failed, 2 on bad input."""
    args = _parser().parse_args(argv)
    try:
        gates = gates_from(_thresholds("--gates", args.gates))
        drop_gates = drop_gates_from(_thresholds("--baseline-gates", args.baseline_gates))
    except (ValueError, TypeError) as error:  # json.JSONDecodeError is a ValueError
        print(f"--gates / --baseline-gates: {error}", file=sys.stderr)
        return 2
    try:
        rows = rows_for(load_eval_set(_jsonl(args.eval_set)), adapter=args.only_adapter, base=args.only_base)
        answers = load_answers(_jsonl(args.answers))
        baseline = load_answers(_jsonl(args.baseline_answers)) if args.baseline_answers else None
        catalog = load_catalog(_jsonl(args.catalog))
    except (EvalSetError, CatalogError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    if drop_gates and baseline is None:
        print(
            f"--baseline-gates {args.baseline_gates}: needs --baseline-answers to judge against",
            file=sys.stderr,
        )
        return 2
    if judge_client is None:
        import boto3
        from botocore.config import Config

        judge_client = boto3.client(
            "bedrock-runtime", region_name=args.region, config=Config(retries={"mode": "standard", "max_attempts": 5})
        )
    result = evaluate(
        rows,
        answers,
        gates,
        scoring=Scoring(judge_client, args.judge_model_id, catalog),
        required_languages=[lang for lang in args.required_languages.split(",") if lang],
        baseline_answers=baseline,
        drop_gates=drop_gates,
        floor=SizeFloor(args.min_rows, args.min_title_rows),
    )
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / REPORT_FILE).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    for line in result["lines"]:
        print(line)
    ungated = sorted(set(METRIC_DIRECTIONS) - set(result["gates"]))
    if ungated:
        print(f"reported without a gate: {', '.join(ungated)}")
    print(f"verdict: {'PASS' if result['passed'] else 'FAIL'} ({result['summary']})")
    return 0 if result["passed"] or args.exit_zero else 1


if __name__ == "__main__":
    sys.exit(main())
