"""The instance start-up time is declared once (serving_contract/env.py, with its measurement files) and every
doc quotes it from there (issue 40 item 15: the README, deploy.md, the plan, the simulator and scaling.md gave
five different figures)."""

import re
from pathlib import Path

import pytest

from planning import cost_plan
from serving_contract.env import start_up_ranges

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MEASUREMENT_LOG = {"performance.md", "config-reference.md"}
"""performance.md is the measurement log the declaration cites (each run's own figure); config-reference.md is
generated from the config's descriptions, which read the declaration."""

FIGURE = re.compile(r"(?<![\w.])~?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:s|min)\b")
START_UP = re.compile(r"\bcold start|start-up is|starts? (?:cold|in)\b|empty compile cache|measured start", re.I)


def start_up_figures() -> list[tuple[str, str]]:
    """``(where, figure)`` for each seconds/minutes figure within a phrase about the instance start-up."""
    found = []
    for path in DOCS:
        if path.name in MEASUREMENT_LOG:
            continue
        text = path.read_text()
        for match in FIGURE.finditer(text):
            before = text[max(0, match.start() - 60) : match.start()]
            after = text[match.end() : match.end() + 15]
            if START_UP.search(before) or START_UP.search(after):
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{path.relative_to(REPO)}:{line}", match.group()))
    return found


def test_the_walk_finds_the_figures() -> None:
    # README, deploy.md, inference-components.md, model-release.md and scaling.md state the start-up.
    assert len({where.split(":")[0] for where, _ in start_up_figures()}) >= 5


@pytest.mark.parametrize(("where", "figure"), start_up_figures(), ids=str)
def test_each_start_up_figure_is_the_declared_one(where: str, figure: str) -> None:
    assert figure in start_up_ranges(), f"{where}: {figure}; the measured start-up is {start_up_ranges()}"


def test_the_plan_prints_the_declared_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_plan.main([]) == 0
    cold, cached = start_up_ranges()
    assert f"Measured start-up: {cold} cold, {cached} from the compile cache" in capsys.readouterr().out
