"""docs/architecture.md's picture names exactly the stacks the app synthesizes (issue 40 item 10)."""

import re
from pathlib import Path

from tests.synth_helpers import Synth

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def diagram_stacks() -> set[str]:
    """Units named ``MangaAssist-&lt;stage&gt;-<Unit>`` inside the Mermaid block."""
    block = DOC.read_text().split("```mermaid", 1)[1].split("```", 1)[0]
    return set(re.findall(r"MangaAssist-&lt;stage&gt;-(\w+)", block))


def test_the_diagram_names_every_stack_and_only_those(bedrock_synth: Synth) -> None:
    # The Bedrock synth holds every stack (the import stack is opt-in).
    synthesized = {name.rsplit("-", 1)[1] for name in bedrock_synth.templates}
    assert diagram_stacks() == synthesized
