"""The capacity job's contract (issue 46): what ``python -m ops capacity measure``, the job's construct
and the job's entrypoint share. Standard library only.

The job is a SageMaker processing job that runs the serving image on a candidate instance type: the
image's own server (``python -m serving_app serve``, the container's engine argv and the variant's
memory plan from its environment file) and, against the engine inside it, the open-loop sweep of
``cli_support/open_loop.py`` (conversations arriving at random, users pausing between turns). Its
result, one JSON file, is what ``capacity.measured.<instance type>`` accepts.

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
from typing import Final

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

# CloudFormation outputs of the Serving stack that ``ops capacity measure`` reads.
OUTPUT_ROLE_ARN: Final = "CapacityJobRoleArn"
OUTPUT_CODE_URI: Final = "CapacityJobCodeUri"
OUTPUT_KMS_KEY_ARN: Final = "CapacityJobKmsKeyArn"
"""The job's key, by ARN: CreateProcessingJob must pass this ARN (not the key id or an alias) as both
``ProcessingResources.ClusterConfig.VolumeKmsKeyId`` and ``ProcessingOutputConfig.KmsKeyId``, name the job with
:func:`job_name` and set ``StoppingCondition.MaxRuntimeInSeconds`` at most ``capacity.job.max_runtime_s`` as
deployed: the operator policy refuses any other job (IAM condition keys ``sagemaker:VolumeKmsKey``,
``sagemaker:OutputKmsKey``, ``sagemaker:MaxRuntimeInSeconds``)."""
OUTPUT_IMAGE_URI: Final = "CapacityJobImageUri"
OUTPUT_BUCKET: Final = "CapacityJobBucketName"
OUTPUT_OPERATOR_POLICY_ARN: Final = "CapacityJobOperatorPolicyArn"
"""The managed policy an operator's role attaches to run ``ops capacity measure`` (CapacityMeasureOperator)."""
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
