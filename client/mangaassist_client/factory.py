"""The boto3 clients and backends a configuration describes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

from mangaassist_client.backends import Backend
from mangaassist_client.bedrock import ConverseBackend, ImportedModelBackend
from mangaassist_client.config import BackendConfig, BedrockImportedModels, SageMakerEndpoint
from mangaassist_client.sagemaker import SageMakerBackend

ClientFactory = Callable[[str, str | None], Any]
"""``(service name, region or None) -> boto3 client``."""


def botocore_config(attempt_timeout_s: float) -> Config:
    """The config of every client this package makes: botocore's retries off (the client retries, within
    the deadline; resilience module) and ``attempt_timeout_s`` to connect and between bytes read."""
    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=attempt_timeout_s,
        read_timeout=attempt_timeout_s,
    )


def default_factory(attempt_timeout_s: float) -> ClientFactory:
    """Clients from the default boto3 session (credentials and region from the environment)."""
    config = botocore_config(attempt_timeout_s)
    session = boto3.session.Session()
    return lambda service, region: session.client(service, region_name=region, config=config)


def make_backend(spec: BackendConfig, factory: ClientFactory) -> Backend:
    """The backend a :data:`~mangaassist_client.config.BackendConfig` describes."""
    if isinstance(spec, SageMakerEndpoint):
        runtime = factory("sagemaker-runtime", spec.region)
        return SageMakerBackend(runtime, spec.endpoint_name, prefix_aware_id=spec.prefix_aware_id)
    if isinstance(spec, BedrockImportedModels):
        return ImportedModelBackend(factory("bedrock-runtime", spec.region), spec.model_arns)
    return ConverseBackend(factory("bedrock-runtime", spec.region), spec.model_id)
