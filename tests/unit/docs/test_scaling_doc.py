"""docs/scaling.md's cost and simulation figures and docs/img/scaling-week.png are what the tools print for
the committed cdk.json (issue 40 item 15): the page showed a dropped off-peak ceiling and costs the
tools no longer printed. Regenerate with ``python -m devtools.scaling_doc``."""

import pytest

from devtools import scaling_doc, weekly_plan


@pytest.fixture(scope="module")
def runs() -> list[scaling_doc.Run]:
    return scaling_doc.runs()


def test_the_scaling_page_quotes_the_tools(runs: list[scaling_doc.Run]) -> None:
    current = scaling_doc.SCALING_DOC.read_text()
    expected = scaling_doc.render(current, weekly_plan.load([]), runs)
    assert current == expected, "stale: run python -m devtools.scaling_doc"


def test_the_week_figure_draws_todays_default_run(runs: list[scaling_doc.Run]) -> None:
    assert scaling_doc.png_digest(scaling_doc.WEEK_PNG) == scaling_doc.run_digest(runs[0]), (
        "docs/img/scaling-week.png is stale: run python -m devtools.scaling_doc"
    )


def test_the_cost_block_is_the_plans_own_figures(runs: list[scaling_doc.Run]) -> None:
    # Not only equal to a render: the numbers in the page are the plan's, formatted as the plan prints them.
    (primary, *_) = weekly_plan.plan(weekly_plan.load([]))
    low, high = primary.monthly_cost_band_usd
    page = scaling_doc.SCALING_DOC.read_text()
    assert (
        f"| {primary.floor_hours_per_week:,.2f} | {primary.ceiling_hours_per_week:,.2f} | ${low:,.2f} .. ${high:,.2f} |"
        in page
    )
    assert f"| abandoned requests | {runs[0].summary.abandoned:,.0f} (" in page


def test_a_changed_figure_is_caught(runs: list[scaling_doc.Run]) -> None:
    # The check can fail: a page with one figure retyped is not what render() gives.
    current = scaling_doc.SCALING_DOC.read_text()
    retyped = current.replace("| peak instances InService | ", "| peak instances InService | 9", 1)
    assert scaling_doc.render(retyped, weekly_plan.load([]), runs) != retyped


def test_the_readme_quotes_the_plans_cost_band() -> None:
    (primary, *_) = weekly_plan.plan(weekly_plan.load([]))
    low, high = primary.monthly_cost_band_usd
    readme = (scaling_doc.REPO / "README.md").read_text()
    assert f"cost band for the primary's schedule is ${low:,.2f} .. ${high:,.2f} a month" in " ".join(readme.split())
