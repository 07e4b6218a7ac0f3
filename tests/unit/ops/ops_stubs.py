"""Stubbed AWS clients, a fake clock and canned responses for the ops command tests.

``InvokeEndpointWithResponseStream`` returns an event stream that botocore's Stubber cannot
express (it validates ``Body`` as one event structure). The stub answers with one valid
placeholder event, and an ``after-call`` hook swaps the parsed ``Body`` for a list of
event dicts shaped like botocore's parsed events, which is what the command iterates.
"""

import datetime as dt
import json
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import ANY, Stubber

from ops.cli import Clients, Deps
from tests.botocore_helpers import streaming_body

ENDPOINT = "mangaassist-vllm-test"
ADAPTERS = ("manga_domain_v3", "general_support_v2", "jp_style_v1")
NOW = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
ARN = "arn:aws:sagemaker:us-east-1:123456789012"

# inference_components mode: names as serving_contract.components derives them, written out so a
# test fails if the derivation changes.
BASE = f"{ENDPOINT}-base"
ADAPTER_COMPONENTS = {
    "manga_domain_v3": f"{ENDPOINT}-manga-domain-v3",
    "general_support_v2": f"{ENDPOINT}-general-support-v2",
    "jp_style_v1": f"{ENDPOINT}-jp-style-v1",
}
BASE_MODEL = "llama-3-8b-instruct-awq"  # model.name's default: the base component's `model`
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mangaassist-vllm:v2"
OLD_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mangaassist-vllm:v1"
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)  # SageMaker's answer at zero copies (AWS scale-to-zero notebook)


def component_outputs(**extra: str) -> dict[str, str]:
    """The serving stack's outputs in inference_components mode (``cdk deploy --outputs-file`` block)."""
    values = {
        "EndpointName": ENDPOINT,
        "ServingMode": "inference_components",
        "PrimaryVariantName": "primary",
        "BaseInferenceComponentName": BASE,
        "AdapterInferenceComponentMangaDomainV3": ADAPTER_COMPONENTS["manga_domain_v3"],
        "AdapterInferenceComponentGeneralSupportV2": ADAPTER_COMPONENTS["general_support_v2"],
        "AdapterInferenceComponentJpStyleV1": ADAPTER_COMPONENTS["jp_style_v1"],
    }
    values.update(extra)
    return {key: value for key, value in values.items() if value}


class FakeClock:
    """``clock()`` advances by ``tick`` per read; ``sleep(s)`` advances by ``s`` and records it."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 1000.0
        self.tick = tick
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")


@dataclass
class Stubs:
    """Four stubbed clients plus the queue of event lists for streamed invocations."""

    clients: Clients
    sagemaker: Stubber
    runtime: Stubber
    cloudwatch: Stubber
    cloudformation: Stubber
    streams: deque[list[dict[str, Any]]] = field(default_factory=deque)
    lines: list[str] = field(default_factory=list)

    def deps(self, clock: FakeClock) -> Deps:
        return Deps(clients=lambda region, profile: self.clients, clock=clock, sleep=clock.sleep, out=self.lines.append)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    # --- sagemaker -------------------------------------------------------------------
    def describe_endpoint(self, status: str = "InService", weights: dict[str, float] | None = None, **extra: Any):
        weights = {"primary": 95.0, "canary": 5.0} if weights is None else weights
        variants = [
            {
                "VariantName": name,
                "CurrentWeight": weight,
                "DesiredWeight": weight,
                "CurrentInstanceCount": 4 if name == "primary" else 1,
                "DesiredInstanceCount": 4 if name == "primary" else 1,
            }
            for name, weight in weights.items()
        ]
        response = {
            "EndpointName": ENDPOINT,
            "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{ENDPOINT}",
            "EndpointConfigName": "config",
            "EndpointStatus": status,
            "CreationTime": NOW,
            "LastModifiedTime": NOW,
            "ProductionVariants": variants,
            **extra,
        }
        self.sagemaker.add_response("describe_endpoint", response, {"EndpointName": ENDPOINT})

    def describe_component(
        self,
        name: str = BASE,
        status: str = "InService",
        copies: int | None = 2,
        desired: int | None = None,
        image: str = IMAGE,
        **extra: Any,
    ) -> None:
        """DescribeInferenceComponent: a base component (image, copies) or, for any other name, an
        adapter component (artifact, no RuntimeConfig of its own)."""
        response: dict[str, Any] = {
            "InferenceComponentName": name,
            "InferenceComponentArn": f"{ARN}:inference-component/{name}",
            "EndpointName": ENDPOINT,
            "EndpointArn": f"{ARN}:endpoint/{ENDPOINT}",
            "VariantName": "primary",
            "CreationTime": NOW,
            "LastModifiedTime": NOW,
            "InferenceComponentStatus": status,
        }
        if name == BASE:
            response["Specification"] = {
                "Container": {"DeployedImage": {"SpecifiedImage": image, "ResolvedImage": f"{image}@sha256:abc"}}
            }
            response["RuntimeConfig"] = {
                "CurrentCopyCount": copies,
                "DesiredCopyCount": copies if desired is None else desired,
            }
        else:
            adapter = name.removeprefix(f"{ENDPOINT}-")
            response["Specification"] = {
                "BaseInferenceComponentName": BASE,
                "Container": {"ArtifactUrl": f"s3://artifacts/adapters/{adapter}/adapter.tar.gz"},
            }
        response.update(extra)
        self.sagemaker.add_response("describe_inference_component", response, {"InferenceComponentName": name})

    def describe_all_components(self, base_copies: int = 2) -> None:
        """The base component, then every adapter component, all InService."""
        self.describe_component(BASE, copies=base_copies)
        for component in ADAPTER_COMPONENTS.values():
            self.describe_component(component)

    def update_weights(self, weights: dict[str, float]) -> None:
        desired = [{"VariantName": n, "DesiredWeight": w} for n, w in weights.items()]
        self.sagemaker.add_response(
            "update_endpoint_weights_and_capacities",
            {"EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{ENDPOINT}"},
            {"EndpointName": ENDPOINT, "DesiredWeightsAndCapacities": desired},
        )

    # --- cloudwatch ------------------------------------------------------------------
    def alarms_exist(self, state: str = "OK", guarded: str = "canary") -> None:
        """The rollback alarms of ``guarded`` (the canary variant, or ``base``), looked up by name."""
        names = [
            f"{ENDPOINT}-{guarded}-5xx-rate",
            f"{ENDPOINT}-{guarded}-ttft-p95-cold",
            f"{ENDPOINT}-{guarded}-ttft-p95-warm",
            f"{ENDPOINT}-{guarded}-model-latency-p99",
            f"{ENDPOINT}-{guarded}-4xx-rate",
        ]
        self.cloudwatch.add_response(
            "describe_alarms",
            {"MetricAlarms": [{"AlarmName": n, "StateValue": state} for n in names]},
            {"AlarmNames": names, "AlarmTypes": ["MetricAlarm", "CompositeAlarm"]},
        )

    def alarm_check(self, firing: tuple[str, ...] = (), guarded: str = "canary") -> None:
        """One firing_alarms() call: by prefix (StateValue=ALARM), then the rollback alarms by name."""
        self.cloudwatch.add_response(
            "describe_alarms",
            {"MetricAlarms": [{"AlarmName": n, "StateValue": "ALARM"} for n in firing]},
            {"AlarmNamePrefix": f"{ENDPOINT}-", "StateValue": "ALARM", "AlarmTypes": ["MetricAlarm", "CompositeAlarm"]},
        )
        self.alarms_exist(guarded=guarded)

    def invocations(self, per_minute: dict[str, list[float]] | None = None) -> None:
        """GetMetricData of ``Invocations``: per variant, one Sum per minute (newest first, as
        CloudWatch returns them). Default: 1,000/min over 10 minutes, split 95/5."""
        per_minute = {"primary": [950.0] * 10, "canary": [50.0] * 10} if per_minute is None else per_minute
        queries = [
            {
                "Id": f"v{index}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SageMaker",
                        "MetricName": "Invocations",
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": ENDPOINT},
                            {"Name": "VariantName", "Value": name},
                        ],
                    },
                    "Period": 60,
                    "Stat": "Sum",
                },
            }
            for index, name in enumerate(per_minute)
        ]
        results = [
            {
                "Id": f"v{index}",
                "Label": "Invocations",
                "Timestamps": [NOW - dt.timedelta(minutes=m) for m in range(len(values))],
                "Values": values,
                "StatusCode": "Complete",
            }
            for index, values in enumerate(per_minute.values())
        ]
        self.cloudwatch.add_response(
            "get_metric_data",
            {"MetricDataResults": results},
            {"MetricDataQueries": queries, "StartTime": ANY, "EndTime": ANY},
        )

    # --- sagemaker-runtime ---------------------------------------------------------------
    # ``variant`` is the TargetVariant; None with ``component=`` (InferenceComponentName) instead.
    def invoke(
        self,
        variant: str | None,
        adapter: str,
        content: str = "Try Dungeon Meshi.",
        *,
        component: str | None = None,
        custom_attributes: str | None = None,
    ) -> None:
        body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).encode()
        answer: dict[str, Any] = {"Body": streaming_body(body), "ContentType": "application/json"}
        if custom_attributes is not None:  # the container's versions (container/serving_app/versions.py)
            answer["CustomAttributes"] = custom_attributes
        self.runtime.add_response(
            "invoke_endpoint", answer, _invoke_params(variant, adapter, stream=False, component=component)
        )

    def invoke_model_error(
        self, variant: str | None, adapter: str, status: int = 500, *, component: str | None = None
    ) -> None:
        self.runtime.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            service_message=f"Received server error ({status}) from primary with message 'engine died'",
            http_status_code=424,
            modeled_fields={"OriginalStatusCode": status, "OriginalMessage": "engine died"},
            expected_params=_invoke_params(variant, adapter, stream=False, component=component),
        )

    def invoke_error(
        self, component: str, adapter: str, code: str, message: str, *, max_tokens: int | None = None
    ) -> None:
        """A component's InvokeEndpoint fails with ``code`` (e.g. SageMaker's no-capacity ValidationError)."""
        self.runtime.add_client_error(
            "invoke_endpoint",
            service_error_code=code,
            service_message=message,
            http_status_code=400,
            expected_params=_invoke_params(None, adapter, stream=False, component=component, max_tokens=max_tokens),
        )

    def invoke_stream(
        self,
        variant: str | None,
        adapter: str,
        events: list[dict[str, Any]] | None = None,
        *,
        component: str | None = None,
        custom_attributes: str | None = None,
    ) -> None:
        answer: dict[str, Any] = {"Body": {"PayloadPart": {"Bytes": b""}}, "ContentType": "text/event-stream"}
        if custom_attributes is not None:
            answer["CustomAttributes"] = custom_attributes
        self.runtime.add_response(
            "invoke_endpoint_with_response_stream",
            answer,
            _invoke_params(variant, adapter, stream=True, component=component),
        )
        self.streams.append(events if events is not None else sse_events("Try ", "Dungeon Meshi."))


def _invoke_params(
    variant: str | None, adapter: str, *, stream: bool, component: str | None = None, max_tokens: int | None = None
) -> dict[str, Any]:
    def body_matches(body: bytes) -> bool:
        payload = json.loads(body)
        if max_tokens is not None and payload["max_tokens"] != max_tokens:
            return False
        return payload["model"] == adapter and payload["stream"] is stream and payload["messages"][0]["content"]

    class _Body:
        __hash__ = None  # type: ignore[assignment]  # compared only, never hashed

        def __eq__(self, other: object) -> bool:
            return isinstance(other, bytes) and bool(body_matches(other))

    params: dict[str, Any] = {
        "EndpointName": ENDPOINT,
        "Body": _Body(),
        "ContentType": "application/json",
        "Accept": "text/event-stream" if stream else "application/json",
    }
    if variant is not None:
        params["TargetVariant"] = variant
    if component is not None:
        params["InferenceComponentName"] = component
    return params


def sse_events(*contents: str, done: bool = True, split: int = 0) -> list[dict[str, Any]]:
    """PayloadPart events carrying OpenAI chat chunks, optionally re-split every ``split`` bytes."""
    raw = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    for content in contents:
        chunk = {"choices": [{"index": 0, "delta": {"content": content}}]}
        raw += f"data: {json.dumps(chunk)}\n\n".encode()
    if done:
        raw += b"data: [DONE]\n\n"
    pieces = [raw[i : i + split] for i in range(0, len(raw), split)] if split else [raw]
    return [{"PayloadPart": {"Bytes": piece}} for piece in pieces]


@contextmanager
def stubbed() -> Iterator[Stubs]:
    """Active stubs; asserts every queued response was used."""
    clients = Clients(
        sagemaker=_client("sagemaker"),
        runtime=_client("sagemaker-runtime"),
        cloudwatch=_client("cloudwatch"),
        cloudformation=_client("cloudformation"),
    )
    stubs = Stubs(
        clients,
        Stubber(clients.sagemaker),
        Stubber(clients.runtime),
        Stubber(clients.cloudwatch),
        Stubber(clients.cloudformation),
    )

    def swap_body(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Body"] = stubs.streams.popleft()

    clients.runtime.meta.events.register("after-call.sagemaker-runtime.InvokeEndpointWithResponseStream", swap_body)
    with stubs.sagemaker, stubs.runtime, stubs.cloudwatch, stubs.cloudformation:
        yield stubs
        stubs.sagemaker.assert_no_pending_responses()
        stubs.runtime.assert_no_pending_responses()
        stubs.cloudwatch.assert_no_pending_responses()
        stubs.cloudformation.assert_no_pending_responses()
    assert not stubs.streams, "queued stream bodies were not consumed"


def write_component_outputs(directory: Path, **extra: str) -> Path:
    """A ``cdk deploy --outputs-file`` file with the prod serving stack in inference_components mode."""
    path = directory / "cdk-outputs.json"
    path.write_text(json.dumps({"MangaAssist-prod-Serving": component_outputs(**extra)}))
    return path


__all__ = [
    "ADAPTERS",
    "ADAPTER_COMPONENTS",
    "ANY",
    "BASE",
    "BASE_MODEL",
    "ENDPOINT",
    "IMAGE",
    "NO_CAPACITY",
    "OLD_IMAGE",
    "FakeClock",
    "Stubs",
    "component_outputs",
    "sse_events",
    "stubbed",
    "write_component_outputs",
]
