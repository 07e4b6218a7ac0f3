"""The capacity job's contract (issue 46): what ``python -m ops throughput measure``, the job's construct
and the job's entrypoint share. Standard library only.

The job is a SageMaker processing job that runs the serving image on a candidate instance type: the
image's own server (``python -m serving_app serve``, the container's engine argv and the variant's
memory plan from its environment file) and, against the engine inside it, the open-loop sweep of
``cli_support/open_loop.py`` (conversations arriving at random, users pausing between turns). Its
result, one JSON file, is what ``throughput.measured.<instance type>`` accepts.

Layout in the model-artifacts bucket::

    capacity-measurements/<job name>/input/environment.json   the model's container environment
    capacity-measurements/<job name>/input/sweep.json          the sweep's steps and request shape
    capacity-measurements/<job name>/output/capacity.json      the result (RESULT_FILE)

The job's code (``cdk_constructs/capacity_job/runtime`` and the modules it imports, one zip) is a CDK
asset the Serving stack publishes (output ``CapacityJobCodeUri``).

The Serving stack has the job's infrastructure (``cdk_constructs/capacity_job``) whenever the app has a
model-artifacts bucket: the job's role (it reads ``*/input/*`` and the code zip, writes ``*/output/*``, pulls
the serving images, logs to /aws/sagemaker/ProcessingJobs), a KMS key for the job's volume and output, and
the managed policy an operator's role attaches to start, watch and stop the jobs of this endpoint
(``CapacityJobOperatorPolicyArn``).
"""

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, TypeVar

T = TypeVar("T")

S3_ROOT: Final = "capacity-measurements"
"""The bucket prefix every capacity job reads and writes under, and nothing else."""

PROCESSING: Final = "/opt/ml/processing"
CODE_DIR: Final = f"{PROCESSING}/input/code"
INPUT_DIR: Final = f"{PROCESSING}/input/sweep"
OUTPUT_DIR: Final = f"{PROCESSING}/output"
ENVIRONMENT_FILE: Final = "environment.json"
SWEEP_FILE: Final = "sweep.json"
RESULT_FILE: Final = "capacity.json"
INPUT_FOLDER: Final = "input"
"""``<job prefix>/input/``: what the operator uploads and the job reads (environment and sweep files)."""
OUTPUT_FOLDER: Final = "output"
"""``<job prefix>/output/``: what the job writes and the operator reads (the result)."""

ENTRY_MODULE: Final = "runtime.measure"
"""``python -m runtime.measure``: the job's entrypoint in its code zip."""
IMAGE_PYTHON: Final = "/opt/venv/bin/python"
"""The serving image's interpreter (container/Dockerfile: ``/opt/venv``, vLLM and aiohttp installed)."""
IMAGE_PYTHONPATH: Final = "/opt/app"
"""The serving image's ``PYTHONPATH`` (``serving_app``, ``serving_contract``); a job's environment
replaces the image's, so the job names it after its code zip."""

RESULT_FORMAT: Final = "mangaassist-capacity/1"
"""``format`` of a result: the shape ``app_config.throughput_config.MeasuredCurve`` validates."""

JOB_NAME_PREFIX: Final = "capacity"
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""CreateProcessingJob's ProcessingJobName pattern and length (botocore's SageMaker model)."""
_NAME_HEAD_MAX = 63 - len("YYYYmmdd-HHMMSS") - 1
"""Characters :func:`job_name` keeps before ``-<stamp>``."""

# CloudFormation outputs of the Serving stack that ``ops throughput measure`` reads.
OUTPUT_ROLE_ARN: Final = "CapacityJobRoleArn"
OUTPUT_CODE_URI: Final = "CapacityJobCodeUri"
OUTPUT_KMS_KEY_ARN: Final = "CapacityJobKmsKeyArn"
"""The job's key, by ARN: CreateProcessingJob must pass this ARN (not the key id or an alias) as both
``ProcessingResources.ClusterConfig.VolumeKmsKeyId`` and ``ProcessingOutputConfig.KmsKeyId``, name the job with
:func:`job_name` and set ``StoppingCondition.MaxRuntimeInSeconds`` at most ``throughput.job.max_runtime_s`` as
deployed: the operator policy refuses any other job (IAM condition keys ``sagemaker:VolumeKmsKey``,
``sagemaker:OutputKmsKey``, ``sagemaker:MaxRuntimeInSeconds``)."""
OUTPUT_IMAGE_URI: Final = "CapacityJobImageUri"
OUTPUT_BUCKET: Final = "CapacityJobBucketName"
OUTPUT_OPERATOR_POLICY_ARN: Final = "CapacityJobOperatorPolicyArn"
"""The managed policy an operator's role attaches to run ``ops throughput measure`` (CapacityMeasureOperator)."""
OUTPUTS_KNOWN_AT_SYNTH_ONLY: Final = (OUTPUT_IMAGE_URI, OUTPUT_BUCKET)
"""Present only when their value is a literal at synth: an output may not re-export another stack's export
(cfn-lint W6001), and both usually come from another stack. Where absent:

- ``CapacityJobBucketName``: the bucket is the ModelArtifacts stack's output ``ModelArtifactsBucketName``
  (present when ``image.build.artifacts_bucket_name`` names an existing bucket: then it is that name);
- ``CapacityJobImageUri``: the image is in the app's repository, ``<ImageRepositoryUri>:<PrimaryImageTag>``
  (the ImageRepository and ImageBuild stacks' outputs) with ``image.source = build``, or ``image.primary``'s
  tag or digest on ``ImageRepositoryUri`` when prebuilt (present when ``image.primary.uri`` names the image).
  The deployed primary model's image (DescribeModel, or DescribeInferenceComponent of the base component)
  is the same URI."""


def job_name(endpoint_name: str, instance_type: str, now: dt.datetime) -> str:
    """``capacity-<endpoint>-<type>-<UTC stamp>``, cut to SageMaker's 63 characters from the left.

    ``ml.g6e.xlarge`` becomes ``g6e-xlarge``; the stamp (``YYYYMMDD-HHMMSS``) keeps two jobs apart.

    Raises:
        ValueError: the name would break CreateProcessingJob's pattern (one line naming it).
    """
    kind = instance_type.removeprefix("ml.").replace(".", "-")
    stamp = now.astimezone(dt.UTC).strftime("%Y%m%d-%H%M%S")
    head = f"{JOB_NAME_PREFIX}-{endpoint_name}-{kind}"[: 63 - len(stamp) - 1].rstrip("-")
    name = f"{head}-{stamp}"
    if not _JOB_NAME.match(name):
        raise ValueError(f"capacity job name {name!r} breaks SageMaker's ProcessingJobName pattern")
    return name


def job_prefix(name: str) -> str:
    """``capacity-measurements/<job name>``: the job's folder in the bucket."""
    return f"{S3_ROOT}/{name}"


def job_name_pattern(endpoint_name: str) -> str:
    """The IAM resource-name pattern (``*`` a wildcard) every :func:`job_name` of ``endpoint_name`` matches,
    lower-case as SageMaker writes names in ARNs: ``capacity-<endpoint>-*``, or, when :func:`job_name` cuts
    into the endpoint's name, its first characters and ``*``."""
    head = f"{JOB_NAME_PREFIX}-{endpoint_name}-"
    return (head if len(head) <= _NAME_HEAD_MAX else head[:_NAME_HEAD_MAX].rstrip("-")).lower() + "*"


# The job's two files, typed: what ``ops throughput measure`` writes and the job reads (SweepFile, sweep.json), and
# what the job writes and ``ops throughput measure`` reads (CapacityResult, capacity.json). Each side builds or parses
# the same dataclass, so a field renamed on one side fails both sides' tests, not a job in an account.


def _field(data: Mapping[str, Any], name: str, kind: Callable[[Any], T], where: str) -> T:
    """``data[name]`` converted by ``kind``.

    Raises:
        ValueError: missing or of the wrong kind: ``<where>: <name>: <what went wrong>`` (one line).
    """
    if name not in data:
        raise ValueError(f"{where}: {name}: missing")
    try:
        return kind(data[name])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {name}: {error.__class__.__name__}: {error}") from None


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class SweepShape:
    """The conversations' request shape, tokens (``traffic.request_shape``; cli_support's ``RequestShape``)."""

    shared_prefix_tokens: int
    conversation_tokens: int
    turn_tokens: int
    output_tokens: int

    @classmethod
    def from_json(cls, data: Any, where: str = "shape") -> "SweepShape":
        """Raises ValueError (one line) on a missing or bad field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: must be a JSON object")
        return cls(**{name: _field(data, name, int, where) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class SweepFile:
    """``sweep.json``: the open-loop sweep a job runs.

    Attributes:
        rates_per_minute: the offered arrival rates, requests per minute, increasing (``throughput.job``).
        step_s: seconds per rate, the first quarter settling (``throughput.job.step_s``).
        think_s: mean pause between a conversation's turns, seconds (``traffic.think_s``).
        slo_ms: TTFT p95 objective per request class, ms (``slo.<class>.ttft_p95_ms``).
        warm_min_cached_fraction: the share of a prompt the prefix cache must hold for a follow-up to count as
            warm (``slo.warm_min_cached_fraction``).
        shape: the request shape.
        drain_s: seconds the sweep waits for answers still out after the last rate.
    """

    rates_per_minute: tuple[float, ...]
    step_s: float
    think_s: float
    slo_ms: dict[str, float]
    warm_min_cached_fraction: float
    shape: SweepShape
    drain_s: float = 20.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "rates_per_minute": list(self.rates_per_minute)}

    @classmethod
    def from_json(cls, data: Any, where: str = "sweep file") -> "SweepFile":
        """Raises ValueError (one line naming the field) on a missing or bad one."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: must be a JSON object")
        slo = _field(data, "slo_ms", dict, where)
        return cls(
            rates_per_minute=_field(data, "rates_per_minute", lambda v: tuple(float(rate) for rate in v), where),
            step_s=_field(data, "step_s", float, where),
            think_s=_field(data, "think_s", float, where),
            slo_ms={klass: _field(slo, klass, float, f"{where}: slo_ms") for klass in ("cold", "warm")},
            warm_min_cached_fraction=_field(data, "warm_min_cached_fraction", float, where),
            shape=SweepShape.from_json(_field(data, "shape", dict, where), f"{where}: shape"),
            drain_s=float(data.get("drain_s", cls.drain_s)),
        )


@dataclass(frozen=True)
class ClassResult:
    """One request class at one rate: requests, TTFT p50 and p95 in ms (None without requests)."""

    requests: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None

    @classmethod
    def from_json(cls, data: Any, where: str) -> "ClassResult":
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: must be a JSON object")
        return cls(
            requests=_field(data, "requests", int, where),
            ttft_p50_ms=_optional_float(data.get("ttft_p50_ms")),
            ttft_p95_ms=_optional_float(data.get("ttft_p95_ms")),
        )


@dataclass(frozen=True)
class StepResult:
    """One offered rate of the sweep (cli_support/open_loop.py's StepSummary, trimmed).

    Attributes:
        requests_per_minute / served_per_minute / completed_per_minute: offered, answered, finished, per minute.
        requests / errors: sent in the measured window, and of those answered with an error.
        cold / warm: the two request classes.
        running_mean: vLLM's ``num_requests_running``, mean over the window (None: not sampled).
        kv_cache_usage_mean: vLLM's ``kv_cache_usage_perc`` (0-1), mean over the window (None: not sampled).
    """

    requests_per_minute: float
    served_per_minute: float
    completed_per_minute: float
    requests: int
    errors: int
    cold: ClassResult
    warm: ClassResult
    running_mean: float | None = None
    kv_cache_usage_mean: float | None = None

    @classmethod
    def from_json(cls, data: Any, where: str) -> "StepResult":
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: must be a JSON object")
        return cls(
            **{name: _field(data, name, float, where) for name in STEP_RATES},
            requests=_field(data, "requests", int, where),
            errors=_field(data, "errors", int, where),
            cold=ClassResult.from_json(data.get("cold"), f"{where}: cold"),
            warm=ClassResult.from_json(data.get("warm"), f"{where}: warm"),
            running_mean=_optional_float(data.get("running_mean")),
            kv_cache_usage_mean=_optional_float(data.get("kv_cache_usage_mean")),
        )


STEP_RATES: Final = ("requests_per_minute", "served_per_minute", "completed_per_minute")


@dataclass(frozen=True)
class CapacityResult:
    """``capacity.json``: one instance type measured by the job, in the shape ``throughput.measured.<instance type>``
    accepts (app_config/throughput_config.py ``MeasuredCurve`` checks its bounds).

    Attributes:
        instance_type / date / job / gpu: what ran, the day (UTC), the processing job and the GPU it saw.
        think_s: mean pause between turns, seconds.
        engines: engines on the instance (data parallel).
        steps: the sweep's steps, in increasing offered rate.
        cliff_per_minute: the first offered rate whose TTFT p95 reached twice the highest SLO (None: not reached).
        format: :data:`RESULT_FORMAT`.
    """

    instance_type: str
    date: dt.date
    job: str
    gpu: str
    think_s: float
    engines: int
    steps: tuple[StepResult, ...]
    cliff_per_minute: float | None
    format: str = RESULT_FORMAT

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "date": self.date.isoformat(), "steps": [asdict(step) for step in self.steps]}

    @classmethod
    def from_json(cls, data: Any, where: str = "capacity result") -> "CapacityResult":
        """Raises ValueError (one line naming the field) on a missing or bad one, or another format."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: must be a JSON object")
        if data.get("format") != RESULT_FORMAT:
            raise ValueError(f"{where}: format = {data.get('format')!r}: this version reads {RESULT_FORMAT!r}")
        # In the fields' order, so the first missing one is named.
        instance_type = _field(data, "instance_type", str, where)
        date = _field(data, "date", dt.date.fromisoformat, where)
        job = _field(data, "job", str, where)
        think_s = _field(data, "think_s", float, where)
        steps = _field(data, "steps", list, where)
        return cls(
            instance_type=instance_type,
            date=date,
            job=job,
            gpu=str(data.get("gpu", "")),
            think_s=think_s,
            engines=int(data.get("engines", 1)),
            steps=tuple(StepResult.from_json(step, f"{where}: steps[{i}]") for i, step in enumerate(steps)),
            cliff_per_minute=_optional_float(data.get("cliff_per_minute")),
        )
