"""What the client tests share: real botocore clients under Stubbers, the endpoint's and Bedrock's answers
in their real shapes, a clock that sleeps by moving, and a sink that keeps the metrics lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.stub import ANY, Stubber

from mangaassist_client import (
    BedrockFoundationModel,
    BedrockImportedModels,
    ClientConfig,
    ClientMetric,
    MangaAssistClient,
    SageMakerEndpoint,
    botocore_config,
)
from tests.botocore_helpers import add_event_stream_response, payload_part, streaming_body

ENDPOINT = "mangaassist-vllm-prod"
SAGEMAKER = f"sagemaker:{ENDPOINT}"
DOMAIN_ARN = "arn:aws:bedrock:us-east-1:123456789012:imported-model/domainv3abcd"
IMPORTED = "bedrock-import"
FOUNDATION_ID = "meta.llama3-1-8b-instruct-v1:0"
VERSIONS = "base_model=base/v4/" + "a" * 64 + ";adapter=manga_domain_v3/v3/" + "b" * 64
MESSAGES = [
    {"role": "system", "content": "You are MangaAssist, a shopping assistant for manga."},
    {"role": "user", "content": "Something like Dungeon Meshi, but shorter?"},
]
CALL: dict[str, Any] = {"adapter": "manga_domain_v3", "messages": MESSAGES, "max_tokens": 180}


def client(service: str) -> Any:
    """A real botocore client of ``service`` with the package's own config (no credentials are used)."""
    return boto3.client(
        service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x", config=botocore_config(30)
    )


def completion(text: str, *, prompt: int = 40, completion_tokens: int = 6, cached: int = 0) -> bytes:
    """vLLM's chat-completion body."""
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice], "usage": usage}).encode()


def sse(*pieces: str, usage: Mapping[str, int] | None = None, done: bool = True, error: str | None = None) -> bytes:
    """The container's stream: a role chunk, one chunk per piece, the usage chunk, an error event, [DONE]."""
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    chunks += [{"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces]
    if usage is not None:
        chunks.append({"choices": [], "usage": dict(usage)})
    if error is not None:  # what the gateway sends when the engine fails mid-stream (serving_app.errors.sse_error)
        chunks.append({"error": {"message": error, "type": "EngineError", "code": 502}})
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def parts(data: bytes, cut: int = 7) -> list[bytes]:
    """``PayloadPart`` events of ``data`` cut every ``cut`` bytes (SageMaker cuts where it likes)."""
    return [payload_part(data[start : start + cut]) for start in range(0, len(data), cut)]


def model_error(status: int, body: Mapping[str, Any] | str) -> dict[str, Any]:
    """``add_client_error`` arguments of SageMaker's ``ModelError`` for a container that answered ``status``."""
    text = body if isinstance(body, str) else json.dumps(body)
    return {
        "service_error_code": "ModelError",
        "service_message": f'Received server error ({status}) from primary with message "{text}". See the log.',
        "http_status_code": 424,
        "modeled_fields": {
            "OriginalStatusCode": status,
            "OriginalMessage": text,
            "LogStreamArn": f"arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/{ENDPOINT}",
        },
    }


def gateway_error(status: int, message: str, **extra: Any) -> dict[str, Any]:
    """The gateway's own error body (container/serving_app/errors.py)."""
    types = {400: "BadRequest", 429: "TooManyRequests", 502: "EngineError", 503: "ServiceUnavailable"}
    return {"error": {"message": message, "type": types.get(status, "Error"), "code": status, **extra}}


class Clock:
    """Monotonic seconds that move only when the client sleeps (or a test says)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class Lines:
    """A metrics sink that keeps what the client records."""

    records: list[tuple[dict[ClientMetric, int], dict[str, Any]]] = field(default_factory=list)

    def record(self, counts: Mapping[ClientMetric, int], properties: Mapping[str, Any]) -> None:
        self.records.append((dict(counts), dict(properties)))

    def close(self) -> None:
        return None

    def calls(self) -> list[tuple[dict[ClientMetric, int], dict[str, Any]]]:
        return [r for r in self.records if ClientMetric.REQUESTS in r[0]]

    def last(self) -> dict[ClientMetric, int]:
        return self.calls()[-1][0]


@dataclass
class Rig:
    """A client over stubbed ``sagemaker-runtime`` and ``bedrock-runtime`` clients."""

    client: MangaAssistClient
    sagemaker: Stubber
    bedrock: Stubber
    clock: Clock
    lines: Lines
    clients: dict[str, Any]

    def invoke_params(self, **overrides: Any) -> dict[str, Any]:
        params = {
            "EndpointName": ENDPOINT,
            "Body": ANY,
            "ContentType": "application/json",
            "Accept": "application/json",
            "InferenceId": ANY,  # the call's request_id (a uuid4 per call)
        }
        return {**params, **overrides}

    def answer(self, text: str = "Try Delicious in Dungeon.", **response: Any) -> None:
        """Queue one InvokeEndpoint 200."""
        body = {"Body": streaming_body(completion(text)), "ContentType": "application/json"}
        body.update({"CustomAttributes": VERSIONS, "InvokedProductionVariant": "primary", **response})
        self.sagemaker.add_response("invoke_endpoint", body, self.invoke_params())

    def fail(self, status: int, body: Mapping[str, Any] | str) -> None:
        """Queue one InvokeEndpoint ModelError (the container answered ``status``)."""
        self.sagemaker.add_client_error("invoke_endpoint", **model_error(status, body), expected_params=None)

    def stream(self, data: bytes, **response: Any) -> None:
        """Queue one InvokeEndpointWithResponseStream 200 whose body carries ``data`` in PayloadParts."""
        head = {"ContentType": "text/event-stream", "CustomAttributes": VERSIONS, **response}
        add_event_stream_response(self.sagemaker, "invoke_endpoint_with_response_stream", head, parts(data))

    def imported_answer(self, text: str = "Try Frieren.") -> None:
        """Queue one Bedrock InvokeModel 200 (OpenAI chat-completions answer) for the domain adapter."""
        expected = {"modelId": DOMAIN_ARN, "body": ANY, "contentType": "application/json", "accept": "application/json"}
        response = {"body": streaming_body(completion(text)), "contentType": "application/json"}
        self.bedrock.add_response("invoke_model", response, expected)

    def pending(self) -> None:
        """Every queued response was used (and nothing else was called: the Stubbers raise on that)."""
        self.sagemaker.assert_no_pending_responses()
        self.bedrock.assert_no_pending_responses()


@contextmanager
def rig(
    *,
    foundation: bool = False,
    on_pair: Any = None,
    pair_store: Any = None,
    rand: Callable[[], float] = lambda: 0.5,
    fallbacks: tuple[Any, ...] | None = None,
    **config: Any,
) -> Iterator[Rig]:
    """SageMaker first, the domain adapter's imported model (and with ``foundation``, Converse) behind it, or
    ``fallbacks``; ``rand``: the client's uniform [0, 1) draws; ``config``: further ClientConfig fields."""
    runtime, bedrock = client("sagemaker-runtime"), client("bedrock-runtime")
    if fallbacks is None:
        fallbacks = (BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}),)
        if foundation:
            fallbacks += (BedrockFoundationModel(FOUNDATION_ID, region="us-east-1"),)
    settings = ClientConfig(primary=SageMakerEndpoint(ENDPOINT), fallbacks=fallbacks, **config)
    clock, lines = Clock(), Lines()
    clients = {"sagemaker-runtime": runtime, "bedrock-runtime": bedrock}
    with ExitStack() as stack:
        sm, br = stack.enter_context(Stubber(runtime)), stack.enter_context(Stubber(bedrock))
        chat = MangaAssistClient(
            settings,
            metrics=lines,
            client_factory=lambda service, region: clients[service],
            clock=clock,
            sleep=clock.sleep,
            rand=rand,
            on_pair=on_pair,
            pair_store=pair_store,
        )
        yield Rig(chat, sm, br, clock, lines, clients)
        chat.close()
