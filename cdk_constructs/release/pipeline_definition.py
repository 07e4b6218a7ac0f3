"""The release pipelines' definitions, written at synth by the SageMaker Python SDK 3.x (``sagemaker.mlops.workflow``).

Two pipelines, one run per version (seed 000 §5, "CI/CD Pipeline For Model Updates"):

- ``base_model``: [Quantize] -> Validate -> LoadTest (and BaselineLoadTest) -> Evaluate -> Gates -> [Publish ->]
  Register | GateFailed;
- ``adapter``: Validate -> LoadTest -> Evaluate -> Gates -> Register | GateFailed.

Quantize, Validate and Evaluate run the tools image (``release.tools_image_tag``: the serving image's
environment plus llm-compressor and sacrebleu); LoadTest runs the serving image itself on the serving
instance type, and BaselineLoadTest the same on the unquantized source (the BF16 answers the drop gates read,
``release.baseline_drop_gates``). Each runs ``python3 -m runtime.<step>`` from the runtime code asset (a zip on the
``PYTHONPATH``, ``runtime/``). Gates is a condition step on the evaluate report's ``passed``; GateFailed
is a fail step whose message is the report's ``summary`` (each failing metric, its value and its
threshold). Quantize writes to the run's scratch folder, and Publish, after the gates, copies the checkpoint into
its version folder and checks it against the digest Validate computed (issue 53, finding 14: a quantized
checkpoint used to land in the version folder before the gates, and a failed run left it there). Register is a
``RegisterModel`` step: a model package in the kind's model package group,
with the evaluation report as its model-quality statistics and the pin in its customer metadata.

The steps are made with ``pipeline_steps.py`` (the SDK, offline; the jobs' folders; the targets).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any, Final, Literal

from app_config.release import ReleaseConfig
from cdk_constructs.release.pipeline_steps import (
    ADAPTERS_DIR,
    ANSWERS_DIR,
    BASELINE_ANSWERS_DIR,
    CALIBRATION_DIR,
    CATALOG_DIR,
    EVAL_DIR,
    EVALUATE_ROLE_PLACEHOLDER,
    MODEL_DIR,
    OUTPUT_DIR,
    ROLE_PLACEHOLDER,
    SERVING_PYTHON,
    TOOLS_PYTHON,
    VALIDATION_FILE,
    ReleaseTargets,
    StepBuilder,
)
from cdk_constructs.release.runtime.load_test import ANSWERS_FILE
from serving_contract.quality_gates import REPORT_FILE

ReleaseKind = Literal["base_model", "adapter"]

BASELINE_LOAD_REQUESTS: Final = 1
"""Load requests of the BaselineLoadTest step: the baseline is there for its answers, not its throughput."""


def _folder(step: str) -> str:
    """A step's folder under ``release-reports/<execution>/``: ``LoadTest`` -> ``load-test``."""
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in step).lstrip("-")


class _Builder(StepBuilder):
    """Builds one pipeline's steps; a class only to share the SDK handles and the parameters."""

    def __init__(self, kind: ReleaseKind, targets: ReleaseTargets, release: ReleaseConfig) -> None:
        super().__init__(targets)
        self.kind, self.release = kind, release
        p = self.sdk["parameters"]
        self.tools_image = p.ParameterString(name="ToolsImageUri", default_value=targets.tools_image_uri)
        self.serving_image = p.ParameterString(name="ServingImageUri", default_value=targets.serving_image_uri)
        self.eval_set = p.ParameterString(name="EvalSetS3Uri")
        self.catalog = p.ParameterString(name="TitleCatalogS3Uri")
        self.base_version = p.ParameterString(name="BaseModelVersion")
        self.parameters = [
            self.bucket,
            self.code,
            self.tools_image,
            self.serving_image,
            self.eval_set,
            self.catalog,
            self.base_version,
        ]
        # A base release's drop gates judge it against the unquantized source it was made from: the Quantize
        # step's input, or, when the checkpoint was quantized elsewhere, the BF16 folder the run names.
        self.has_baseline = kind == "base_model" and bool(release.baseline_drop_gates)
        if kind == "base_model":
            self.source_model = p.ParameterString(name="SourceModelS3Uri")
            self.parameters.append(self.source_model)
            if release.quantize.enabled:
                self.calibration = p.ParameterString(name="CalibrationS3Uri")
                self.parameters.append(self.calibration)
            elif self.has_baseline:
                self.baseline_model = p.ParameterString(name="BaselineModelS3Uri")
                self.parameters.append(self.baseline_model)
        else:
            self.adapter = p.ParameterString(name="AdapterName")
            self.adapter_version = p.ParameterString(name="AdapterVersion")
            self.parameters += [self.adapter, self.adapter_version]

    # -- steps -----------------------------------------------------------------------------------------

    def model_uri(self) -> Any:
        """The released (base) or served-with (adapter) base model's folder."""
        return self.s3_folder(self.targets.base_models_prefix, self.targets.base_model_name, self.base_version)

    def quantize(self) -> Any:
        q = self.release.quantize
        return self.processing_step(
            "Quantize",
            module="quantize",
            image=self.tools_image,
            python=TOOLS_PYTHON,
            instance_type=q.instance_type,
            volume_gb=q.volume_size_gb,
            max_runtime_s=q.max_runtime_s,
            inputs=[
                self.input("source-model", self.source_model, MODEL_DIR),
                self.input("calibration", self.calibration, CALIBRATION_DIR),
            ],
            # Scratch, not the version folder: a run whose gates fail leaves no file there (Publish writes it).
            outputs=[self.output("quantized", self.scratch_uri("quantize"))],
            arguments=[
                "--model-dir",
                MODEL_DIR,
                "--calibration",
                CALIBRATION_DIR,
                "--out-dir",
                OUTPUT_DIR,
                "--scheme",
                q.scheme,
                "--samples",
                str(q.calibration_samples),
                "--min-samples",
                str(q.min_calibration_samples),
                "--language-mix",
                json.dumps(q.language_mix),
                "--language-tolerance",
                str(q.language_mix_tolerance),
                "--max-sequence-length",
                str(q.max_sequence_length),
                "--llmcompressor-version",
                q.llmcompressor_version,
            ],
            # Isolated (no network): the checkpoint and the calibration set are local inputs.
            environment={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        )

    def model_inputs(self, quantized: Any | None) -> list[Any]:
        """The base model (the quantize step's output when it ran) and, for an adapter, the adapter folder."""
        if quantized is not None:
            uri = quantized.properties.ProcessingOutputConfig.Outputs["quantized"].S3Output.S3Uri
        elif self.kind == "base_model":
            uri = self.source_model
        else:
            uri = self.model_uri()
        inputs = [self.input("model", uri, MODEL_DIR)]
        if self.kind == "adapter":
            adapter_uri = self.s3_folder(self.targets.adapters_prefix, self.adapter, self.adapter_version)
            inputs.append(self.input("adapter", adapter_uri, self.join(f"{ADAPTERS_DIR}/", self.adapter)))
        return inputs

    def validate(self, quantized: Any | None) -> tuple[Any, Any]:
        report = self.sdk["properties"].PropertyFile(name="Validation", output_name="report", path=VALIDATION_FILE)
        arguments = [
            "--model-dir",
            MODEL_DIR,
            "--max-lora-rank",
            str(self.targets.max_lora_rank),
            "--base-name",
            self.targets.base_model_name,
            "--base-version",
            self.base_version,
            "--report-dir",
            OUTPUT_DIR,
        ]
        if self.kind == "adapter":
            arguments += ["--adapters-dir", ADAPTERS_DIR, "--digest-dir", self.join(f"{ADAPTERS_DIR}/", self.adapter)]
        else:
            arguments += ["--digest-dir", MODEL_DIR]
        step = self.processing_step(
            "Validate",
            module="validate",
            image=self.tools_image,
            python=TOOLS_PYTHON,
            instance_type=self.release.eval_instance_type,
            volume_gb=self.release.eval_volume_size_gb,
            max_runtime_s=self.release.step_max_runtime_s,
            inputs=self.model_inputs(quantized),
            outputs=[self.output("report", self.report_uri("validate"))],
            arguments=arguments,
            environment={"HF_HUB_OFFLINE": "1"},
            property_files=[report],
        )
        return step, report

    def row_filter(self) -> list[Any]:
        return ["--only-adapter", self.adapter] if self.kind == "adapter" else ["--only-base"]

    def load_test(self, quantized: Any | None, after: Any) -> Any:
        """LoadTest: the serving image serves the candidate (and the adapter released), then answers the eval rows."""
        adapters = self.adapter if self.kind == "adapter" else ""
        return self.serve_and_answer(
            "LoadTest", self.model_inputs(quantized), adapters, self.release.load_test_requests_per_adapter, after
        )

    def baseline_load_test(self, after: Any) -> Any:
        """BaselineLoadTest: the same script serving the unquantized source (BF16), for the drop gates."""
        uri = self.source_model if self.release.quantize.enabled else self.baseline_model
        return self.serve_and_answer(
            "BaselineLoadTest", [self.input("model", uri, MODEL_DIR)], "", BASELINE_LOAD_REQUESTS, after
        )

    def serve_and_answer(self, name: str, model_inputs: list[Any], adapters: Any, requests: int, after: Any) -> Any:
        """A step running the load-test script in the serving image on ``model_inputs``: ``requests`` requests to
        each model, then every eval row answered greedily; its ``answers`` output is the answers JSONL."""
        step = self.processing_step(
            name,
            module="load_test",
            image=self.serving_image,
            python=SERVING_PYTHON,
            instance_type=self.targets.serving_instance_type,
            volume_gb=self.release.eval_volume_size_gb,
            max_runtime_s=self.release.step_max_runtime_s,
            inputs=[*model_inputs, self.input("eval-set", self.eval_set, EVAL_DIR)],
            outputs=[self.output("answers", self.report_uri(_folder(name)))],
            arguments=[
                "--serve",
                "--model-dir",
                MODEL_DIR,
                "--adapter-dir",
                ADAPTERS_DIR,
                "--base-name",
                self.targets.base_model_name,
                "--adapters",
                adapters,
                "--requests-per-model",
                str(requests),
                "--eval-set",
                EVAL_DIR,
                "--answers-dir",
                OUTPUT_DIR,
                *self.row_filter(),
            ],
            environment=dict(self.targets.engine_environment),
        )
        step.add_depends_on([after])
        return step

    def evaluate(self, load_test: Any, baseline: Any | None) -> tuple[Any, Any]:
        """Evaluate: the gates on the candidate's answers, per language and, with ``baseline`` (a base release's
        BaselineLoadTest), the drop gates against the baseline's answers."""
        report = self.sdk["properties"].PropertyFile(name="Evaluation", output_name="report", path=REPORT_FILE)
        answers = load_test.properties.ProcessingOutputConfig.Outputs["answers"].S3Output.S3Uri
        inputs = [
            self.input("eval-set", self.eval_set, EVAL_DIR),
            self.input("answers", answers, ANSWERS_DIR),
            self.input("catalog", self.catalog, CATALOG_DIR),
        ]
        arguments = [
            "--eval-set",
            EVAL_DIR,
            "--answers",
            f"{ANSWERS_DIR}/{ANSWERS_FILE}",
            "--catalog",
            CATALOG_DIR,
            "--gates",
            json.dumps(self.release.gates),
            "--required-languages",
            ",".join(self.release.required_languages),
            "--min-rows",
            str(self.release.min_eval_rows),
            "--min-title-rows",
            str(self.release.min_invented_titles_rows),
            "--judge-model-id",
            self.release.judge_model_id,
            "--report-dir",
            OUTPUT_DIR,
            "--exit-zero",
            *self.row_filter(),
        ]
        if baseline is not None:
            baseline_answers = baseline.properties.ProcessingOutputConfig.Outputs["answers"].S3Output.S3Uri
            inputs.append(self.input("baseline-answers", baseline_answers, BASELINE_ANSWERS_DIR))
            arguments += [
                "--baseline-answers",
                f"{BASELINE_ANSWERS_DIR}/{ANSWERS_FILE}",
                "--baseline-gates",
                json.dumps(self.release.baseline_drop_gates),
            ]
        step = self.processing_step(
            "Evaluate",
            module="evaluate",
            image=self.tools_image,
            python=TOOLS_PYTHON,
            instance_type=self.release.eval_instance_type,
            volume_gb=self.release.eval_volume_size_gb,
            max_runtime_s=self.release.step_max_runtime_s,
            inputs=inputs,
            outputs=[self.output("report", self.report_uri("evaluate"))],
            # Not isolated: the judge is Bedrock's Converse API (release.judge_model_id), reached over the network.
            # Its own role: a job with network may not register packages, start jobs or pass roles.
            isolated=False,
            role=EVALUATE_ROLE_PLACEHOLDER,
            arguments=arguments,
            property_files=[report],
        )
        return step, report

    def publish(self, quantized: Any, sha256: Any) -> Any:
        """Publish (after the gates): the quantized checkpoint from the scratch folder into its version folder, checked
        against ``sha256``, the digest Validate wrote (runtime/publish.py)."""
        uri = quantized.properties.ProcessingOutputConfig.Outputs["quantized"].S3Output.S3Uri
        return self.processing_step(
            "Publish",
            module="publish",
            image=self.tools_image,
            python=TOOLS_PYTHON,
            instance_type=self.release.eval_instance_type,
            volume_gb=self.release.eval_volume_size_gb,
            max_runtime_s=self.release.step_max_runtime_s,
            inputs=[self.input("quantized", uri, MODEL_DIR)],
            outputs=[self.output("published", self.model_uri())],
            arguments=["--source-dir", MODEL_DIR, "--out-dir", OUTPUT_DIR, "--sha256", sha256],
        )

    def register(self, validate: Any, validation: Any, evaluate: Any, after: Any | None = None) -> Any:
        functions = self.sdk["functions"]
        sha256 = functions.JsonGet(step_name=validate.name, property_file=validation, json_path="artifact_sha256")
        if self.kind == "adapter":
            name, version = self.adapter, self.adapter_version
            artifact = self.s3_folder(self.targets.adapters_prefix, self.adapter, self.adapter_version)
        else:
            name, version = self.targets.base_model_name, self.base_version
            artifact = self.model_uri()
        report_folder = evaluate.properties.ProcessingOutputConfig.Outputs["report"].S3Output.S3Uri
        statistics = self.join(report_folder, REPORT_FILE, on="/")
        request = {
            "ModelPackageGroupName": self.targets.model_package_groups[self.kind],
            "ModelPackageDescription": self.join(name, " ", version, "/", sha256),
            "ModelApprovalStatus": self.release.approval_status,
            "InferenceSpecification": {
                "Containers": [
                    {
                        "Image": self.serving_image,
                        "ModelDataSource": {
                            "S3DataSource": {"S3Uri": artifact, "S3DataType": "S3Prefix", "CompressionType": "None"}
                        },
                    }
                ],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/json", "text/event-stream"],
                "SupportedRealtimeInferenceInstanceTypes": [self.targets.serving_instance_type],
            },
            "ModelMetrics": {"ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": statistics}}},
            "CustomerMetadataProperties": {
                "artifact": name,
                "version": version,
                "pin": self.join(version, "/", sha256),
                "base_model_version": self.base_version,
            },
        }
        return _register_step(self.sdk, "Register", request, after)

    def pipeline(self, name: str) -> Any:
        workflow, conditions, functions = self.sdk["workflow"], self.sdk["conditions"], self.sdk["functions"]
        quantized = None
        steps: list[Any] = []
        if self.kind == "base_model" and self.release.quantize.enabled:
            quantized = self.quantize()
            steps.append(quantized)
        validate, validation = self.validate(quantized)
        load_test = self.load_test(quantized, validate)
        baseline = self.baseline_load_test(validate) if self.has_baseline else None
        evaluate, evaluation = self.evaluate(load_test, baseline)
        passed = functions.JsonGet(step_name=evaluate.name, property_file=evaluation, json_path="passed")
        summary = functions.JsonGet(step_name=evaluate.name, property_file=evaluation, json_path="summary")
        passing: list[Any] = []
        if quantized is not None:
            sha256 = functions.JsonGet(step_name=validate.name, property_file=validation, json_path="artifact_sha256")
            passing.append(self.publish(quantized, sha256))
        passing.append(self.register(validate, validation, evaluate, after=passing[0] if passing else None))
        gates = workflow.ConditionStep(
            name="Gates",
            conditions=[conditions.ConditionEquals(left=passed, right=True)],
            if_steps=passing,
            else_steps=[workflow.FailStep(name="GateFailed", error_message=summary)],
        )
        steps += [validate, load_test, *([baseline] if baseline is not None else []), evaluate, gates]
        return workflow.Pipeline(
            name=name,
            parameters=self.parameters,
            steps=steps,
            sagemaker_session=self.sdk["session"],
            pipeline_experiment_config=None,
        )


def _register_step(sdk: Mapping[str, Any], name: str, request: dict[str, Any], after: Any | None = None) -> Any:
    """A ``RegisterModel`` step of a CreateModelPackage request.

    The SDK's own ``ModelStep`` takes its arguments only from ``ModelBuilder.register()``, which calls S3
    (ListBuckets) while building them: not offline. This is the same step type with the request written
    here; its properties are DescribeModelPackage's, as the SDK's. ``after``: a step it waits for (Publish).
    """
    workflow, properties = sdk["workflow"], sdk["properties"]

    class RegisterModelPackage(workflow.Step):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(
                name, step_type=workflow.StepTypeEnum.REGISTER_MODEL, depends_on=[after] if after is not None else None
            )
            self._properties = properties.Properties(step_name=name, step=self, shape_name="DescribeModelPackageOutput")

        @property
        def arguments(self) -> dict[str, Any]:
            return request

        @property
        def properties(self) -> Any:
            return self._properties

    return RegisterModelPackage()


def pipeline_definition(kind: ReleaseKind, targets: ReleaseTargets, release: ReleaseConfig) -> str:
    """The ``kind`` pipeline's definition JSON (``PipelineDefinitionBody``), CDK tokens left in place."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Running within a PipelineSession": the point of it
        builder = _Builder(kind, targets, release)
        definition = str(builder.pipeline(f"release-{kind.replace('_', '-')}").definition())
    return definition.replace(ROLE_PLACEHOLDER, targets.role_arn).replace(
        EVALUATE_ROLE_PLACEHOLDER, targets.evaluate_role_arn
    )
