"""MangaAssist's client library: chat with the SageMaker endpoint, fall back to Bedrock.

One call shape over two backends (the SageMaker endpoint; Bedrock's imported models or a foundation
model through Converse), with retries within a deadline, fallback on a 5xx, a timeout or an open circuit,
stateful sessions, the ``PrefixAwareId`` hint, the context-budget attributes, client-side shadow and
canary, the migration's mode (Bedrock answers, the endpoint is copied asynchronously and each pair stored;
docs/migration.md), and CloudWatch metrics of every retry, fallback and open circuit. boto3 is its only
dependency.
Guide: docs/client.md; copy-paste requests: docs/requests.md.
"""

from mangaassist_client.client import MangaAssistClient
from mangaassist_client.config import (
    BedrockFoundationModel,
    BedrockImportedModels,
    ClientConfig,
    MirrorConfig,
    PairStoreConfig,
    RampConfig,
    SageMakerEndpoint,
    config_from_outputs,
    config_from_outputs_file,
    config_from_stacks,
    migration_config_from_outputs,
)
from mangaassist_client.errors import (
    BackendUnavailableError,
    CallerError,
    Failure,
    FailureKind,
    MangaAssistClientError,
    StreamInterruptedError,
)
from mangaassist_client.factory import botocore_config
from mangaassist_client.metrics import ClientMetric, EmfSink, NullSink, PutMetricDataSink
from mangaassist_client.mirror import Pair, Side
from mangaassist_client.model import ChatResult, ContextBudgetReport, Origin, ServedVersions, Usage, chat_request
from mangaassist_client.pairs import DirectoryPairStore, PairStore, S3PairStore
from mangaassist_client.resilience import CircuitPolicy, RetryPolicy
from mangaassist_client.session import Session
from mangaassist_client.stream import ChatStream

__all__ = [
    "BackendUnavailableError",
    "BedrockFoundationModel",
    "BedrockImportedModels",
    "CallerError",
    "ChatResult",
    "ChatStream",
    "CircuitPolicy",
    "ClientConfig",
    "ClientMetric",
    "ContextBudgetReport",
    "DirectoryPairStore",
    "EmfSink",
    "Failure",
    "FailureKind",
    "MangaAssistClient",
    "MangaAssistClientError",
    "MirrorConfig",
    "NullSink",
    "Origin",
    "Pair",
    "PairStore",
    "PairStoreConfig",
    "PutMetricDataSink",
    "RampConfig",
    "RetryPolicy",
    "S3PairStore",
    "SageMakerEndpoint",
    "ServedVersions",
    "Session",
    "Side",
    "StreamInterruptedError",
    "Usage",
    "botocore_config",
    "chat_request",
    "config_from_outputs",
    "config_from_outputs_file",
    "config_from_stacks",
    "migration_config_from_outputs",
]
