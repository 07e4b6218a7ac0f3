"""``ops load --turns N`` against the real gateway (scripted engine): conversations run in
stateful sessions the gateway issues, every turn resends the conversation, every session closes."""

from __future__ import annotations

import httpx
import pytest

from ops.cli import Deps, main
from ops.exit_codes import ExitCode
from tests.container.conftest import Serve


def live_sessions(serve: Serve) -> float:
    for line in httpx.get(serve.url + "/metrics", timeout=5).text.splitlines():
        if line.startswith("mangaassist_gateway_live_sessions "):
            return float(line.split()[1])
    raise AssertionError("no mangaassist_gateway_live_sessions on /metrics")


def test_load_with_turns_runs_conversations_in_sessions_and_closes_them(serve: Serve) -> None:
    before = len(serve.engine_state()["requests"])
    lines: list[str] = []
    code = main(
        ["load", "--url", serve.url, "--levels", "2", "--requests-per-level", "6", "--turns", "3", "--mode", "sync"],
        Deps(out=lines.append),
    )
    assert code == ExitCode.OK, lines
    assert "conversations of 3 turns in stateful sessions" in lines[0]
    seen = serve.engine_state()["requests"][before:]
    assert len(seen) == 6  # two conversations of three turns: the request budget
    assert live_sessions(serve) == 0


def test_load_refuses_more_turns_than_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["load", "--url", "http://127.0.0.1:9", "--turns", "17"])
    assert exited.value.code == 2
    assert "argument --turns: 17 is outside 1..16" in capsys.readouterr().err
