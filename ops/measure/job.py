"""One capacity job: its inputs, its CreateProcessingJob request, its cost bound, and reading its result.

The layout and names are serving_contract/capacity_job.py's; the resources (role, KMS key, code asset,
image) are the Serving stack's outputs (cdk_constructs/capacity_job). A job runs the serving image on
its instance type with no network (``EnableNetworkIsolation``: the model is in the image and the sweep
talks to the engine on localhost), its volume and output encrypted with the capacity job's key.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from app_config.root import AppConfig
from app_config.throughput_config import MeasuredCurve, ThroughputConfig
from cdk_constructs.endpoint.container_environment import container_environment, model_versions_environment
from planning.instance_prices import hourly_price, price_table
from serving_contract import capacity_job as contract

PURPOSE_TAG = {"Key": "mangaassist:purpose", "Value": "capacity-measurement"}


@dataclass(frozen=True)
class JobResources:
    """What the Serving stack made for the capacity jobs (its outputs; serving_contract/capacity_job.py)."""

    role_arn: str
    code_uri: str
    kms_key_arn: str
    image_uri: str
    bucket: str


@dataclass(frozen=True)
class CostBound:
    """The most one job can cost: the instance's on-demand price for the job's maximum runtime."""

    instance_type: str
    usd_per_hour: float
    max_runtime_s: int
    source: str

    @property
    def usd(self) -> float:
        return self.usd_per_hour * self.max_runtime_s / 3600

    @property
    def line(self) -> str:
        return (
            f"{self.instance_type}: at most {self.max_runtime_s / 3600:g} h x ${self.usd_per_hour:.3f}/h = "
            f"${self.usd:,.2f} (throughput.job.max_runtime_s {self.max_runtime_s} s; price: {self.source})"
        )


def cost_bound(config: AppConfig, instance_type: str) -> CostBound:
    """The job's cost bound on ``instance_type`` (planning/instance_prices.py, or scaling.hourly_price_usd).

    Raises:
        ValueError: the instance type has no price (one line naming how to add it).
    """
    price = hourly_price(instance_type, config.scaling.hourly_price_usd)
    if instance_type in config.scaling.hourly_price_usd:
        source = f"scaling.hourly_price_usd.{instance_type}"
    else:
        source = f"planning/instance_prices.json as of {price_table()['as_of']}" + (
            ", approximate" if price.approximate else ""
        )
    return CostBound(instance_type, price.usd_per_hour, config.throughput.job.max_runtime_s, source)


def sweep_file(config: AppConfig) -> contract.SweepFile:
    """The sweep the job runs (``runtime.measure --sweep-file``): ``throughput.job``'s rates and step,
    ``traffic``'s pause and request shape, ``slo``'s objectives."""
    shape = config.traffic.request_shape
    return contract.SweepFile(
        rates_per_minute=tuple(config.throughput.job.rates_per_minute),
        step_s=config.throughput.job.step_s,
        think_s=config.traffic.think_s,
        slo_ms=config.slo.ttft_p95_ms(),
        warm_min_cached_fraction=config.slo.warm_min_cached_fraction,
        shape=contract.SweepShape(
            shared_prefix_tokens=shape.system_prefix_tokens,
            conversation_tokens=shape.conversation_tokens,
            turn_tokens=shape.turn_tokens,
            output_tokens=shape.output_tokens,
        ),
    )


def environment_file(config: AppConfig) -> dict[str, str]:
    """The primary variant's container environment, as its SageMaker model has it (engine argv, memory plan,
    adapters, versions): the job serves what the endpoint would."""
    return {
        **container_environment(config),
        **model_versions_environment(config, "primary"),
        "VARIANT_NAME": config.serving.primary.variant_name,
    }


def s3_uri(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def create_request(
    throughput: ThroughputConfig, resources: JobResources, instance_type: str, name: str
) -> dict[str, Any]:
    """CreateProcessingJob's arguments for one job (botocore's SageMaker model names every field)."""
    prefix = contract.job_prefix(name)
    code_zip = resources.code_uri.rsplit("/", 1)[-1]
    job = throughput.job
    return {
        "ProcessingJobName": name,
        "RoleArn": resources.role_arn,
        "AppSpecification": {
            "ImageUri": resources.image_uri,
            "ContainerEntrypoint": [contract.IMAGE_PYTHON, "-m", contract.ENTRY_MODULE],
            "ContainerArguments": [
                "--environment-file",
                f"{contract.INPUT_DIR}/{contract.ENVIRONMENT_FILE}",
                "--sweep-file",
                f"{contract.INPUT_DIR}/{contract.SWEEP_FILE}",
                "--output-dir",
                contract.OUTPUT_DIR,
                "--instance-type",
                instance_type,
                "--job-name",
                name,
            ],
        },
        # The code zip first (runtime.measure and the modules it names), then the image's own /opt/app.
        "Environment": {
            "PYTHONPATH": f"{contract.CODE_DIR}/{code_zip}:{contract.IMAGE_PYTHONPATH}",
            "PYTHONUNBUFFERED": "1",
        },
        "ProcessingInputs": [
            _input("code", resources.code_uri, contract.CODE_DIR),
            _input("sweep", s3_uri(resources.bucket, f"{prefix}/input/"), contract.INPUT_DIR),
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "result",
                    "S3Output": {
                        "S3Uri": s3_uri(resources.bucket, f"{prefix}/output"),
                        "LocalPath": contract.OUTPUT_DIR,
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ],
            "KmsKeyId": resources.kms_key_arn,
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": 1,
                "InstanceType": instance_type,
                "VolumeSizeInGB": job.volume_size_gb,
                "VolumeKmsKeyId": resources.kms_key_arn,
            }
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": job.max_runtime_s},
        "NetworkConfig": {"EnableNetworkIsolation": True},
        "Tags": [PURPOSE_TAG],
    }


def _input(name: str, uri: str, local_path: str) -> dict[str, Any]:
    return {
        "InputName": name,
        "S3Input": {"S3Uri": uri, "LocalPath": local_path, "S3DataType": "S3Prefix", "S3InputMode": "File"},
    }


def upload_inputs(s3: Any, config: AppConfig, resources: JobResources, name: str) -> list[str]:
    """Put the job's environment and sweep files under its input folder (SSE-KMS with the job's key);
    returns their keys."""
    prefix = contract.job_prefix(name)
    keys = []
    for file, body in (
        (contract.ENVIRONMENT_FILE, environment_file(config)),
        (contract.SWEEP_FILE, sweep_file(config).to_json()),
    ):
        key = f"{prefix}/input/{file}"
        s3.put_object(
            Bucket=resources.bucket,
            Key=key,
            Body=json.dumps(body).encode(),
            ServerSideEncryption="aws:kms",
            SSEKMSKeyId=resources.kms_key_arn,
        )
        keys.append(key)
    return keys


def read_result(s3: Any, resources: JobResources, name: str) -> MeasuredCurve:
    """The finished job's ``capacity.json``, validated as ``throughput.measured`` validates it.

    Raises:
        ValueError: the file is not a curve this version reads (one line).
    """
    key = f"{contract.job_prefix(name)}/output/{contract.RESULT_FILE}"
    body = s3.get_object(Bucket=resources.bucket, Key=key)["Body"].read()
    try:
        # The contract's shape first (what the job wrote), then the bounds throughput.measured holds it to.
        return MeasuredCurve.model_validate(contract.CapacityResult.from_json(json.loads(body)).to_json())
    except ValueError as error:
        first = str(error).splitlines()
        raise ValueError(f"{s3_uri(resources.bucket, key)}: not a capacity curve ({' '.join(first[:3])})") from None


def new_job_name(config: AppConfig, instance_type: str, now: dt.datetime) -> str:
    """``capacity-<endpoint>-<type>-<UTC stamp>`` (serving_contract/capacity_job.py)."""
    return contract.job_name(config.endpoint_name, instance_type, now)
