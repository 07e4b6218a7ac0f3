"""The boto3 clients and backends a configuration describes, and each call's own read timeout.

botocore sets its connect and read timeouts per client (``Config``), but a call's deadline is per call: a
10 s deadline against a hung endpoint must time the endpoint out in time for the fallback (issue 53,
finding 2). botocore reads a per-request override, ``read_timeout`` in the request context, since 1.44.5
(``URLLib3Session._get_request_timeout``, boto/botocore#3770; the boto3 this package asks for pulls it in):
:func:`bound_read_timeouts` registers a ``before-call`` handler on each client that copies the value
:func:`attempt_read_timeout` set for the running call into that context. The connect timeout stays per
client: :func:`botocore_config` caps it at :data:`CONNECT_TIMEOUT_S`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import boto3
from botocore.config import Config

from mangaassist_client.backends import Backend
from mangaassist_client.bedrock import ConverseBackend, ImportedModelBackend
from mangaassist_client.config import BackendConfig, BedrockImportedModels, SageMakerEndpoint
from mangaassist_client.sagemaker import SageMakerBackend

ClientFactory = Callable[[str, str | None], Any]
"""``(service name, region or None) -> boto3 client``."""


CONNECT_TIMEOUT_S: Final = 2.0
"""Most seconds a new connection may take: the AWS SDK for Java 2.x's default connection timeout (2 s).
botocore has no per-request connect timeout, so this bound, not the call's deadline, limits a connect; an
endpoint in the caller's region answers a TCP handshake in milliseconds, and a pooled connection needs none."""
MIN_READ_TIMEOUT_S: Final = 0.01
"""urllib3 refuses a read timeout of 0: the least a nearly spent deadline gives an attempt."""

_READ_TIMEOUT: ContextVar[float | None] = ContextVar("mangaassist_client_read_timeout", default=None)
_HANDLER_ID: Final = "mangaassist-client-read-timeout"


def botocore_config(attempt_timeout_s: float) -> Config:
    """The config of every client this package makes: botocore's retries off (the client retries, within
    the deadline; resilience module), ``attempt_timeout_s`` between bytes read unless a call sets its own
    (:func:`attempt_read_timeout`), and at most :data:`CONNECT_TIMEOUT_S` to connect.

    Args:
        attempt_timeout_s: seconds, above 0.
    """
    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=min(attempt_timeout_s, CONNECT_TIMEOUT_S),
        read_timeout=attempt_timeout_s,
    )


def _read_timeout_into_context(context: dict[str, Any], **_: Any) -> None:
    seconds = _READ_TIMEOUT.get()
    if seconds is not None:
        context["read_timeout"] = seconds


def bound_read_timeouts(client: Any) -> None:
    """Let :func:`attempt_read_timeout` set ``client``'s read timeout per call (a ``before-call`` handler;
    registering it twice on one client is a no-op)."""
    client.meta.events.register("before-call", _read_timeout_into_context, unique_id=_HANDLER_ID)


@contextmanager
def attempt_read_timeout(seconds: float) -> Iterator[None]:
    """Within the block, calls of clients passed to :func:`bound_read_timeouts` wait at most ``seconds``
    (at least :data:`MIN_READ_TIMEOUT_S`) between bytes read; a stream started in it keeps that timeout for
    its later reads. Per thread and per asyncio task (a ``ContextVar``)."""
    token = _READ_TIMEOUT.set(max(MIN_READ_TIMEOUT_S, seconds))
    try:
        yield
    finally:
        _READ_TIMEOUT.reset(token)


def default_factory(attempt_timeout_s: float) -> ClientFactory:
    """Clients from the default boto3 session (credentials and region from the environment)."""
    config = botocore_config(attempt_timeout_s)
    session = boto3.session.Session()
    return lambda service, region: session.client(service, region_name=region, config=config)


def backend_name(spec: BackendConfig) -> str:
    """The name the backend ``spec`` describes goes by (``Backend.name``), without making its client."""
    if isinstance(spec, SageMakerEndpoint):
        return f"sagemaker:{spec.endpoint_name}"
    if isinstance(spec, BedrockImportedModels):
        return ImportedModelBackend.name
    return f"bedrock:{spec.model_id}"


def make_backend(spec: BackendConfig, factory: ClientFactory) -> Backend:
    """The backend a :data:`~mangaassist_client.config.BackendConfig` describes; its client's read timeout is
    bounded per call (:func:`bound_read_timeouts`), a client the caller's factory made included."""
    if isinstance(spec, SageMakerEndpoint):
        runtime = factory("sagemaker-runtime", spec.region)
        bound_read_timeouts(runtime)
        return SageMakerBackend(runtime, spec.endpoint_name, prefix_aware_id=spec.prefix_aware_id)
    runtime = factory("bedrock-runtime", spec.region)
    bound_read_timeouts(runtime)
    if isinstance(spec, BedrockImportedModels):
        return ImportedModelBackend(runtime, spec.model_arns)
    return ConverseBackend(runtime, spec.model_id)
