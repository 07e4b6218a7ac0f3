"""Every ``-c key=value`` the README and docs show inline is an override the config accepts (issue 40):
a documented command that fails is a bug in the docs or the loader, found here rather than by a reader."""

import re
import shlex
from pathlib import Path

import pytest

from app_config import load_config
from tests.synth_helpers import cdk_json_context

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|\||^key=value$")
"""Spans that stand for a value rather than give one: ``<type>``, ``...``, ``dev|prod``, ``key=value``."""


def documented_overrides() -> list[tuple[str, list[str]]]:
    """``(where, [key=value, ...])`` for each inline code span that passes ``-c`` overrides."""
    found = []
    for path in DOCS:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for span in re.findall(r"`([^`]*-c [^`]*)`", line):
                words = shlex.split(span.replace('ARGS="', "").rstrip('"'))
                overrides = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "-c"]
                if overrides and not any(PLACEHOLDER.search(o) for o in overrides):
                    found.append((f"{path.relative_to(REPO)}:{number}", overrides))
    return found


def test_the_docs_show_overrides() -> None:
    # An empty walk proves nothing: the README's configuration section alone shows several.
    assert len(documented_overrides()) >= 8


@pytest.mark.parametrize(("where", "overrides"), documented_overrides(), ids=str)
def test_each_documented_override_loads(where: str, overrides: list[str]) -> None:
    context = cdk_json_context()
    for override in overrides:
        key, value = override.split("=", 1)
        context[key] = value
    load_config(context)
