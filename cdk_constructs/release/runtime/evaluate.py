"""The evaluate step: score a candidate's answers on the eval set and judge them against the gates.

    python3 -m runtime.evaluate --eval-set eval.jsonl --answers answers.jsonl \\
        --gates '{"bleu": 0.85, ...}' --judge-model-id <bedrock model> --report-dir out/

Writes ``<report-dir>/evaluation.json`` (``quality_gates.REPORT_FILE``)::

    {"passed": false,
     "summary": "FAIL bleu = 0.412 (at least 0.85); FAIL safety: not computed (...) ...",
     "metrics": {"bleu": {"value": 0.412, "threshold": 0.85, "direction": "at_least", "rows": 200,
                          "passed": false, "reason": null}, ...},
     "gates": {"bleu": 0.85, ...}}

prints one line per gate, and exits 1 when a gate fails, unless ``--exit-zero`` (the pipeline's
step, whose condition step reads ``passed`` and whose fail step quotes ``summary``). A metric
without a gate is still reported; a gate whose metric is not computed fails (fails closed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .eval_set import EvalRow, EvalSetError, add_row_filter, load_answers, load_eval_set, rows_for
from .metrics import MetricResult, compute_metrics
from .quality_gates import METRIC_DIRECTIONS, REPORT_FILE, Gate, gates_from


def report(results: dict[str, MetricResult], gates: Sequence[Gate]) -> dict[str, Any]:
    """The report's JSON (module docstring) of computed ``results`` judged against ``gates``."""
    by_metric = {gate.metric: gate for gate in gates}
    metrics: dict[str, Any] = {}
    lines = []
    for metric, result in results.items():
        gate = by_metric.get(metric)
        entry: dict[str, Any] = {"value": result.value, "rows": result.rows, "reason": result.reason}
        if gate is not None:
            entry |= {"threshold": gate.threshold, "direction": gate.direction, "passed": gate.passes(result.value)}
            lines.append(gate.line(result.value, result.reason))
        metrics[metric] = entry
    for gate in gates:
        if gate.metric not in results:  # a gate on a metric nobody computed: fails closed
            metrics[gate.metric] = {"value": None, "rows": 0, "reason": "not computed", "passed": False}
            lines.append(gate.line(None, "not computed"))
    passed = bool(gates) and all(metrics[gate.metric]["passed"] for gate in gates)
    failing = [line for line in lines if line.startswith("FAIL")]
    summary = "; ".join(failing) if failing else f"all {len(gates)} quality gates passed"
    return {
        "passed": passed,
        "summary": summary,
        "lines": lines,
        "metrics": metrics,
        "gates": {gate.metric: gate.threshold for gate in gates},
    }


def evaluate(
    rows: Sequence[EvalRow], answers: dict[str, str], gates: Sequence[Gate], *, judge_client: Any, judge_model_id: str
) -> dict[str, Any]:
    """Compute every metric and judge the gates; the report (module docstring)."""
    return report(compute_metrics(rows, answers, judge_client=judge_client, judge_model_id=judge_model_id), gates)


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
    parser.add_argument("--gates", required=True, help="JSON {metric: threshold}, fractions in [0, 1].")
    parser.add_argument("--judge-model-id", required=True, help="Bedrock model id or inference profile of the judge.")
    parser.add_argument("--region", default=None, help="Bedrock region (default: the SDK's).")
    parser.add_argument("--report-dir", type=Path, required=True)
    add_row_filter(parser)
    parser.add_argument("--exit-zero", action="store_true", help="Exit 0 on a failing gate (the pipeline decides).")
    return parser


def main(argv: Sequence[str] | None = None, *, judge_client: Any = None) -> int:
    args = _parser().parse_args(argv)
    try:
        thresholds = json.loads(args.gates)
        if not isinstance(thresholds, dict):
            raise ValueError(f"--gates = {args.gates!r}: expected a JSON object of metric -> threshold")
        gates = gates_from({str(k): float(v) for k, v in thresholds.items()})
    except (ValueError, TypeError) as error:  # json.JSONDecodeError is a ValueError
        print(f"--gates: {error}", file=sys.stderr)
        return 2
    try:
        rows = rows_for(load_eval_set(_jsonl(args.eval_set)), adapter=args.only_adapter, base=args.only_base)
        answers = load_answers(_jsonl(args.answers))
    except (EvalSetError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    if judge_client is None:
        import boto3
        from botocore.config import Config

        judge_client = boto3.client(
            "bedrock-runtime", region_name=args.region, config=Config(retries={"mode": "standard", "max_attempts": 5})
        )
    result = evaluate(rows, answers, gates, judge_client=judge_client, judge_model_id=args.judge_model_id)
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
