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

# CloudFormation outputs of the Serving stack that ``ops capacity measure`` reads.
OUTPUT_ROLE_ARN: Final = "CapacityJobRoleArn"
OUTPUT_CODE_URI: Final = "CapacityJobCodeUri"
OUTPUT_KMS_KEY_ARN: Final = "CapacityJobKmsKeyArn"
OUTPUT_IMAGE_URI: Final = "CapacityJobImageUri"
OUTPUT_BUCKET: Final = "CapacityJobBucketName"


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
