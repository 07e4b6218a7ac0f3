"""``POST /adapters``'s request: a JSON body, or query parameters when there is no JSON body."""

from __future__ import annotations

import pytest

from serving_app.adapters.protocol import AdapterRequestError, check_adapter_name, parse_registration

SRC = "/opt/ml/adapters/manga"


def test_a_json_body_is_read_and_the_query_ignored() -> None:
    parsed = parse_registration(b'{"name": "from-body", "src": "/a", "pin": true}', {"name": "from-query", "src": "/b"})
    assert (parsed.name, parsed.src, parsed.preload, parsed.pin) == ("from-body", "/a", True, True)


@pytest.mark.parametrize("body", [b"", b"name=x&src=y", b"{not json"], ids=["empty", "form", "broken-json"])
def test_without_a_json_body_the_query_parameters_are_the_request(body: bytes) -> None:
    parsed = parse_registration(body, {"name": "mangaassist-vllm-prod-manga-domain-v3", "src": SRC, "preload": "false"})
    assert (parsed.name, parsed.src, parsed.preload, parsed.pin) == (
        "mangaassist-vllm-prod-manga-domain-v3",
        SRC,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("body", "query", "message"),
    [
        (
            b"",
            {},
            "name is missing: POST /adapters needs 'name' and 'src' in a JSON body or as query parameters",
        ),
        (
            b'{"name": "manga"}',
            {"src": SRC},
            "src is missing: POST /adapters needs 'name' and 'src' in a JSON body or as query parameters",
        ),
        (b'{"name": 7, "src": "/a"}', {}, "name = 7: must be a string"),
        (b'{"name": "manga", "src": ""}', {}, "src = '': must have at least 1 character(s)"),
        (b'{"name": "manga", "src": "/a", "pin": "maybe"}', {}, "pin = 'maybe': must be true or false"),
        (
            b'["manga", "/a"]',
            {},
            "body must be a JSON object with 'name' and 'src', got ['manga', '/a']; "
            "or send no body and ?name=...&src=...",
        ),
    ],
    ids=["nothing", "no-src", "name-not-a-string", "empty-src", "pin-not-a-bool", "json-array"],
)
def test_malformed_registrations_name_the_field_and_the_value(body: bytes, query: dict[str, str], message: str) -> None:
    with pytest.raises(AdapterRequestError) as caught:
        parse_registration(body, query)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "manga domain",
            "name = 'manga domain': must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ (letters, digits, . _ -; at most 64)",
        ),
        (
            "x" * 200,
            # Quoted back cut to 100 characters: a client could send megabytes.
            "name = '" + "x" * 99 + "...: must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ "
            "(letters, digits, . _ -; at most 64)",
        ),
        ("base", "name = 'base': it is the base model's name (ENGINE_SERVED_MODEL_NAME); pick another"),
    ],
    ids=["space", "too-long", "base-model"],
)
def test_adapter_names_follow_the_gateway_rule_and_differ_from_the_base_model(name: str, message: str) -> None:
    with pytest.raises(AdapterRequestError) as caught:
        check_adapter_name(name, "base")
    assert str(caught.value) == message


def test_sagemaker_component_names_are_valid_adapter_names() -> None:
    check_adapter_name("mangaassist-vllm-prod-manga-domain-v3", "base")
    check_adapter_name("a" * 63, "base")  # SageMaker's longest InferenceComponentName
