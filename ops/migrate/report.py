"""``ops migrate report``: every metric of the stored pairs, over all pairs and per adapter and language, and a
verdict against ``migration.gates`` (docs/migration.md, "The report").

Per group: the pairs; the endpoint's error rate (its side failed: a copy that timed out or a call it could not
answer); the answers' length in characters (p50 of each side) and the two-sample KS statistic D with its
p-value; latency p50/p95/p99 of both sides over the calls both answered, and TTFT p50/p95 of the streamed ones;
the guardrail pass share of each side and the median semantic similarity, both from the scores stored beside
the pairs (``ops migrate score``); over all pairs, the human preference read back from the labelled samples.

Gates (judged per group with at least ``migration.gates.min_pairs`` pairs; a smaller group is printed, not
judged; too few pairs over all leaves the verdict incomplete):

* error rate at most ``slo.max_error_rate``;
* length KS D at most ``length_ks_max``;
* TTFT p95 at most ``ttft_p95_ms`` (when streamed calls were copied; otherwise not applicable);
* latency p95 ratio endpoint / Bedrock at most ``latency_p95_max_ratio``;
* guardrail pass share at least Bedrock's minus ``guardrail_share_tolerance``;
* median similarity at least ``similarity_min_median``;
* over all pairs: the endpoint preferred or tied in at least ``preference_min_share`` of ``min_labels`` or more
  labelled pairs.

Exit 0: every gate held; 1: a gate failed; 11: none failed but some were not computed (a score not stored: the
report says in one line what it needs); 12: no pairs.
"""

import datetime as dt
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app_config.root import AppConfig
from cli_support.percentiles import percentile
from ops.exit_codes import ExitCode
from ops.migrate.human import Preferences
from ops.migrate.scoring import ROLES, Score, binomial_p, ks_2samp
from ops.migrate.store import PairRow

PASS, FAIL, NOT_COMPUTED, NOT_APPLICABLE = "PASS", "FAIL", "NOT COMPUTED", "N/A"


@dataclass(frozen=True)
class Gate:
    """One gate's outcome and its line."""

    status: str
    group: str
    name: str
    line: str


@dataclass
class Figures:
    """One group's metrics (module docstring); None: nothing to compute it from."""

    name: str
    pairs: int
    endpoint_errors: int
    both: int
    length_p50: dict[str, float | None]
    ks: tuple[float, float] | None
    latency: dict[str, dict[int, float | None]]
    ttft: dict[str, dict[int, float | None]]
    streamed: int
    guardrail: dict[str, tuple[int, int]]  # role -> (passed, judged)
    similarity: list[float] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        return self.endpoint_errors / self.pairs if self.pairs else 0.0

    def share(self, role: str) -> float | None:
        passed, judged = self.guardrail[role]
        return passed / judged if judged else None


def _times(rows: Sequence[PairRow], role: str, attribute: str, qs: tuple[int, ...]) -> dict[int, float | None]:
    values = [getattr(getattr(row, role), attribute) for row in rows]
    present = [float(v) for v in values if v is not None]
    return {q: percentile(present, q) for q in qs}


def figures(name: str, rows: Sequence[PairRow], scores: dict[str, Score]) -> Figures:
    """The :class:`Figures` of ``rows``."""
    both = [row for row in rows if row.endpoint.answered and row.bedrock.answered]
    lengths = {role: [float(len(getattr(row, role).text)) for row in both] for role in ROLES}
    streamed = [row for row in both if row.stream]
    guardrail: dict[str, tuple[int, int]] = {}
    for role in ROLES:
        verdicts = [scores[row.request_id].guardrail.get(role) for row in both if row.request_id in scores]
        judged = [v for v in verdicts if v is not None]
        guardrail[role] = (sum(judged), len(judged))
    similarity = [s.similarity for row in both if (s := scores.get(row.request_id)) and s.similarity is not None]
    return Figures(
        name=name,
        pairs=len(rows),
        endpoint_errors=sum(1 for row in rows if row.endpoint.error is not None),
        both=len(both),
        length_p50={role: percentile(lengths[role], 50) for role in ROLES},
        ks=ks_2samp(lengths["endpoint"], lengths["bedrock"]),
        latency={role: _times(both, role, "latency_ms", (50, 95, 99)) for role in ROLES},
        ttft={role: _times(streamed, role, "ttft_ms", (50, 95)) for role in ROLES},
        streamed=len(streamed),
        guardrail=guardrail,
        similarity=similarity,
    )


def _gate(passed: bool, group: str, name: str, text: str) -> Gate:
    return Gate(PASS if passed else FAIL, group, name, f"{PASS if passed else FAIL} {group}: {text}")


def _missing(group: str, name: str, what: str, why: str) -> Gate:
    return Gate(NOT_COMPUTED, group, name, f"{NOT_COMPUTED} {group}: {what}: {why}")


def _scored_gates(f: Figures, config: AppConfig, needed: int) -> list[Gate]:
    gates = config.migration.gates
    found = []
    judged = min(f.guardrail[role][1] for role in ROLES)
    ours, theirs = f.share("endpoint"), f.share("bedrock")
    if judged < needed or ours is None or theirs is None:
        found.append(_missing(f.name, "guardrail", "guardrail pass share", _unscored(judged, f.both, needed)))
    else:
        floor = theirs - gates.guardrail_share_tolerance
        found.append(
            _gate(
                ours >= floor,
                f.name,
                "guardrail",
                f"endpoint guardrail pass share = {ours:.1%} (at "
                f"least Bedrock's {theirs:.1%} - {gates.guardrail_share_tolerance * 100:g} points, "
                "migration.gates.guardrail_share_tolerance)",
            )
        )
    if len(f.similarity) < needed:
        found.append(
            _missing(f.name, "similarity", "semantic similarity", _unscored(len(f.similarity), f.both, needed))
        )
    else:
        median = statistics.median(f.similarity)
        bound = gates.similarity_min_median
        found.append(
            _gate(
                median >= bound,
                f.name,
                "similarity",
                f"median semantic similarity = {median:.3f} "
                f"(at least {bound:g}, migration.gates.similarity_min_median)",
            )
        )
    return found


def _unscored(scored: int, of: int, needed: int) -> str:
    return (
        f"{scored} of {of} answered pairs scored, at least {needed} needed; scoring needs Bedrock: run "
        "`python -m ops migrate score --from <store> --region <region>` (it stores the scores beside the pairs)"
    )


def group_gates(f: Figures, config: AppConfig) -> list[Gate]:
    """The gates of one group (module docstring)."""
    gates, needed = config.migration.gates, config.migration.gates.min_pairs
    if f.pairs < needed:
        if f.name != "all":
            return [
                Gate(
                    NOT_APPLICABLE,
                    f.name,
                    "pairs",
                    f"NOT JUDGED {f.name}: {f.pairs} pairs (at least {needed}, migration.gates.min_pairs)",
                )
            ]
        return [_missing(f.name, "pairs", "pairs", f"{f.pairs} (at least {needed}, migration.gates.min_pairs)")]
    limit = config.slo.max_error_rate
    found = [
        _gate(
            f.error_rate <= limit,
            f.name,
            "errors",
            f"endpoint error rate = {f.error_rate:.2%} (at most {limit:.2%}, slo.max_error_rate)",
        )
    ]
    if f.ks is None:
        found.append(_missing(f.name, "length", "answer length KS D", "fewer than 2 answered pairs"))
    else:
        d, p = f.ks
        found.append(
            _gate(
                d <= gates.length_ks_max,
                f.name,
                "length",
                f"answer length KS D = {d:.3f} (at most "
                f"{gates.length_ks_max:g}, migration.gates.length_ks_max; p = {p:.3g})",
            )
        )
    ttft = f.ttft["endpoint"][95]
    if ttft is None:
        found.append(Gate(NOT_APPLICABLE, f.name, "ttft", f"N/A {f.name}: TTFT p95: no streamed call was copied"))
    else:
        found.append(
            _gate(
                ttft <= gates.ttft_p95_ms,
                f.name,
                "ttft",
                f"endpoint TTFT p95 = {ttft:,.0f} ms (at most {gates.ttft_p95_ms:g} ms, migration.gates.ttft_p95_ms)",
            )
        )
    ours, theirs = f.latency["endpoint"][95], f.latency["bedrock"][95]
    if ours is None or not theirs:
        found.append(_missing(f.name, "latency", "latency p95 ratio", "no call both sides answered with a latency"))
    else:
        ratio, bound = ours / theirs, gates.latency_p95_max_ratio
        found.append(
            _gate(
                ratio <= bound,
                f.name,
                "latency",
                f"latency p95 endpoint / Bedrock = {ratio:.2f} "
                f"({ours:,.0f} / {theirs:,.0f} ms; at most {bound:g}, migration.gates.latency_p95_max_ratio)",
            )
        )
    return found + _scored_gates(f, config, needed)


def preference_gate(preferences: Preferences, config: AppConfig) -> Gate:
    """The human-preference gate over every labelled pair."""
    gates = config.migration.gates
    labelled = preferences.labelled
    if labelled < gates.min_labels:
        why = (
            f"{labelled} labelled pairs (at least {gates.min_labels}, migration.gates.min_labels); export a sample "
            "with `python -m ops migrate sample` and put the raters' labels.jsonl beside it"
        )
        return _missing("all", "preference", "human preference", why)
    won, lost, tied = (preferences.counts[k] for k in ("endpoint", "bedrock", "tie"))
    share = (won + tied) / labelled
    p = binomial_p(won, won + lost)
    p_text = "-" if p is None else f"{p:.3g}"
    return _gate(
        share >= gates.preference_min_share,
        "all",
        "preference",
        f"endpoint preferred or tied in "
        f"{share:.1%} of {labelled} labelled pairs (won {won}, lost {lost}, tied {tied}; at least "
        f"{gates.preference_min_share:.0%}, migration.gates.preference_min_share; binomial p = {p_text})",
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _pair(first: str, second: str) -> str:
    return f"{first}/{second}"


def tables(groups: Sequence[Figures]) -> list[str]:
    """Two tables, one row per group: the answers (errors, length, KS, guardrail, similarity) and the latencies
    (``endpoint/bedrock``, ms)."""
    width = max(len(f.name) for f in groups)
    head = (
        f"{'group':{width}}  {'pairs':>6}  {'errors':>7}  {'length p50 E/B':>15}  {'KS D (p)':>14}  "
        f"{'guardrail E/B':>15}  {'similarity p50':>14}"
    )
    lines = ["answers (E: endpoint, B: Bedrock; lengths in characters)", head]
    for f in groups:
        shares = [f.share(role) for role in ROLES]
        guard = "-" if None in shares else _pair(*(f"{s * 100:.1f}" for s in shares if s is not None)) + " %"
        similarity = f"{statistics.median(f.similarity):.3f}" if f.similarity else "-"
        ks = "-" if f.ks is None else f"{f.ks[0]:.3f} ({f.ks[1]:.2g})"
        lengths = _pair(*(_ms(f.length_p50[role]) for role in ROLES))
        lines.append(
            f"{f.name:{width}}  {f.pairs:>6}  {f.error_rate:>7.2%}  {lengths:>15}  {ks:>14}  "
            f"{guard:>15}  {similarity:>14}"
        )
    lines += ["", "latency, ms (E/B, calls both answered; TTFT: streamed calls only)"]
    lines.append(
        f"{'group':{width}}  {'p50':>13}  {'p95':>13}  {'p99':>13}  {'TTFT p50':>13}  {'TTFT p95':>13}  {'streamed':>8}"
    )
    for f in groups:
        cells = [_pair(_ms(f.latency["endpoint"][q]), _ms(f.latency["bedrock"][q])) for q in (50, 95, 99)]
        cells += [_pair(_ms(f.ttft["endpoint"][q]), _ms(f.ttft["bedrock"][q])) for q in (50, 95)]
        lines.append(f"{f.name:{width}}  " + "  ".join(f"{c:>13}" for c in cells) + f"  {f.streamed:>8}")
    return lines


@dataclass
class Report:
    """The report's figures, gates and verdict."""

    groups: list[Figures]
    gates: list[Gate]
    preferences: Preferences

    @property
    def verdict(self) -> str:
        statuses = {gate.status for gate in self.gates}
        if FAIL in statuses:
            return "fail"
        return "incomplete" if NOT_COMPUTED in statuses else "pass"

    @property
    def exit_code(self) -> ExitCode:
        return {"pass": ExitCode.OK, "fail": ExitCode.CHECK_FAILED, "incomplete": ExitCode.INCOMPLETE}[self.verdict]

    def record(self, *, source: str, at: dt.datetime) -> dict[str, Any]:
        """``reports/latest.json``: what the ramp's state machine reads (serving_contract/migration.py)."""
        return {
            "at": at.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "source": source,
            "verdict": self.verdict,
            "pairs": self.groups[0].pairs,
            "gates": [{"group": g.group, "name": g.name, "status": g.status, "line": g.line} for g in self.gates],
        }


def build_report(
    rows: Sequence[PairRow], scores: dict[str, Score], preferences: Preferences, config: AppConfig
) -> Report:
    """Figures and gates over all pairs, then per adapter and language (sorted)."""
    keyed: dict[str, list[PairRow]] = {}
    for row in rows:
        keyed.setdefault(f"{row.adapter}/{row.language}", []).append(row)
    groups = [figures("all", rows, scores)] + [figures(name, keyed[name], scores) for name in sorted(keyed)]
    gates = [gate for group in groups for gate in group_gates(group, config)]
    gates.append(preference_gate(preferences, config))
    return Report(groups, gates, preferences)


def print_report(report: Report, *, header: Sequence[str], out: Callable[[str], None]) -> None:
    """Header lines, both tables, the preference counts, each gate's line, the verdict."""
    for line in [*header, "", *tables(report.groups), ""]:
        out(line)
    counts = report.preferences.counts
    samples = ", ".join(report.preferences.samples) or "none"
    out(
        f"human preference (samples: {samples}): endpoint {counts['endpoint']}, Bedrock {counts['bedrock']}, "
        f"tie {counts['tie']}"
    )
    out("")
    for gate in report.gates:
        out(gate.line)
    failed = sum(1 for g in report.gates if g.status == FAIL)
    missing = sum(1 for g in report.gates if g.status == NOT_COMPUTED)
    verdict = {
        "pass": "PASS: every gate holds (exit 0)",
        "fail": f"FAIL: {failed} gate(s) failed (exit 1)",
        "incomplete": f"INCOMPLETE: no gate failed, {missing} not computed (exit 11)",
    }[report.verdict]
    out(f"verdict: {verdict}")


def report_json(report: Report, *, source: str, at: dt.datetime) -> bytes:
    """The published report (``reports/latest.json``), UTF-8 JSON."""
    return json.dumps(report.record(source=source, at=at), ensure_ascii=False, indent=1).encode()
