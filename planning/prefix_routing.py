"""SageMaker's prefix-aware routing (``throughput.routing = prefix_aware``), derived from config.

``AWS::SageMaker::EndpointConfig`` ``RoutingConfig``: ``RoutingStrategy: PREFIX_AWARE`` with
``PrefixAwareRoutingConfig`` (CloudFormation template reference; aws-cdk-lib 2.275's
``CfnEndpointConfig.PrefixAwareRoutingConfigProperty``):

* ``PrefixLength``, 1,024-65,536: for ``InvokeEndpoint`` and ``InvokeEndpointWithResponseStream``
  the number of bytes from the start of the request body that pick the instance; requests that
  share them go to one instance. AWS: "cover shared content (such as system prompts) plus enough
  unique content to distribute workloads across instances".
* ``ConcurrencyThreshold``, 1-1,024: in-flight requests on the prefix-selected instance at which
  the endpoint sends the request to an instance with more room instead.

Derived here:

* the prefix covers the JSON up to the system prompt's text, the system prompt, and the first
  ``DISTINGUISHING_TOKENS`` of the conversation's own context, which every turn of a
  conversation repeats (``traffic.request_shape``): so conversations spread over the instances
  and each conversation's turns meet the instance whose prefix cache holds their history. It
  must stay inside what every turn repeats (system prompt + conversation context), or a
  follow-up's prefix would include text its first turn did not have;
* the threshold is the instance's capacity at the SLO (``AppConfig.throughput_of``): past it, the
  TTFT a prefix hit saves is lost to queueing, so the request is better off elsewhere.
"""

import math
from dataclasses import dataclass

from app_config.traffic import RequestShapeConfig

PREFIX_LENGTH_RANGE = (1024, 65536)
"""``PrefixAwareRoutingConfig.PrefixLength``'s valid range (CloudFormation, SageMaker API reference)."""
CONCURRENCY_THRESHOLD_RANGE = (1, 1024)
"""``PrefixAwareRoutingConfig.ConcurrencyThreshold``'s valid range (same sources)."""
BODY_PREAMBLE_BYTES = 64
"""Request-body bytes before the system prompt's text: ``{"messages":[{"role":"system","content":"`` is
41; the rest covers a short field before it (the gateway's and ops' bodies put messages first)."""
DISTINGUISHING_TOKENS = 64
"""Tokens of a conversation's own context inside the prefix: a few sentences of its retrieved
context, which two conversations rarely share."""


@dataclass(frozen=True)
class PrefixRouting:
    """The two derived ``PrefixAwareRoutingConfig`` fields."""

    prefix_length_bytes: int
    concurrency_threshold: int


def prefix_length_bytes(shape: RequestShapeConfig, distinguishing_tokens: int = DISTINGUISHING_TOKENS) -> int:
    """``PrefixLength``: preamble + (system prompt + ``distinguishing_tokens`` of the conversation's
    context) x bytes per token, within SageMaker's 1,024-65,536.

    Raises:
        ValueError: one line, when the allowed minimum reaches past what every turn repeats (a
            system prompt and conversation context too short to route on).
    """
    own = min(distinguishing_tokens, shape.conversation_tokens)
    wanted = math.ceil(BODY_PREAMBLE_BYTES + (shape.system_prefix_tokens + own) * shape.bytes_per_token)
    length = min(max(wanted, PREFIX_LENGTH_RANGE[0]), PREFIX_LENGTH_RANGE[1])
    repeated = BODY_PREAMBLE_BYTES + (shape.system_prefix_tokens + shape.conversation_tokens) * shape.bytes_per_token
    if length > repeated:
        raise ValueError(
            f"traffic.request_shape: PrefixLength {length} bytes reaches past the {repeated:,.0f} bytes every turn "
            "repeats (system prompt + conversation context); prefix_aware routing needs more repeated context"
        )
    return length


def concurrency_threshold(concurrency_at_slo: int) -> int:
    """``ConcurrencyThreshold``: the instance's concurrency at the SLO, within SageMaker's 1-1,024."""
    return min(max(concurrency_at_slo, CONCURRENCY_THRESHOLD_RANGE[0]), CONCURRENCY_THRESHOLD_RANGE[1])
