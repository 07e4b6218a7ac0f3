"""The README's `make synth` output is what the tool prints on the defaults (issue 40 item 15): a
number a tool prints is quoted from it, and this test fails when the two part (the README said 38
Serving resources long after there were 62)."""

from pathlib import Path

from devtools.synth_summary import summarize
from tests.synth_helpers import Synth

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_summary() -> list[str]:
    """The lines of the README's example output, after its first (the machine's own path)."""
    text = README.read_text()
    block = text[text.index("Templates written to /path/to/repo/cdk.out") :].split("```", 1)[0]
    return [line for line in block.splitlines()[1:] if line.strip()]


def test_the_readme_quotes_what_make_synth_prints(default_synth: Synth) -> None:
    printed = [line for line in summarize(default_synth.outdir).splitlines() if line.strip()]
    shown = readme_summary()
    assert len(shown) >= 10  # the walk found the block
    for line in shown:
        if line.endswith(", ..."):  # a long line the README shortens: what it shows starts a printed line
            assert any(p.startswith(line[: -len(" ...")]) for p in printed), line
        else:
            assert line in printed, line
    # Every stack the synth makes is in the README's table, with its resource count.
    stacks = [p for p in printed if p.startswith("MangaAssist-")]
    assert stacks == [line for line in shown if line.startswith("MangaAssist-")]
