"""devtools/offload_doc.py: the host-offload runs (issue 56) beside the same engine without the host
tier, step by step at the same offered rate, judged by the harness's own rule."""

from __future__ import annotations

import re

from devtools.offload_doc import OFFLOAD_PAIRS, host_hit_share, load, table


def test_each_offload_step_sits_beside_the_step_without_it_at_the_same_offered_rate() -> None:
    rows = [line for line in table().splitlines() if re.match(r"\| \d+ s \|", line)]
    offload_steps = sum(len(load(pair[1]).summaries) for pair in OFFLOAD_PAIRS)
    assert len(rows) == offload_steps
    for bare_name, offload_name, _ in OFFLOAD_PAIRS:
        bare, offload = load(bare_name), load(offload_name)
        rates = {round(s.requests_per_min) for s in bare.summaries}
        for summary in offload.summaries:
            [row] = [r for r in rows if r.startswith(f"| {offload.think_s:g} s | {summary.requests_per_min:,.0f} |")]
            beside = row.split(" | ")[2]
            # A rate both ramps ran shows both; one only the offload ramp ran shows dashes beside it.
            assert (beside.count("-") >= 5) == (round(summary.requests_per_min) not in rates), row


def test_the_host_tier_answered_lookups_in_the_offload_runs_and_none_without_it() -> None:
    for bare_name, offload_name, _ in OFFLOAD_PAIRS:
        assert all(host_hit_share(s) in (None, 0.0) for s in load(bare_name).summaries)
        shares = [host_hit_share(s) for s in load(offload_name).summaries]
        assert all(share is not None and 0 <= share <= 1 for share in shares)
        assert max(s for s in shares if s is not None) > 0.05


def test_each_pair_ends_with_both_verdicts_in_achieved_requests_per_minute() -> None:
    verdicts = [line for line in table().splitlines() if line.startswith("* ")]
    assert len(verdicts) == len(OFFLOAD_PAIRS)
    for line, (bare_name, offload_name, gib) in zip(verdicts, OFFLOAD_PAIRS, strict=True):
        bare, offload = load(bare_name), load(offload_name)
        assert f"without the host tier holds {bare.holds_per_min:,.0f}" in line
        assert f"with {gib} GiB holds {offload.holds_per_min:,.0f}" in line
