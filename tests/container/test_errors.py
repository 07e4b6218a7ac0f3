"""Every error answer can be written, whatever text a caller sent (issue 49, finding 1)."""

from __future__ import annotations

import json

import pytest

from serving_app.errors import caller_text, error_body, error_response, printable, sse_error

HOSTILE = ["\ud800", "a\udfffb", "\x00\x1b[31m", "x" * 10_000, "\U0001f600 ok", "名前"]


@pytest.mark.parametrize("text", HOSTILE)
def test_error_response_is_utf8_json_for_any_message(text: str) -> None:
    response = error_response(400, f"bad value {text}")
    body = json.loads(bytes(response.body).decode("utf-8"))
    assert body["error"]["code"] == 400 and body["error"]["type"] == "BadRequest"
    assert body["error"]["message"].startswith("bad value ")
    event = sse_error(text, 502)
    assert event.endswith(b"\n\ndata: [DONE]\n\n")
    json.loads(event.decode("utf-8").split("\n\n")[0].removeprefix("data: "))


def test_printable_escapes_only_what_utf8_cannot_carry() -> None:
    assert printable("名前 \U0001f600") == "名前 \U0001f600"  # valid text is left alone
    assert printable("a\ud800b") == "a\\ud800b"
    assert error_body(413, "k\udc80")["error"]["message"] == "k\\udc80"


def test_caller_text_quotes_escapes_and_bounds() -> None:
    assert caller_text("\ud800") == "'\\ud800'"
    assert caller_text("a\nb") == "'a\\nb'"
    assert caller_text("名前") == "'名前'"  # printable Unicode stays readable
    assert caller_text("x" * 500) == "'" + "x" * 99 + "..."
    assert caller_text("abcdef", 4) == "'abc..."
    caller_text({"\ud800": ["\udfff"]}).encode("utf-8")
