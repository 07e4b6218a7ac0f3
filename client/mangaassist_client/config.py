"""The client's configuration, and how to read it from the stacks' outputs.

The deployed names come from CloudFormation outputs, never typed by hand: the endpoint from
``<Project>-<stage>-Serving``'s ``EndpointName``, the metric namespace from
``<Project>-<stage>-Observability``'s ``MetricsNamespace``, and each adapter's imported model from
``<Project>-<stage>-BedrockImport``'s ``ImportedModelArn<PascalCaseName>``, whose adapter the stack names in
``ImportedModelAdapter<PascalCaseName>`` (``bedrock.models[].adapter``; docs/bedrock.md): so the documented
path, ``config_from_outputs_file("cdk-outputs.json")``, gets the Bedrock fallback the outputs name (issue 53,
finding 3). Read them from
``cdk deploy --outputs-file`` JSON (:func:`config_from_outputs_file`) or with ``DescribeStacks``
(:func:`config_from_stacks`); a missing stack or output stops with one line naming it.

The stack names, output keys and their PascalCase rule are the app's (``app_config.root.AppConfig.stack_name``,
``serving_contract.outputs``); this package cannot import the app, so it carries them and
``tests/client/test_contract_agreement.py`` checks both agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from botocore.exceptions import ClientError

from mangaassist_client.metrics import DEFAULT_NAMESPACE
from mangaassist_client.model import check_flag, check_prefix_aware_id
from mangaassist_client.resilience import CircuitPolicy, RetryPolicy

ENDPOINT_NAME_OUTPUT: Final = "EndpointName"
METRICS_NAMESPACE_OUTPUT: Final = "MetricsNamespace"
IMPORTED_MODEL_ARN_PREFIX: Final = "ImportedModelArn"
IMPORTED_MODEL_ADAPTER_PREFIX: Final = "ImportedModelAdapter"
MIGRATION_STORE_BUCKET_OUTPUT: Final = "MigrationStoreBucketName"
MIGRATION_STORE_KEY_OUTPUT: Final = "MigrationStoreKeyArn"
MIGRATION_STATE_PARAMETER_OUTPUT: Final = "MigrationStateParameterName"
DEFAULT_PROJECT: Final = "MangaAssist"

DEADLINE_S_DEFAULT: Final = 60.0
"""A call's deadline: SageMaker's own limit for an InvokeEndpoint answer (60 s); past it SageMaker fails
the call anyway."""


def pascal_case(name: str) -> str:
    """``mangaassist-llama3_domain-v1`` -> ``MangaassistLlama3DomainV1`` (the app's output-key rule)."""
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-") if part)


def imported_model_output(model_name: str) -> str:
    """Output key of the imported model configured as ``model_name`` (``bedrock.models[].name``)."""
    return IMPORTED_MODEL_ARN_PREFIX + pascal_case(model_name)


def imported_model_adapter_output(model_name: str) -> str:
    """Output key naming the adapter the imported model ``model_name`` answers for."""
    return IMPORTED_MODEL_ADAPTER_PREFIX + pascal_case(model_name)


def stack_name(project: str, stage: str, unit: str) -> str:
    """``MangaAssist-prod-Serving``: the app's stack name of a deployment unit."""
    return f"{project}-{stage}-{unit}"


_ARN_REGION = re.compile(r"^arn:aws[a-z-]*:bedrock:([a-z0-9-]+):")


@dataclass(frozen=True, slots=True)
class SageMakerEndpoint:
    """The SageMaker endpoint (the Serving stack's ``EndpointName``), in ``region`` (None: the SDK's)."""

    endpoint_name: str
    region: str | None = None
    prefix_aware_id: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", self.endpoint_name):
            raise ValueError(f"endpoint_name = {self.endpoint_name!r}: not a SageMaker endpoint name")
        check_prefix_aware_id(self.prefix_aware_id)


@dataclass(frozen=True, slots=True)
class BedrockImportedModels:
    """Bedrock imported models, adapter (or base) name -> ARN; the region is the ARNs' own."""

    model_arns: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.model_arns:
            raise ValueError("model_arns: empty; name at least one adapter's imported model")
        regions = set()
        for adapter, arn in self.model_arns.items():
            match = _ARN_REGION.match(arn)
            if match is None or ":imported-model/" not in arn:
                raise ValueError(f"model_arns[{adapter!r}] = {arn!r}: not a Bedrock imported-model ARN")
            regions.add(match.group(1))
        if len(regions) > 1:
            raise ValueError(f"model_arns: ARNs in {', '.join(sorted(regions))}; one client region holds them all")

    @property
    def region(self) -> str:
        return next(_ARN_REGION.match(arn).group(1) for arn in self.model_arns.values())  # type: ignore[union-attr]


@dataclass(frozen=True, slots=True)
class BedrockFoundationModel:
    """A Bedrock model through Converse (e.g. ``meta.llama3-1-8b-instruct-v1:0``), in ``region``."""

    model_id: str
    region: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= len(self.model_id) <= 2048:
            raise ValueError(f"model_id = {self.model_id[:80]!r}: must be 1 to 2048 characters")


BackendConfig = SageMakerEndpoint | BedrockImportedModels | BedrockFoundationModel


@dataclass(frozen=True, slots=True)
class PairStoreConfig:
    """The Migration stack's comparison store, where the mirror's pairs go (pairs module).

    Attributes:
        bucket: ``MigrationStoreBucketName``.
        kms_key_arn: ``MigrationStoreKeyArn`` (every put names it; the bucket refuses any other).
        region: the bucket's region (None: the SDK's).
        batch_size: pairs per object, 1 to 10,000.
        flush_interval_s: seconds between writes of a partial batch, 1 to 3,600.
        store_prompts: keep each pair's messages too (default: only their SHA-256; docs/security.md).
    """

    bucket: str
    kms_key_arn: str
    region: str | None = None
    batch_size: int = 100
    flush_interval_s: float = 60.0
    store_prompts: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", self.bucket):
            raise ValueError(f"store.bucket = {self.bucket!r}: not an S3 bucket name")
        if not re.fullmatch(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+", self.kms_key_arn):
            raise ValueError(f"store.kms_key_arn = {self.kms_key_arn!r}: not a KMS key ARN")
        if not 1 <= self.batch_size <= 10_000:
            raise ValueError(f"store.batch_size = {self.batch_size}: must be from 1 to 10000")
        if not 1 <= self.flush_interval_s <= 3600:
            raise ValueError(f"store.flush_interval_s = {self.flush_interval_s}: must be from 1 to 3600")
        check_flag("store.store_prompts", self.store_prompts)


@dataclass(frozen=True, slots=True)
class RampConfig:
    """The migration's ramp: the share of calls the mirror backend answers, read from the Migration stack's
    state parameter (``MigrationStateParameterName``; ramp module).

    Attributes:
        parameter_name: the SSM parameter.
        region: its region (None: the SDK's).
        refresh_s: seconds a read is used, 1 to 3,600 (a rollback reaches the client within it).
    """

    parameter_name: str
    region: str | None = None
    refresh_s: float = 60.0

    def __post_init__(self) -> None:
        if not re.fullmatch(r"/?[A-Za-z0-9_.\-/]{1,1011}", self.parameter_name):
            raise ValueError(f"ramp.parameter_name = {self.parameter_name!r}: not an SSM parameter name")
        if not 1 <= self.refresh_s <= 3600:
            raise ValueError(f"ramp.refresh_s = {self.refresh_s}: must be from 1 to 3600")


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    """Client-side shadow or canary with a second backend, for what SageMaker's production variants cannot
    split: Bedrock against the endpoint (seed 002, scenario 6; the migration, docs/migration.md).

    Attributes:
        backend: the second backend (in the migration, the endpoint).
        share: the sampled share of calls, 0 to 1: copied (``shadow``) or answered (``canary``) by ``backend``.
        mode: ``shadow``: the sampled calls are also sent to ``backend`` asynchronously, never delaying the
            caller's answer, and each answer and its copy are stored as a pair (mirror module); ``canary``: the
            sampled calls are answered by ``backend``, the configured backends behind it as fallbacks.
        max_in_flight: copies running at once (worker threads), 1 to 64.
        queue_size: copies waiting at most, 1 to 10,000; one more is dropped and counted.
        deadline_s: a copy's own deadline from being queued, seconds, above 0 and at most 3,600.
        store: where pairs go (None: only ``on_pair`` sees them).
        ramp: ``shadow`` mode only: the share of calls ``backend`` answers comes from the ramp's state (the
            canary part of the migration), while ``share`` of all calls are still copied, each to the backend
            that did not answer.
    """

    backend: BackendConfig
    share: float
    mode: Literal["shadow", "canary"] = "shadow"
    max_in_flight: int = 4
    queue_size: int = 64
    deadline_s: float = 30.0
    store: PairStoreConfig | None = None
    ramp: RampConfig | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise ValueError(f"mirror.share = {self.share}: must be from 0 to 1")
        if self.mode not in ("shadow", "canary"):
            raise ValueError(f"mirror.mode = {self.mode!r}: allowed shadow, canary")
        if not 1 <= self.max_in_flight <= 64:
            raise ValueError(f"mirror.max_in_flight = {self.max_in_flight}: must be from 1 to 64")
        if not 1 <= self.queue_size <= 10_000:
            raise ValueError(f"mirror.queue_size = {self.queue_size}: must be from 1 to 10000")
        if not 0 < self.deadline_s <= 3600:
            raise ValueError(f"mirror.deadline_s = {self.deadline_s}: must be above 0 and at most 3600")
        if self.mode == "canary" and (self.store is not None or self.ramp is not None):
            raise ValueError(
                "mirror.mode = 'canary' with a store or a ramp: a canary copies nothing; use mode 'shadow' with a "
                "ramp, which answers the ramp's share from the backend and copies the rest"
            )


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything a :class:`~mangaassist_client.client.MangaAssistClient` needs.

    Attributes:
        primary: where calls go first.
        fallbacks: where they go next, in order, on a 5xx, a timeout or an open circuit.
        mirror: shadow or canary, or None.
        deadline_s: a call's default deadline (a call may set its own), seconds.
        attempt_timeout_s: the most botocore waits between bytes on one try, seconds; None: no cap beyond the
            deadline. Each try's read timeout is what remains of the call's deadline, half of it while a
            fallback follows, so a hung backend leaves the fallback the other half (an answer of 180 tokens
            takes seconds; seed 002: p99 < 2 s). Calls without a deadline (sessions, shadow copies) wait
            ``attempt_timeout_s`` or half of ``deadline_s``. Connecting takes at most 2 s
            (``factory.CONNECT_TIMEOUT_S``).
        retry, circuit: :class:`RetryPolicy`, :class:`CircuitPolicy`.
        metrics_namespace: the Observability stack's ``MetricsNamespace``.
        metrics_endpoint: the ``EndpointName`` dimension (default: the SageMaker backend's endpoint).
        allow_substitute: whether a model without the requested adapter (a foundation model through Converse)
            may answer a call that does not say (False: such a backend is skipped, and the error says how to
            allow it; issue 53, finding 6).
    """

    primary: BackendConfig
    fallbacks: tuple[BackendConfig, ...] = ()
    mirror: MirrorConfig | None = None
    deadline_s: float = DEADLINE_S_DEFAULT
    attempt_timeout_s: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    circuit: CircuitPolicy = field(default_factory=CircuitPolicy)
    metrics_namespace: str = DEFAULT_NAMESPACE
    metrics_endpoint: str | None = None
    allow_substitute: bool = False

    def __post_init__(self) -> None:
        check_flag("allow_substitute", self.allow_substitute)
        if not 0 < self.deadline_s <= 3600:
            raise ValueError(f"deadline_s = {self.deadline_s}: must be above 0 and at most 3600")
        if self.attempt_timeout_s is not None and not 0 < self.attempt_timeout_s <= self.deadline_s:
            raise ValueError(
                f"attempt_timeout_s = {self.attempt_timeout_s}: must be above 0 and at most "
                f"deadline_s = {self.deadline_s}"
            )
        if not 1 <= len(self.metrics_namespace) <= 255 or self.metrics_namespace.startswith("AWS/"):
            raise ValueError(f"metrics_namespace = {self.metrics_namespace!r}: 1-255 characters, not AWS/...")
        if len(self.fallbacks) > 4:
            raise ValueError(f"fallbacks: {len(self.fallbacks)} given; at most 4")
        canary = self.mirror.backend if self.mirror and self.mirror.mode == "canary" else None
        if isinstance(canary, BedrockFoundationModel) and not self.allow_substitute:
            # Every sampled call would skip it (issue 53, finding 6), and count as a fallback.
            raise ValueError(
                f"mirror.backend = {canary.model_id!r}: a canary without the adapters answers only with "
                "allow_substitute = True; set it, or canary an imported model or an endpoint"
            )

    @property
    def attempt_timeout(self) -> float:
        """The clients' own read timeout, seconds (``attempt_timeout_s`` or half of ``deadline_s``): what a
        call without a deadline waits (a session's open and close, a shadow copy); a chat call sets its own."""
        return self.attempt_timeout_s if self.attempt_timeout_s is not None else self.deadline_s / 2

    @property
    def endpoint_dimension(self) -> str:
        """The metrics' ``EndpointName``: configured, else the first SageMaker backend's, else ``none``."""
        if self.metrics_endpoint:
            return self.metrics_endpoint
        backends = (self.primary, *self.fallbacks, *([self.mirror.backend] if self.mirror else []))
        return next((b.endpoint_name for b in backends if isinstance(b, SageMakerEndpoint)), "none")


Outputs = Mapping[str, Mapping[str, str]]
"""``{stack name: {output key: value}}``, the shape of ``cdk deploy --outputs-file``."""


def _output(outputs: Outputs, source: str, stack: str, key: str) -> str:
    block = outputs.get(stack)
    if not isinstance(block, Mapping):
        raise ValueError(f"{source}: no stack {stack} (stacks: {', '.join(sorted(outputs)) or 'none'})")
    if key not in block:
        raise ValueError(
            f"{source}: stack {stack} has no output {key} (its outputs: {', '.join(sorted(block)) or 'none'})"
        )
    return str(block[key])


def named_imported_models(outputs: Outputs, source: str, stack: str) -> dict[str, str]:
    """Adapter -> imported model ARN for every model the BedrockImport ``stack`` names an adapter for (its
    ``ImportedModelAdapter<Name>`` outputs, each beside its ``ImportedModelArn<Name>``); empty when the
    outputs hold no such stack. Raises ValueError (one line) on an adapter output without its ARN."""
    block = outputs.get(stack)
    if not isinstance(block, Mapping):
        return {}
    arns: dict[str, str] = {}
    for key, adapter in sorted(block.items()):
        if not key.startswith(IMPORTED_MODEL_ADAPTER_PREFIX):
            continue
        arn_key = IMPORTED_MODEL_ARN_PREFIX + key.removeprefix(IMPORTED_MODEL_ADAPTER_PREFIX)
        if arn_key not in block:
            raise ValueError(f"{source}: stack {stack} names adapter {adapter!r} in {key} but has no output {arn_key}")
        arns[str(adapter)] = str(block[arn_key])
    return arns


def config_from_outputs(
    outputs: Outputs,
    *,
    source: str,
    stage: str = "prod",
    project: str = DEFAULT_PROJECT,
    region: str | None = None,
    imported_models: Mapping[str, str] | None = None,
    foundation_model: str | None = None,
    prefix_aware_id: str | None = None,
    **options: Any,
) -> ClientConfig:
    """The client's config from stack outputs: the endpoint first, then the adapters' imported models, then
    ``foundation_model`` through Converse, as fallbacks in that order.

    The imported models: with ``imported_models`` None (the default), every one the BedrockImport stack
    names an adapter for (:func:`named_imported_models`; none when the outputs hold no BedrockImport stack);
    with a mapping, adapter -> configured model name (``bedrock.models[].name``), each of which must have its
    ARN output; ``{}``: none.

    ``options`` are further :class:`ClientConfig` fields (``mirror``, ``deadline_s``, ``retry``, ...).
    Raises ValueError with one line naming ``source``, the stack and the missing output.
    """
    serving = stack_name(project, stage, "Serving")
    primary = SageMakerEndpoint(
        _output(outputs, source, serving, ENDPOINT_NAME_OUTPUT), region=region, prefix_aware_id=prefix_aware_id
    )
    namespace = _output(outputs, source, stack_name(project, stage, "Observability"), METRICS_NAMESPACE_OUTPUT)
    fallbacks: list[BackendConfig] = []
    bedrock = stack_name(project, stage, "BedrockImport")
    if imported_models is None:
        arns = named_imported_models(outputs, source, bedrock)
    else:
        arns = {a: _output(outputs, source, bedrock, imported_model_output(n)) for a, n in imported_models.items()}
    if arns:
        fallbacks.append(BedrockImportedModels(arns))
    if foundation_model:
        fallbacks.append(BedrockFoundationModel(foundation_model, region=region))
    return ClientConfig(primary=primary, fallbacks=tuple(fallbacks), metrics_namespace=namespace, **options)


def migration_config_from_outputs(
    outputs: Outputs,
    *,
    source: str,
    foundation_model: str,
    share: float = 0.1,
    stage: str = "prod",
    project: str = DEFAULT_PROJECT,
    region: str | None = None,
    store_prompts: bool = False,
    **options: Any,
) -> ClientConfig:
    """The client's config in migration mode (docs/migration.md): Bedrock's ``foundation_model`` answers through
    Converse (substitutes allowed: it serves no adapter), the endpoint answers the ramp's share (the Migration
    stack's state parameter), ``share`` of all calls are copied to the backend that did not answer, and every
    pair goes to the Migration stack's store.

    ``options`` are further :class:`ClientConfig` fields. Raises ValueError with one line naming ``source``, the
    stack and the missing output.
    """
    serving, migration = stack_name(project, stage, "Serving"), stack_name(project, stage, "Migration")
    endpoint = SageMakerEndpoint(_output(outputs, source, serving, ENDPOINT_NAME_OUTPUT), region=region)
    store = PairStoreConfig(
        bucket=_output(outputs, source, migration, MIGRATION_STORE_BUCKET_OUTPUT),
        kms_key_arn=_output(outputs, source, migration, MIGRATION_STORE_KEY_OUTPUT),
        region=region,
        store_prompts=store_prompts,
    )
    ramp = RampConfig(_output(outputs, source, migration, MIGRATION_STATE_PARAMETER_OUTPUT), region=region)
    namespace = _output(outputs, source, stack_name(project, stage, "Observability"), METRICS_NAMESPACE_OUTPUT)
    return ClientConfig(
        primary=BedrockFoundationModel(foundation_model, region=region),
        mirror=MirrorConfig(endpoint, share=share, store=store, ramp=ramp),
        metrics_namespace=namespace,
        allow_substitute=True,
        **options,
    )


def config_from_outputs_file(path: str | Path, **kwargs: Any) -> ClientConfig:
    """:func:`config_from_outputs` of a ``cdk deploy --outputs-file`` JSON file (``cdk-outputs.json``)."""
    try:
        outputs = json.loads(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"{path}: cannot read ({error.strerror})") from None
    except ValueError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(outputs, dict):
        raise ValueError(f"{path}: expected an object of stacks")
    return config_from_outputs(outputs, source=str(path), **kwargs)


def stacks_needed(
    *, stage: str = "prod", project: str = DEFAULT_PROJECT, imported_models: Mapping[str, str] | None = None
) -> Sequence[str]:
    """The stacks :func:`config_from_outputs` must read (the BedrockImport stack only when ``imported_models``
    names models; with None it is read when it exists: :func:`config_from_stacks`)."""
    units = ("Serving", "Observability", *(("BedrockImport",) if imported_models else ()))
    return [stack_name(project, stage, unit) for unit in units]


def _stack_outputs(cloudformation: Any, name: str) -> dict[str, str]:
    stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    return {o["OutputKey"]: o.get("OutputValue", "") for o in (stacks[0].get("Outputs", []) if stacks else [])}


def _no_such_stack(error: ClientError) -> bool:
    """CloudFormation's answer to DescribeStacks of a stack that does not exist (400 ``ValidationError``)."""
    details = error.response.get("Error", {})
    return details.get("Code") == "ValidationError" and "does not exist" in str(details.get("Message", ""))


def config_from_stacks(cloudformation: Any, **kwargs: Any) -> ClientConfig:
    """:func:`config_from_outputs` of the deployed stacks' outputs, read with ``DescribeStacks`` (one call per
    stack; needs ``cloudformation:DescribeStacks``). A stack that does not exist raises botocore's error,
    except the BedrockImport stack when ``imported_models`` is None: it is optional (``bedrock.enabled``)."""
    outputs: dict[str, dict[str, str]] = {}
    wanted = {key: kwargs[key] for key in ("stage", "project", "imported_models") if key in kwargs}
    for name in stacks_needed(**wanted):
        outputs[name] = _stack_outputs(cloudformation, name)
    if kwargs.get("imported_models") is None:
        bedrock = stack_name(kwargs.get("project", DEFAULT_PROJECT), kwargs.get("stage", "prod"), "BedrockImport")
        try:
            outputs[bedrock] = _stack_outputs(cloudformation, bedrock)
        except ClientError as error:
            if not _no_such_stack(error):
                raise
    return config_from_outputs(outputs, source="DescribeStacks", **kwargs)
