"""Hypothesis: nothing a client sends to /invocations yields a 5xx or kills the process.

Text includes lone UTF-16 surrogates (valid JSON as ``\\ud800`` escapes, not encodable as UTF-8), in
keys and values, and ``requestType`` bodies (SageMaker stateful sessions): a lone-surrogate key in
a session request was a 500 on 7e6fc9b (issue 49). Bodies of 100,000 messages and more are
explicit cases (:func:`test_large_bodies_never_5xx`): random generation rarely reaches them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.container.conftest import ADAPTERS, Serve

CLIENT = httpx.Client(timeout=10)  # one pool: a new client per example costs ~30 ms

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
# Text with lone surrogates mixed in (Hypothesis leaves category Cs out of text by default);
# json.dumps writes each as a \uXXXX escape, as a client's JSON library would.
odd_text = st.lists(st.text(max_size=6) | st.sampled_from(SURROGATES), max_size=4).map("".join)
texts = st.text(max_size=20) | odd_text
keys = st.text(max_size=10) | odd_text
json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
models = st.sampled_from(["base", *ADAPTERS, "", "nope", "../etc"]) | st.text(max_size=12)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant", "x"]) | json_scalars},
        optional={"content": texts | json_values},
    ).flatmap(lambda message: st.dictionaries(keys, json_scalars, max_size=2).map(lambda extra: {**extra, **message})),
    max_size=3,
)
request_types = st.sampled_from(["NEW_SESSION", "CLOSE", "new_session", ""]) | json_values
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
        "requestType": request_types,
    },
)
# Session requests: requestType with nothing else, or with the caller's own (odd) keys beside it.
session_bodies = st.builds(
    lambda request_type, extra: {**extra, "requestType": request_type},
    request_types,
    st.dictionaries(keys, json_scalars, max_size=3),
)
bodies = st.one_of(
    shaped.map(lambda d: json.dumps(d).encode()),
    session_bodies.map(lambda d: json.dumps(d).encode()),
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
        "x-amzn-sagemaker-session-id": st.sampled_from(["", "nope", "0" * 300]) | header_text,
        "x-amzn-sagemaker-custom-attributes": st.sampled_from(
            [f"adapter={a}" for a in ADAPTERS] + ["adapter=", "adapter=zzz", "a=b;adapter=base"]
        )
        | header_text,
    },
)


@settings(
    max_examples=250,
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


TINY = {"role": "user", "content": "a"}
LARGE_BODIES = {
    "100k tiny messages": {"messages": [TINY] * 100_000},
    "100k messages, lone surrogates": {"messages": [{"role": "user", "content": "\ud800"}] * 100_000},
    "100k messages beside requestType": {"requestType": "NEW_SESSION", "messages": [TINY] * 100_000},
    "100k odd keys beside requestType": {"requestType": "NEW_SESSION", **{f"\ud800{i}": i for i in range(100_000)}},
    "100k prompts": {"prompt": ["a"] * 100_000},
    "100k-token prompt": {"prompt": list(range(100_000))},
    "180k tiny messages, near 6 MB": {"messages": [{"role": "user", "content": ""}] * 180_000},
}


@pytest.mark.parametrize("body", LARGE_BODIES.values(), ids=LARGE_BODIES.keys())
def test_large_bodies_never_5xx(serve: Serve, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    assert len(raw) <= 6 * 1024 * 1024  # what SageMaker lets through (InvokeEndpoint's 6 MB)
    response = CLIENT.post(
        serve.url + "/invocations", content=raw, headers={"content-type": "application/json"}, timeout=60
    )
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert response.json()["error"]["message"]
    assert serve.proc.poll() is None


def test_process_survives_the_fuzz(serve: Serve) -> None:
    response = serve.ping()
    assert response is not None and response.status_code == 200
