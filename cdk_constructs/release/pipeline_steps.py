"""What every release pipeline step is built from: the jobs' folders and interpreters, the deploy-time targets,
the SageMaker Python SDK's workflow modules (imported offline), and the helpers that make a Processing step
run ``python -m runtime.<step>`` from the runtime code asset (``pipeline_definition.py`` puts the steps
together).

Offline: the SDK needs no credentials to write a definition, but importing ``sagemaker.mlops`` creates a
boto3 client (``sagemaker.ai_registry.air_hub``), which needs a region: :func:`sdk` gives it one when
the environment has none, and the session is built on a boto3 session with a fixed region and no
credentials. Deploy-time values (bucket, images, the code asset) are pipeline parameters whose default
values are CDK tokens: the SDK parses S3 URIs it is given literally, and a token's brackets are not a URI.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from serving_contract.model_artifacts import RELEASE_SCRATCH_PREFIX

PROCESSING: Final = "/opt/ml/processing"
CODE_DIR: Final = f"{PROCESSING}/input/code"
MODEL_DIR: Final = f"{PROCESSING}/input/model"
ADAPTERS_DIR: Final = f"{PROCESSING}/input/adapters"
EVAL_DIR: Final = f"{PROCESSING}/input/eval"
ANSWERS_DIR: Final = f"{PROCESSING}/input/answers"
BASELINE_ANSWERS_DIR: Final = f"{PROCESSING}/input/baseline-answers"
CATALOG_DIR: Final = f"{PROCESSING}/input/catalog"

CALIBRATION_DIR: Final = f"{PROCESSING}/input/calibration"
OUTPUT_DIR: Final = f"{PROCESSING}/output"
VALIDATION_FILE: Final = "validation.json"
ROLE_PLACEHOLDER: Final = "arn:aws:iam::000000000000:role/release-pipeline-role"
"""Written for the role while the SDK builds the steps, then replaced by the role's ARN: the SDK looks a role
up in IAM unless its text holds a '/' (``Session.expand_role``), and a CDK token's text has none."""
EVALUATE_ROLE_PLACEHOLDER: Final = "arn:aws:iam::000000000000:role/release-evaluate-role"
"""The same for the Evaluate step's own role (:attr:`ReleaseTargets.evaluate_role_arn`)."""
IMAGE_PYTHONPATH: Final = "/opt/app"
"""The serving image's own ``PYTHONPATH`` (container/Dockerfile: ``serving_app``, ``serving_contract``). A job's
environment replaces the image's, so each step's ``PYTHONPATH`` names it after the code zip: the load test's
``--serve`` runs ``python -m serving_app serve`` from it (the tools image is built FROM the serving image)."""
SERVING_PYTHON: Final = "/opt/venv/bin/python"
"""The serving image's interpreter (container/Dockerfile: ``/opt/venv``): the load test runs the server with it."""
TOOLS_PYTHON: Final = "/opt/release-venv/bin/python"
"""The tools image's release virtualenv (``runtime/Dockerfile``: llm-compressor, sacrebleu, transformers 5)."""


@dataclass(frozen=True)
class ReleaseTargets:
    """What the pipelines act on. Strings may be CDK tokens (see the module docstring).

    Attributes:
        role_arn: the pipeline's and its jobs' execution role (every step's but Evaluate's).
        evaluate_role_arn: the Evaluate step's job role: the only step with network (the judge), so it may not
            register model packages, start jobs or pass roles (issue 53, finding 9).
        bucket_name: the model-artifacts bucket (``<prefix>/<name>/<version>/`` folders, reports).
        code_s3_uri: the runtime code asset, a zip (``s3://.../<hash>.zip``).
        code_zip_name: the zip's object name, as downloaded into ``CODE_DIR``.
        tools_image_uri / serving_image_uri: the images the steps run.
        serving_instance_type: the load test's instance (the primary variant's).
        base_model_name: ``model.name``; adapters: ``model.adapters`` names.
        max_lora_rank: ``engine.max_lora_rank``.
        engine_environment: the serving model's container environment (engine settings), so the
            load test serves as the endpoint does.
        base_models_prefix / adapters_prefix: the bucket's folders (``image.build``).
        model_package_groups: kind -> model package group name.
    """

    role_arn: str
    evaluate_role_arn: str
    bucket_name: str
    code_s3_uri: str
    code_zip_name: str
    tools_image_uri: str
    serving_image_uri: str
    serving_instance_type: str
    base_model_name: str
    adapters: Sequence[str]
    max_lora_rank: int
    base_models_prefix: str
    adapters_prefix: str
    model_package_groups: Mapping[str, str]
    engine_environment: Mapping[str, str] = field(default_factory=dict)


def sdk() -> Any:
    """The SDK's workflow modules (imported here: a synth without the release stack does not pay for them)."""
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # module docstring: import-time client
    # The SDK logs at import and per step what concerns its interactive use (config files it did not find,
    # job names it drops, "no job being started"): nothing a synth's reader can act on.
    for logger in ("sagemaker", "sagemaker.config"):  # the SDK sets sagemaker.config to INFO when unset
        logging.getLogger(logger).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _import_sdk()


def _import_sdk() -> Any:
    import boto3  # noqa: PLC0415 - see _sdk
    from sagemaker.core import network, processing, shapes  # noqa: PLC0415 - see _sdk
    from sagemaker.core.workflow import conditions, execution_variables, functions, parameters, properties  # noqa: PLC0415 - see _sdk
    from sagemaker.core.workflow.pipeline_context import PipelineSession  # noqa: PLC0415 - see _sdk
    from sagemaker.mlops import workflow  # noqa: PLC0415 - see _sdk

    session = PipelineSession(
        boto_session=boto3.Session(region_name="us-east-1", aws_access_key_id="offline", aws_secret_access_key="x"),
        default_bucket="offline-synth",  # never used: every output names its S3 URI
    )
    return {
        "session": session,
        "network": network,
        "processing": processing,
        "shapes": shapes,
        "conditions": conditions,
        "execution_variables": execution_variables,
        "functions": functions,
        "parameters": parameters,
        "properties": properties,
        "workflow": workflow,
    }


class StepBuilder:
    """Makes Processing steps of one pipeline: the SDK handles, the targets, and the two parameters every
    step reads (the artifacts bucket and the runtime code asset)."""

    def __init__(self, targets: ReleaseTargets) -> None:
        self.targets = targets
        self.sdk = sdk()
        p = self.sdk["parameters"]
        self.bucket = p.ParameterString(name="ArtifactsBucket", default_value=targets.bucket_name)
        self.code = p.ParameterString(name="RuntimeCodeS3Uri", default_value=targets.code_s3_uri)

    def join(self, *values: Any, on: str = "") -> Any:
        return self.sdk["functions"].Join(on=on, values=list(values))

    def s3_folder(self, prefix: str, name: Any, version: Any) -> Any:
        """``s3://<bucket>/<prefix>/<name>/<version>/`` (serving_contract/model_artifacts.py's layout)."""
        return self.join("s3://", self.bucket, f"/{prefix}/", name, "/", version, "/")

    def report_uri(self, step: str) -> Any:
        """Where a step's output goes: ``s3://<bucket>/release-reports/<pipeline execution id>/<step>``.

        No trailing slash: a job uploads each file to ``<S3Uri>/<name>``, and the register step names the report
        ``Join(on="/", [<S3Uri>, "evaluation.json"])``, as the SageMaker developer guide's model-metrics example
        does; a trailing slash would make that key ``...//evaluation.json``, another object."""
        execution = self.sdk["execution_variables"].ExecutionVariables.PIPELINE_EXECUTION_ID
        return self.join("s3://", self.bucket, "/release-reports/", execution, f"/{step}")

    def scratch_uri(self, step: str) -> Any:
        """Where a step's intermediate output goes: ``s3://<bucket>/release-scratch/<pipeline execution id>/<step>``
        (the quantized checkpoint before the gates; the bucket's lifecycle rule expires the prefix)."""
        execution = self.sdk["execution_variables"].ExecutionVariables.PIPELINE_EXECUTION_ID
        return self.join("s3://", self.bucket, f"/{RELEASE_SCRATCH_PREFIX}/", execution, f"/{step}")

    def input(self, name: str, uri: Any, local_path: Any) -> Any:
        shapes = self.sdk["shapes"]
        return shapes.ProcessingInput(
            input_name=name,
            s3_input=shapes.ProcessingS3Input(
                s3_uri=uri, local_path=local_path, s3_data_type="S3Prefix", s3_input_mode="File"
            ),
        )

    def output(self, name: str, uri: Any, local_path: str = OUTPUT_DIR) -> Any:
        shapes = self.sdk["shapes"]
        return shapes.ProcessingOutput(
            output_name=name,
            s3_output=shapes.ProcessingS3Output(s3_uri=uri, local_path=local_path, s3_upload_mode="EndOfJob"),
        )

    def processing_step(
        self,
        name: str,
        *,
        module: str,
        image: Any,
        python: str,
        instance_type: str,
        volume_gb: int,
        max_runtime_s: int,
        inputs: list[Any],
        outputs: list[Any],
        arguments: list[Any],
        environment: Mapping[str, str] | None = None,
        property_files: list[Any] | None = None,
        isolated: bool = True,
        role: str = ROLE_PLACEHOLDER,
    ) -> Any:
        """A Processing step running ``python -m runtime.<module>`` from the code asset.

        ``isolated`` (the default) runs its container with no network at all
        (``NetworkConfig.EnableNetworkIsolation``; SageMaker still downloads the inputs and uploads the
        outputs): a step that only reads its inputs can send nothing anywhere, whatever a package in the
        image does (issue 49, finding 6). Only a step that calls a service (the judge) passes False. ``role`` is the
        job's role placeholder (:data:`ROLE_PLACEHOLDER`, or :data:`EVALUATE_ROLE_PLACEHOLDER`).
        """
        processor = self.sdk["processing"].Processor(
            role=role,
            image_uri=image,
            instance_count=1,
            instance_type=instance_type,
            volume_size_in_gb=volume_gb,
            max_runtime_in_seconds=max_runtime_s,
            entrypoint=[python, "-m", f"runtime.{module}"],
            env={
                **(environment or {}),
                # The asset is a zip holding runtime/: Python imports from it (zipimport).
                "PYTHONPATH": f"{CODE_DIR}/{self.targets.code_zip_name}:{IMAGE_PYTHONPATH}",
                "PYTHONUNBUFFERED": "1",
            },
            sagemaker_session=self.sdk["session"],
            network_config=self.sdk["network"].NetworkConfig(enable_network_isolation=isolated),
        )
        step_args = processor.run(
            inputs=[self.input("code", self.code, CODE_DIR), *inputs], outputs=outputs, arguments=arguments
        )
        return self.sdk["workflow"].ProcessingStep(name=name, step_args=step_args, property_files=property_files)
