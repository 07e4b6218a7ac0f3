"""Hypothesis: nothing a client sends to /invocations yields a 5xx or kills the process."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.container.conftest import ADAPTERS, Serve

CLIENT = httpx.Client(timeout=10)  # one pool: a new client per example costs ~30 ms

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
models = st.sampled_from(["base", *ADAPTERS, "", "nope", "../etc"]) | st.text(max_size=12)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant", "x"]) | json_scalars},
        optional={"content": st.text(max_size=20) | json_values},
    ),
    max_size=3,
)
shaped = st.fixed_dictionaries(
    {},
    optional={
        "messages": messages | json_values,
        "prompt": st.text(max_size=20) | st.lists(st.integers(-5, 2**40), max_size=3) | json_values,
        "model": models | json_scalars,
        "stream": st.booleans() | json_scalars,
        "max_tokens": st.integers(-3, 3000) | json_scalars,
        "stream_options": st.none()
        | st.dictionaries(st.sampled_from(["include_usage", "x"]), json_scalars, max_size=2),
        "temperature": json_scalars,
    },
)
bodies = st.one_of(
    shaped.map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.just(b"[" * 5000 + b"]" * 5000),
)
# h11 (the client) refuses values with surrounding whitespace; no HTTP client can send them.
header_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(str.strip)
headers = st.fixed_dictionaries(
    {},
    optional={
        "content-type": st.sampled_from(
            [
                "application/json",
                "text/plain",
                "application/x+json",
                "application/json; charset=utf-8",
                "",
            ]
        )
        | header_text,
        "x-amzn-sagemaker-custom-attributes": st.sampled_from(
            [f"adapter={a}" for a in ADAPTERS] + ["adapter=", "adapter=zzz", "a=b;adapter=base"]
        )
        | header_text,
    },
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies, request_headers=headers)
def test_invocations_never_5xx(serve: Serve, body: bytes, request_headers: dict[str, Any]) -> None:
    response = CLIENT.post(serve.url + "/invocations", content=body, headers=request_headers)
    assert response.status_code < 500, (response.status_code, response.text)
    if response.status_code >= 400:
        assert response.json()["error"]["message"]
    assert serve.proc.poll() is None


def test_process_survives_the_fuzz(serve: Serve) -> None:
    response = serve.ping()
    assert response is not None and response.status_code == 200
