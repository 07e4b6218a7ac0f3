"""``smoke``: is the endpoint InService and does every adapter answer on every variant?

Checks DescribeEndpoint (endpoint InService, each variant present and Active), then sends
``requests_per_case`` requests per (adapter, variant, mode) with ``TargetVariant`` so a
variant at weight 0 is exercised too, streaming and not, and checks each answer's shape
(OpenAI chat completion, non-empty content; streams end with ``[DONE]``).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ops.endpoint import EndpointRef, describe, require_in_service
from ops.exit_codes import ExitCode
from ops.invoke import Answer, SageMakerTarget, chat_body
from ops.table import format_table, ms

MODES = ("sync", "stream")


@dataclass(frozen=True)
class SmokeOptions:
    """What to send: adapters (``model`` values), variants (empty = all), requests per case, modes."""

    adapters: tuple[str, ...]
    variants: tuple[str, ...]
    requests_per_case: int
    modes: tuple[str, ...]
    prompt: str
    max_tokens: int


def run_smoke(
    *,
    sagemaker: Any,
    runtime: Any,
    ref: EndpointRef,
    options: SmokeOptions,
    clock: Callable[[], float],
    out: Callable[[str], None],
) -> ExitCode:
    """Run the smoke test and print a table; OK only when every request passed.

    Raises OpsError (NOT_READY) when the endpoint or a requested variant is not in service.
    """
    state = describe(sagemaker, ref.endpoint_name)
    variants = options.variants or tuple(v.name for v in state.variants)
    require_in_service(state, variants)
    weights = ", ".join(f"{v.name}={v.current_weight:g} x{v.current_instances}" for v in state.variants)
    out(f"endpoint {state.name}: {state.status} ({weights})")

    target = SageMakerTarget(runtime, ref.endpoint_name, clock=clock)
    rows: list[list[str]] = []
    failures: list[tuple[str, str, str, Answer]] = []
    for adapter in options.adapters:
        for variant in variants:
            for mode in options.modes:
                stream = mode == "stream"
                body = chat_body(model=adapter, prompt=options.prompt, max_tokens=options.max_tokens, stream=stream)
                for _ in range(options.requests_per_case):
                    answer = target.invoke(body, stream=stream, variant=variant)
                    rows.append([adapter, variant, mode, answer.status, ms(answer.ttft_s), ms(answer.latency_s)])
                    if not answer.ok:
                        failures.append((adapter, variant, mode, answer))
    out(format_table(["adapter", "variant", "mode", "status", "ttft", "latency"], rows))
    for adapter, variant, mode, answer in failures:
        out(f"FAIL {adapter} on {variant} ({mode}): {answer.status}: {answer.detail}")
    total = len(rows)
    if failures:
        out(f"smoke FAILED: {len(failures)} of {total} request(s) failed")
        return ExitCode.CHECK_FAILED
    out(f"smoke passed: {total} request(s), {len(options.adapters)} adapter(s) x {len(variants)} variant(s)")
    return ExitCode.OK
