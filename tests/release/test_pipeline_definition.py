"""The release pipelines' definitions from config, without a synth: what config changes in them."""

import json
from typing import Any

from app_config.release import QuantizeConfig, ReleaseConfig
from cdk_constructs.release.pipeline_definition import pipeline_definition
from cdk_constructs.release.pipeline_steps import ReleaseTargets

TARGETS = ReleaseTargets(
    role_arn="arn:aws:iam::123456789012:role/release",
    evaluate_role_arn="arn:aws:iam::123456789012:role/release-evaluate",
    bucket_name="artifacts",
    code_s3_uri="s3://assets/abc.zip",
    code_zip_name="abc.zip",
    tools_image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/mangaassist:release-tools",
    serving_image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/mangaassist:v2",
    serving_instance_type="ml.g5.xlarge",
    base_model_name="llama-3-8b-instruct-awq",
    adapters=("manga_domain_v3",),
    max_lora_rank=16,
    base_models_prefix="base-models",
    adapters_prefix="adapters",
    model_package_groups={"base_model": "p-base-model", "adapter": "p-adapters"},
)


def _steps(definition: dict[str, Any]) -> dict[str, Any]:
    steps = {s["Name"]: s for s in definition["Steps"]}
    for step in definition["Steps"]:
        for branch in ("IfSteps", "ElseSteps"):
            steps |= {s["Name"]: s for s in step["Arguments"].get(branch, [])}
    return steps


def test_approved_releases_register_as_approved() -> None:
    definition = json.loads(pipeline_definition("adapter", TARGETS, ReleaseConfig(approval_status="Approved")))
    assert _steps(definition)["Register"]["Arguments"]["ModelApprovalStatus"] == "Approved"


def test_without_quantize_the_base_pipeline_validates_the_uploaded_checkpoint() -> None:
    release = ReleaseConfig(quantize=QuantizeConfig(enabled=False))
    definition = json.loads(pipeline_definition("base_model", TARGETS, release))
    assert [s["Name"] for s in definition["Steps"]] == ["Validate", "LoadTest", "BaselineLoadTest", "Evaluate", "Gates"]
    model = _steps(definition)["Validate"]["Arguments"]["ProcessingInputs"][1]
    assert model["InputName"] == "model" and model["S3Input"]["S3Uri"] == {"Get": "Parameters.SourceModelS3Uri"}
    parameters = [p["Name"] for p in definition["Parameters"]]
    assert "CalibrationS3Uri" not in parameters
    # Quantized elsewhere: the BF16 checkpoint the drop gates compare with is a parameter of the run.
    baseline = _steps(definition)["BaselineLoadTest"]["Arguments"]["ProcessingInputs"][1]
    assert baseline["S3Input"]["S3Uri"] == {"Get": "Parameters.BaselineModelS3Uri"}


def _arguments(step: dict[str, Any]) -> list[Any]:
    return list(step["Arguments"]["AppSpecification"]["ContainerArguments"])


def _after(arguments: list[Any], flag: str) -> Any:
    return arguments[arguments.index(flag) + 1]


def test_a_quantized_base_release_is_judged_per_language_against_its_bf16_source() -> None:
    definition = json.loads(pipeline_definition("base_model", TARGETS, ReleaseConfig()))
    steps = _steps(definition)
    assert [s["Name"] for s in definition["Steps"]] == [
        "Quantize", "Validate", "LoadTest", "BaselineLoadTest", "Evaluate", "Gates",
    ]  # fmt: skip
    # The baseline serves the Quantize step's own input (the unquantized source), after Validate passed.
    baseline = steps["BaselineLoadTest"]["Arguments"]
    assert baseline["ProcessingInputs"][1]["S3Input"]["S3Uri"] == {"Get": "Parameters.SourceModelS3Uri"}
    assert steps["BaselineLoadTest"]["DependsOn"] == ["Validate"]
    assert _after(_arguments(steps["BaselineLoadTest"]), "--adapters") == ""
    evaluate = _arguments(steps["Evaluate"])
    assert _after(evaluate, "--required-languages") == "en,ja"
    assert json.loads(_after(evaluate, "--baseline-gates")) == {"quality_score": 0.02}
    assert _after(evaluate, "--baseline-answers") == "/opt/ml/processing/input/baseline-answers/answers.jsonl"
    inputs = {i["InputName"]: i["S3Input"]["S3Uri"] for i in steps["Evaluate"]["Arguments"]["ProcessingInputs"]}
    assert inputs["catalog"] == {"Get": "Parameters.TitleCatalogS3Uri"}
    assert inputs["baseline-answers"] == {
        "Get": "Steps.BaselineLoadTest.ProcessingOutputConfig.Outputs['answers'].S3Output.S3Uri"
    }
    assert json.loads(_after(evaluate, "--gates"))["quality_score"] == 0.8


def test_an_adapter_release_has_the_catalog_and_languages_but_no_baseline() -> None:
    definition = json.loads(pipeline_definition("adapter", TARGETS, ReleaseConfig(required_languages=("ja",))))
    steps = _steps(definition)
    assert "BaselineLoadTest" not in steps
    evaluate = _arguments(steps["Evaluate"])
    assert _after(evaluate, "--required-languages") == "ja" and "--baseline-answers" not in evaluate
    assert "TitleCatalogS3Uri" in [p["Name"] for p in definition["Parameters"]]


def test_w8a8_and_stricter_gates_reach_the_steps() -> None:
    release = ReleaseConfig(quantize=QuantizeConfig(scheme="W8A8"), gates={"bleu": 0.5, "safety": 1.0})
    steps = _steps(json.loads(pipeline_definition("base_model", TARGETS, release)))
    quantize = steps["Quantize"]["Arguments"]["AppSpecification"]["ContainerArguments"]
    assert quantize[quantize.index("--scheme") + 1] == "W8A8"
    evaluate = steps["Evaluate"]["Arguments"]["AppSpecification"]["ContainerArguments"]
    assert json.loads(evaluate[evaluate.index("--gates") + 1]) == {"bleu": 0.5, "safety": 1.0}


def test_the_definition_is_written_without_credentials_or_network(monkeypatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    definition = json.loads(pipeline_definition("adapter", TARGETS, ReleaseConfig()))
    assert definition["Version"] == "2020-12-01"


def test_evaluate_gets_the_eval_set_floors_of_the_config() -> None:
    """Issue 53, finding 13: the seeds' eval-set sizes reach the Evaluate step."""
    release = ReleaseConfig(min_eval_rows=300, min_invented_titles_rows=600)
    evaluate = _steps(json.loads(pipeline_definition("adapter", TARGETS, release)))["Evaluate"]["Arguments"]
    args = evaluate["AppSpecification"]["ContainerArguments"]
    assert args[args.index("--min-rows") + 1] == "300" and args[args.index("--min-title-rows") + 1] == "600"
