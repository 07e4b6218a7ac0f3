"""benchmarks/local_gateway.wait_for_line: a log line that arrives after the caller starts
looking is found; one that never arrives fails with the fragments and the last lines."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from local_gateway import wait_for_line


def test_a_line_that_trails_the_caller_is_waited_for() -> None:
    lines = ["startup: engine healthy after 3.1 s"]
    threading.Timer(0.3, lines.append, args=["drain: all requests finished in 0.02 s"]).start()
    assert wait_for_line(lines, "drain:", "all requests finished", timeout_s=5) == (
        "drain: all requests finished in 0.02 s"
    )


def test_a_missing_line_fails_naming_the_fragments_and_the_last_lines() -> None:
    lines = ["drain: SIGTERM, 2 request(s) in flight"]
    with pytest.raises(AssertionError) as raised:
        wait_for_line(lines, "drain:", "all requests finished", timeout_s=0.2)
    assert str(raised.value) == (
        "no log line with ('drain:', 'all requests finished') in 0.2 s; "
        "last: ['drain: SIGTERM, 2 request(s) in flight']"
    )
