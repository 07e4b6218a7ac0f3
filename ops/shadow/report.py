"""``shadow report``: the seed's comparison of the shadow with the primary, and whether the shadow may become the
canary (seed 002 scenario 6, migration phase 2: "Compared latency, output quality, guardrail pass rate";
"Shadow comparison jobs ran offline, scoring: response length distribution, guardrail pass rate, latency
percentiles").

What it reads, over the last ``--hours``:

- CloudWatch (GetMetricData): each variant's TTFT p50 and p95 per request class (the container's
  ``TimeToFirstToken``, dimension ``RequestClass``), its ``Invocations`` and ``Invocation5XXErrors``
  (``AWS/SageMaker``);
- the captured answers (capture.py): the shadow's newest ``--max-answers`` and the primary's answers to the
  same requests, paired by ``inferenceId``: their length (characters) and the share that pass the release's
  guardrail checks: an answer was given, and it names no title the release's catalog lacks
  (cdk_constructs/release/runtime/titles.py, the release's invented-titles check); and how many of each
  variant's answers were streamed and how many of the shadow's were ``session not found`` (docs/operations.md,
  "What SageMaker copies to a shadow");
- DescribeEndpoint: the weights, for the share of requests the shadow gets a copy of.

The shadow passes when each class's TTFT p95 is within ``slo.<class>.ttft_p95_ms``, its 5xx rate within
``slo.max_error_rate``, it has ``serving.shadow.min_captured_answers`` paired answers, and its guardrail pass
share is no more than ``serving.shadow.guardrail_share_tolerance`` below the primary's. The answers' length is
reported for a reviewer, not gated: the seeds set no bound on it. A figure that AWS could not give fails its
check; one that was not asked for (offline on a capture folder: no CloudWatch, no DescribeEndpoint, no Bedrock
judge; no ``--catalog``) is NOT COMPUTED, and a report with no failure but such a check exits 11.
"""

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from app_config.root import AppConfig
from app_config.serving import ServingConfig
from cdk_constructs.release.runtime.judge import JudgeError
from cdk_constructs.release.runtime.titles import Catalog, invented_titles
from cli_support.percentiles import percentile
from ops.exit_codes import ExitCode
from ops.shadow.capture import CapturedAnswer, Paired
from serving_contract.metrics import SAGEMAKER_NAMESPACE, Dimension, RequestMetric, SageMakerMetric
from serving_contract.request_classes import RequestClass

STATS: Final = ("p50", "p95")
PASS, FAIL, NOT_COMPUTED = "PASS", "FAIL", "NOT COMPUTED"


@dataclass(frozen=True)
class ReportInputs:
    """Where the figures come from: the endpoint, its two variants and the window."""

    endpoint: str
    primary: str
    shadow: str
    window: tuple[dt.datetime, dt.datetime]
    namespace: str


@dataclass
class VariantFigures:
    """One variant's figures (None: not available)."""

    ttft_ms: dict[tuple[str, str], float | None] = field(default_factory=dict)  # (class, stat) -> ms
    invocations: float | None = None
    errors_5xx: float | None = None
    answers: list[CapturedAnswer] = field(default_factory=list)
    guardrail_passed: int | None = None
    guardrail_problem: str | None = None
    guardrail_skipped: str | None = None  # why the check was not run (offline, no catalog)

    @property
    def error_rate(self) -> float | None:
        if not self.invocations or self.errors_5xx is None:
            return None
        return self.errors_5xx / self.invocations

    @property
    def pass_share(self) -> float | None:
        if self.guardrail_passed is None or not self.answers:
            return None
        return self.guardrail_passed / len(self.answers)

    def length(self, q: int) -> float | None:
        return percentile([float(len(a.text)) for a in self.answers if a.text], q)


def _query_id(variant_index: int, name: str) -> str:
    return f"v{variant_index}_{name}"


def metric_queries(inputs: ReportInputs) -> list[dict[str, Any]]:
    """GetMetricData queries: per variant, TTFT p50/p95 per class, Invocations and 5xx (one period: the window)."""
    period = int((inputs.window[1] - inputs.window[0]).total_seconds())
    queries = []
    for i, variant in enumerate((inputs.primary, inputs.shadow)):
        base = [
            {"Name": Dimension.ENDPOINT.value, "Value": inputs.endpoint},
            {"Name": Dimension.VARIANT.value, "Value": variant},
        ]
        for klass in RequestClass:
            for stat in STATS:
                dimensions = [*base, {"Name": Dimension.REQUEST_CLASS.value, "Value": klass.value}]
                metric = {"Namespace": inputs.namespace, "MetricName": RequestMetric.TIME_TO_FIRST_TOKEN.value}
                queries.append(
                    {
                        "Id": _query_id(i, f"ttft_{klass.value}_{stat}"),
                        "MetricStat": {"Metric": {**metric, "Dimensions": dimensions}, "Period": period, "Stat": stat},
                    }
                )
        for name, metric_name in (
            ("invocations", SageMakerMetric.INVOCATIONS),
            ("errors", SageMakerMetric.INVOCATION_5XX_ERRORS),
        ):
            invocation: dict[str, Any] = {
                "Namespace": SAGEMAKER_NAMESPACE,
                "MetricName": metric_name.value,
                "Dimensions": base,
            }
            queries.append(
                {"Id": _query_id(i, name), "MetricStat": {"Metric": invocation, "Period": period, "Stat": "Sum"}}
            )
    return queries


def read_metrics(cloudwatch: Any, inputs: ReportInputs) -> tuple[VariantFigures, VariantFigures]:
    """The two variants' CloudWatch figures (module docstring). A percentile over several datapoints takes the
    worst; a count their sum; no datapoint leaves the figure None."""
    values: dict[str, list[float]] = {}
    for page in cloudwatch.get_paginator("get_metric_data").paginate(
        MetricDataQueries=metric_queries(inputs), StartTime=inputs.window[0], EndTime=inputs.window[1]
    ):
        for result in page["MetricDataResults"]:
            values.setdefault(result["Id"], []).extend(result.get("Values", []))
    figures = (VariantFigures(), VariantFigures())
    for i, figure in enumerate(figures):
        for klass in RequestClass:
            for stat in STATS:
                found = values.get(_query_id(i, f"ttft_{klass.value}_{stat}"))
                figure.ttft_ms[(klass.value, stat)] = max(found) if found else None
        for name in ("invocations", "errors"):
            found = values.get(_query_id(i, name))
            total = sum(found) if found else None
            if name == "invocations":
                figure.invocations = total
            else:
                figure.errors_5xx = total if total is not None else (0.0 if figure.invocations else None)
    return figures


def check_guardrails(figure: VariantFigures, judge: Any, judge_model_id: str, catalog: Catalog) -> None:
    """Count the variant's answers that pass the release's guardrail checks: an answer, and no invented title."""
    passed = 0
    for answer in figure.answers:
        if answer.problem or not answer.text.strip():
            continue
        try:
            invented = invented_titles(judge, judge_model_id, catalog, answer.text)
        except JudgeError as error:
            figure.guardrail_problem = f"event {answer.event_id}: {error}"
            return
        passed += not invented
    figure.guardrail_passed = passed


@dataclass(frozen=True)
class Verdict:
    """One check of the shadow: its status (PASS, FAIL, NOT COMPUTED) and its line."""

    status: str
    line: str

    @property
    def passed(self) -> bool:
        return self.status == PASS

    @classmethod
    def of(cls, passed: bool, line: str) -> "Verdict":
        return cls(PASS if passed else FAIL, line)


OFFLINE_CLOUDWATCH = "offline: CloudWatch's figures need an AWS region and credentials"


def verdicts(
    config: AppConfig, primary: VariantFigures, shadow: VariantFigures, *, offline: bool = False
) -> list[Verdict]:
    """The checks a shadow must pass to become the canary (module docstring), one line each; ``offline``: the
    CloudWatch checks are NOT COMPUTED."""
    found: list[Verdict] = []
    for klass in RequestClass:
        slo = config.slo.of(klass).ttft_p95_ms
        value = shadow.ttft_ms.get((klass.value, "p95"))
        if offline:
            found.append(Verdict(NOT_COMPUTED, f"NOT COMPUTED shadow TTFT p95 {klass.value}: {OFFLINE_CLOUDWATCH}"))
        elif value is None:
            line = (
                f"FAIL shadow TTFT p95 {klass.value}: no datapoint (no streamed {klass.value} request in the window); "
                f"a check fails closed (at most {slo:g} ms)"
            )
            found.append(Verdict(FAIL, line))
        else:
            ok = value <= slo
            line = (
                f"{'PASS' if ok else 'FAIL'} shadow TTFT p95 {klass.value} = {value:.0f} ms (at most {slo:g} ms, "
                f"slo.{klass.value}.ttft_p95_ms)"
            )
            found.append(Verdict.of(ok, line))
    found.append(_error_verdict(config, shadow, offline=offline))
    needed = config.serving.shadow.min_captured_answers
    count = len(shadow.answers)
    found.append(
        Verdict.of(
            count >= needed,
            f"{'PASS' if count >= needed else 'FAIL'} shadow paired answers = "
            f"{count} (at least {needed}, serving.shadow.min_captured_answers)",
        )
    )
    found.append(_guardrail_verdict(config.serving, primary, shadow))
    return found


def _error_verdict(config: AppConfig, shadow: VariantFigures, *, offline: bool) -> Verdict:
    rate, limit = shadow.error_rate, config.slo.max_error_rate
    if offline:
        return Verdict(NOT_COMPUTED, f"NOT COMPUTED shadow 5xx rate: {OFFLINE_CLOUDWATCH}")
    if rate is None:
        return Verdict(FAIL, f"FAIL shadow 5xx rate: no invocations in the window (at most {limit * 100:g} %)")
    ok = rate <= limit
    return Verdict.of(
        ok,
        f"{'PASS' if ok else 'FAIL'} shadow 5xx rate = {rate * 100:.2f} % (at most "
        f"{limit * 100:g} %, slo.max_error_rate)",
    )


def _guardrail_verdict(serving: ServingConfig, primary: VariantFigures, shadow: VariantFigures) -> Verdict:
    tolerance = serving.shadow.guardrail_share_tolerance
    ours, theirs = shadow.pass_share, primary.pass_share
    skipped = shadow.guardrail_skipped or primary.guardrail_skipped
    if skipped:
        return Verdict(NOT_COMPUTED, f"NOT COMPUTED guardrail pass share: {skipped}")
    if ours is None or theirs is None:
        why = shadow.guardrail_problem or primary.guardrail_problem or "no captured answers"
        return Verdict(FAIL, f"FAIL guardrail pass share: not computed ({why}); a check fails closed")
    floor = theirs - tolerance
    ok = ours >= floor
    return Verdict.of(
        ok,
        f"{'PASS' if ok else 'FAIL'} shadow guardrail pass share = {ours * 100:.1f} % (at least the "
        f"primary's {theirs * 100:.1f} % - {tolerance * 100:g} points, "
        "serving.shadow.guardrail_share_tolerance)",
    )


def _cell(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.0f}{unit}"


def table(primary: VariantFigures, shadow: VariantFigures, names: tuple[str, str]) -> list[str]:
    """The comparison, one row per figure, the primary's column then the shadow's."""
    rows: list[tuple[str, str, str]] = []
    for klass in RequestClass:
        for stat in STATS:
            key = (klass.value, stat)
            label = f"TTFT {stat} {klass.value} (ms)"
            rows.append((label, _cell(primary.ttft_ms.get(key)), _cell(shadow.ttft_ms.get(key))))
    rows.append(("invocations", _cell(primary.invocations), _cell(shadow.invocations)))
    rows.append(
        (
            "5xx errors",
            f"{_cell(primary.errors_5xx)} ({_percent(primary.error_rate, 2)})",
            f"{_cell(shadow.errors_5xx)} ({_percent(shadow.error_rate, 2)})",
        )
    )
    rows.append(("paired answers", str(len(primary.answers)), str(len(shadow.answers))))
    for q in (10, 50, 90):
        rows.append((f"answer length p{q} (chars)", _cell(primary.length(q)), _cell(shadow.length(q))))
    rows.append(("guardrail pass share", _share(primary), _share(shadow)))
    width = max(len(row[0]) for row in rows)
    header = f"{'':{width}}  {names[0]:>16}  {names[1]:>16}"
    return [header, *(f"{label:{width}}  {a:>16}  {b:>16}" for label, a, b in rows)]


def _percent(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f} %"


def _share(figure: VariantFigures) -> str:
    if figure.pass_share is None:
        return "-"
    return f"{_percent(figure.pass_share)} ({figure.guardrail_passed}/{len(figure.answers)})"


def sampling_line(sagemaker: Any, endpoint: str) -> str:
    """The share of requests the shadow gets a copy of, from the endpoint's current weights."""
    described = sagemaker.describe_endpoint(EndpointName=endpoint)
    primary = (described.get("ProductionVariants") or [{}])[0]
    shadows = described.get("ShadowProductionVariants") or []
    if not shadows:
        return f"sampling: endpoint {endpoint} has no shadow variant (DescribeEndpoint)"
    shadow = shadows[0]
    weights = (primary.get("CurrentWeight"), shadow.get("CurrentWeight"))
    if not weights[0] or weights[1] is None:
        return f"sampling: weights not reported yet (primary {weights[0]}, shadow {weights[1]})"
    share = weights[1] / weights[0] * 100
    return (
        f"sampling: the shadow gets a copy of {share:.1f} % of requests (DescribeEndpoint weights: "
        f"{primary.get('VariantName')} {weights[0]:g}, {shadow.get('VariantName')} {weights[1]:g})"
    )


def pairing_lines(paired: Paired) -> list[str]:
    """What the pairing found: pairs, shadow records that could not pair and why, streamed answers per variant
    (whether SageMaker copied streamed calls to the shadow), and the shadow's ``session not found`` answers
    (follow-up turns of sessions it never opened)."""
    streamed = [sum(1 for pair in paired.pairs if pair[index].streamed) for index in (0, 1)]
    unknown = sum(1 for answer in paired.shadow_read if answer.session_unknown)
    return [
        f"pairing by inferenceId: {len(paired.pairs)} of the shadow's {len(paired.shadow_read)} newest answers paired; "
        f"{paired.without_id} without an inferenceId (their caller set none), {paired.unmatched} with no primary "
        "answer in the window",
        f"streamed answers among the pairs: primary {streamed[0]}, shadow {streamed[1]}; shadow answers 'session not "
        f"found' (a turn of a session it never opened): {unknown}",
    ]


def print_report(
    inputs: ReportInputs,
    figures: tuple[VariantFigures, VariantFigures],
    results: Sequence[Verdict],
    *,
    sampling: str,
    pairing: Sequence[str],
    out: Callable[[str], None],
) -> ExitCode:
    """Print the report; OK when every check passed, CHECK_FAILED when one failed, else INCOMPLETE."""
    start, end = (moment.strftime("%Y-%m-%d %H:%M") for moment in inputs.window)
    hours = (inputs.window[1] - inputs.window[0]).total_seconds() / 3600
    out(f"shadow report {inputs.endpoint}: {inputs.primary} vs {inputs.shadow}, {start} .. {end} UTC ({hours:g} h)")
    out(sampling)
    for line in [*pairing, *table(*figures, names=(inputs.primary, inputs.shadow))]:
        out(line)
    for result in results:
        out(result.line)
    failing = sum(result.status == FAIL for result in results)
    missing = sum(result.status == NOT_COMPUTED for result in results)
    if failing:
        out(f"verdict: FAIL ({failing} of {len(results)} checks failed)")
        return ExitCode.CHECK_FAILED
    if missing:
        out(f"verdict: INCOMPLETE (no check failed, {missing} not computed; exit 11)")
        return ExitCode.INCOMPLETE
    out("verdict: PASS (the shadow may become the canary: mangaassist-ops shadow promote)")
    return ExitCode.OK
