"""The ModelRelease stack: its pipelines' definitions step by step, the model package groups, the role."""

import json
import re
from pathlib import Path
from typing import Any

import botocore.session
import botocore.validate
import pytest
import regex  # sacrebleu's dependency (pyproject.toml): the \p{L} classes of the API's patterns
from aws_cdk.assertions import Match

from cdk_constructs.release.pipeline_steps import IMAGE_PYTHONPATH
from cdk_constructs.release.runtime import load_test as load_test_step
from cdk_constructs.release.tools_image import RUNTIME as TOOLS_RUNTIME
from cdk_constructs.release.tools_image import locked_llmcompressor_version, tools_image_tag
from serving_contract import env, outputs
from stacks.image_build_stack import REPO_ROOT
from tests.synth_helpers import Synth, synthesize

UNIT = "ModelRelease"


def _definition(synth: Synth, kind: str) -> dict[str, Any]:
    """The pipeline's definition JSON, each CloudFormation intrinsic (a CDK token) replaced by ``"<cfn>"``-free text.

    The SDK wrote the definition with CDK tokens in parameter defaults; CloudFormation joins them back in
    (``Fn::Join``). An intrinsic inside a JSON string becomes ``{cfn}`` here, so the JSON still parses.
    """
    resources = synth.template(UNIT).find_resources("AWS::SageMaker::Pipeline")
    (body,) = (
        r["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]
        for r in resources.values()
        if r["Properties"]["PipelineName"].endswith(kind.replace("_", "-"))
    )
    if isinstance(body, dict):
        parts = body["Fn::Join"][1]
        body = "".join(part if isinstance(part, str) else "{cfn}" for part in parts)
    return json.loads(body)


def _steps(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    steps = {step["Name"]: step for step in definition["Steps"]}
    for step in definition["Steps"]:
        for branch in ("IfSteps", "ElseSteps"):
            steps |= {s["Name"]: s for s in step["Arguments"].get(branch, [])}
    return steps


def _join(value: Any) -> str:
    """A definition's ``Std:Join`` as text: parameters ``{Name}``, other pipeline variables ``{...}``."""
    if isinstance(value, str):
        return value
    if "Get" in value:
        return "{" + value["Get"].removeprefix("Parameters.") + "}"
    if "Std:Join" in value:
        join = value["Std:Join"]
        return join["On"].join(_join(v) for v in join["Values"])
    if "Std:JsonGet" in value:
        return "{" + value["Std:JsonGet"]["PropertyFile"]["Get"] + ":" + value["Std:JsonGet"]["Path"] + "}"
    raise AssertionError(value)


def _inputs(step: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        i["InputName"]: (_join(i["S3Input"]["S3Uri"]), _join(i["S3Input"]["LocalPath"]))
        for i in step["Arguments"]["ProcessingInputs"]
    }


def test_the_base_model_pipeline_runs_quantize_validate_load_test_evaluate_then_the_gates(default_synth: Synth) -> None:
    definition = _definition(default_synth, "base_model")
    assert [s["Name"] for s in definition["Steps"]] == [
        "Quantize", "Validate", "LoadTest", "BaselineLoadTest", "Evaluate", "Gates",
    ]  # fmt: skip
    assert [p["Name"] for p in definition["Parameters"]] == [
        "ArtifactsBucket", "RuntimeCodeS3Uri", "ToolsImageUri", "ServingImageUri", "EvalSetS3Uri",
        "TitleCatalogS3Uri", "BaseModelVersion", "SourceModelS3Uri", "CalibrationS3Uri",
    ]  # fmt: skip
    quantize = _steps(definition)["Quantize"]["Arguments"]
    assert quantize["ProcessingResources"]["ClusterConfig"]["InstanceType"] == "ml.g5.2xlarge"
    assert quantize["AppSpecification"]["ContainerEntrypoint"] == [
        "/opt/release-venv/bin/python",
        "-m",
        "runtime.quantize",
    ]
    args = quantize["AppSpecification"]["ContainerArguments"]
    assert args[args.index("--scheme") + 1] == "W4A16"
    assert args[args.index("--min-samples") + 1] == "256"
    assert json.loads(args[args.index("--language-mix") + 1]) == {"en": 0.7, "ja": 0.3}
    assert args[args.index("--llmcompressor-version") + 1] == "0.14.0.1"
    (output,) = quantize["ProcessingOutputConfig"]["Outputs"]
    # Issue 53, finding 14: the run's scratch folder, not the version folder (Publish writes that after the gates).
    assert (
        _join(output["S3Output"]["S3Uri"])
        == "s3://{ArtifactsBucket}/release-scratch/{Execution.PipelineExecutionId}/quantize"
    )


def test_a_quantized_checkpoint_reaches_its_version_folder_only_after_the_gates(default_synth: Synth) -> None:
    """Issue 53, finding 14: Quantize wrote into base-models/<name>/<version>/ before the gates ran, and a failed run
    left it there. Now Publish, the gates' first passing step, copies it there, checked against Validate's digest,
    and Register waits for it."""
    steps = _steps(_definition(default_synth, "base_model"))
    assert [s["Name"] for s in steps["Gates"]["Arguments"]["IfSteps"]] == ["Publish", "Register"]
    publish = steps["Publish"]["Arguments"]
    assert _inputs(steps["Publish"])["quantized"] == (
        "{Steps.Quantize.ProcessingOutputConfig.Outputs['quantized'].S3Output.S3Uri}",
        "/opt/ml/processing/input/model",
    )
    (output,) = publish["ProcessingOutputConfig"]["Outputs"]
    assert (
        _join(output["S3Output"]["S3Uri"])
        == "s3://{ArtifactsBucket}/base-models/llama-3-8b-instruct-awq/{BaseModelVersion}/"
    )
    args = [_join(a) for a in publish["AppSpecification"]["ContainerArguments"]]
    assert args[args.index("--sha256") + 1] == "{Steps.Validate.PropertyFiles.Validation:artifact_sha256}"
    assert steps["Register"]["DependsOn"] == ["Publish"]
    writers = {
        name
        for name, step in steps.items()
        if step["Type"] == "Processing"
        and any(
            "base-models/" in _join(o["S3Output"]["S3Uri"])
            for o in step["Arguments"]["ProcessingOutputConfig"]["Outputs"]
        )
    }
    assert writers == {"Publish"}


def test_validate_reads_the_quantized_checkpoint_and_digests_it(default_synth: Synth) -> None:
    validate = _steps(_definition(default_synth, "base_model"))["Validate"]["Arguments"]
    model_uri, local = _inputs({"Arguments": validate})["model"]
    assert model_uri == "{Steps.Quantize.ProcessingOutputConfig.Outputs['quantized'].S3Output.S3Uri}"
    args = [_join(a) for a in validate["AppSpecification"]["ContainerArguments"]]
    assert args[args.index("--max-lora-rank") + 1] == "16"
    assert args[args.index("--digest-dir") + 1] == local == "/opt/ml/processing/input/model"
    assert validate["Environment"]["PYTHONPATH"].startswith("/opt/ml/processing/input/code/")


def test_the_adapter_pipeline_validates_the_adapter_against_the_pinned_base(default_synth: Synth) -> None:
    definition = _definition(default_synth, "adapter")
    assert [s["Name"] for s in definition["Steps"]] == ["Validate", "LoadTest", "Evaluate", "Gates"]
    inputs = _inputs(_steps(definition)["Validate"])
    assert inputs["model"] == (
        "s3://{ArtifactsBucket}/base-models/llama-3-8b-instruct-awq/{BaseModelVersion}/",
        "/opt/ml/processing/input/model",
    )
    assert inputs["adapter"] == (
        "s3://{ArtifactsBucket}/adapters/{AdapterName}/{AdapterVersion}/",
        "/opt/ml/processing/input/adapters/{AdapterName}",
    )


def test_the_load_test_runs_the_serving_image_on_the_serving_instance_type(default_synth: Synth) -> None:
    load_test = _steps(_definition(default_synth, "adapter"))["LoadTest"]["Arguments"]
    assert _join(load_test["AppSpecification"]["ImageUri"]) == "{ServingImageUri}"
    serving_type = default_synth.config.serving.primary.instance_type  # the load test runs where it will serve
    assert load_test["ProcessingResources"]["ClusterConfig"]["InstanceType"] == serving_type
    args = [_join(a) for a in load_test["AppSpecification"]["ContainerArguments"]]
    assert args[:1] == ["--serve"]
    assert args[args.index("--requests-per-model") + 1] == "10"
    assert args[args.index("--only-adapter") + 1] == "{AdapterName}"
    # The engine serves as the endpoint does: the same engine settings.
    assert load_test["Environment"]["ENGINE_MAX_MODEL_LEN"] == str(default_synth.config.engine.max_model_len)
    # A job's environment replaces the image's: PYTHONPATH keeps the image's own after the code zip, so --serve
    # finds serving_app (tests/engine/test_release_steps.py runs the step that way).
    code, image_path = load_test["Environment"]["PYTHONPATH"].split(":")
    assert code.startswith("/opt/ml/processing/input/code/") and code.endswith(".zip")
    assert image_path == IMAGE_PYTHONPATH
    assert f"PYTHONPATH={IMAGE_PYTHONPATH}" in (REPO_ROOT / "container" / "Dockerfile").read_text()
    # The step serves the base under --base-name and the adapters it names: the container's variables.
    assert (load_test_step.SERVED_MODEL_NAME_ENV, load_test_step.ADAPTERS_ENV) == (
        env.ENGINE_SERVED_MODEL_NAME,
        env.LORA_ADAPTERS,
    )


def test_evaluate_scores_the_load_tests_answers_against_the_configured_gates(default_synth: Synth) -> None:
    evaluate = _steps(_definition(default_synth, "adapter"))["Evaluate"]["Arguments"]
    assert _inputs({"Arguments": evaluate})["answers"][0] == (
        "{Steps.LoadTest.ProcessingOutputConfig.Outputs['answers'].S3Output.S3Uri}"
    )
    args = [_join(a) for a in evaluate["AppSpecification"]["ContainerArguments"]]
    assert json.loads(args[args.index("--gates") + 1]) == {
        "bleu": 0.85, "factual_accuracy": 0.90, "language_quality": 0.88, "safety": 0.99, "hallucination_rate": 0.05,
        "quality_score": 0.80, "invented_titles": 0.0,
    }  # fmt: skip
    assert args[args.index("--required-languages") + 1] == "en,ja"
    assert _inputs({"Arguments": evaluate})["catalog"][0] == "{TitleCatalogS3Uri}"
    assert args[args.index("--judge-model-id") + 1] == "amazon.nova-pro-v1:0"
    assert "--exit-zero" in args  # the condition step decides, and the fail step names the metric


def test_every_step_but_the_judges_runs_without_network(default_synth: Synth) -> None:
    """Issue 49, finding 6: no step set NetworkConfig. Quantize, Validate and the load tests read only their inputs
    (SageMaker moves those): isolated. Evaluate calls the Bedrock judge: the one step with network."""
    for kind in ("base_model", "adapter"):
        steps = _steps(_definition(default_synth, kind))
        processing = {name: step["Arguments"] for name, step in steps.items() if step["Type"] == "Processing"}
        isolated = {
            name for name, args in processing.items() if args.get("NetworkConfig", {}).get("EnableNetworkIsolation")
        }
        # A base release also load-tests its BF16 baseline for the answers the gates compare (issue 47).
        expected = {"Validate", "LoadTest"} | (
            {"Quantize", "BaselineLoadTest", "Publish"} if kind == "base_model" else set()
        )
        assert isolated == expected and set(processing) - isolated == {"Evaluate"}
    quantize = _steps(_definition(default_synth, "base_model"))["Quantize"]["Arguments"]
    assert quantize["Environment"]["HF_HUB_OFFLINE"] == "1"  # nothing to fetch: the checkpoint is an input


def test_the_role_reads_its_code_zip_not_the_bootstrap_bucket(default_synth: Synth) -> None:
    """Issue 49, finding 6: Asset.grant_read gave read on all of the CDK bootstrap assets bucket, which every CDK
    app of the account shares. The role reads the code zip's key and lists only that prefix."""
    policies = default_synth.template(UNIT).find_resources("AWS::IAM::Policy")
    statements = [
        s
        for lid, p in policies.items()
        if lid.startswith("ModelReleaseRole")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_sid = {s.get("Sid"): s for s in statements if s.get("Sid")}
    read = json.dumps(by_sid["ReadRuntimeCode"]["Resource"])
    assert by_sid["ReadRuntimeCode"]["Action"] == "s3:GetObject" and read.endswith('.zip"]]}')
    listed = by_sid["ListRuntimeCode"]
    assert listed["Action"] == "s3:ListBucket"
    assert listed["Condition"]["StringEquals"]["s3:prefix"][0].endswith(".zip")
    assets = "cdk-hnb659fds-assets-"
    wide = [
        s
        for s in statements
        if assets in json.dumps(s["Resource"]) and s.get("Sid") not in ("ReadRuntimeCode", "ListRuntimeCode")
    ]
    assert wide == []
    assert not any(json.dumps(s["Resource"]).endswith('/*"]]}') and assets in json.dumps(s) for s in statements)


def test_the_gates_register_a_passing_version_or_fail_with_the_reports_summary(default_synth: Synth) -> None:
    steps = _steps(_definition(default_synth, "adapter"))
    gates = steps["Gates"]["Arguments"]
    (condition,) = gates["Conditions"]
    assert condition["Type"] == "Equals" and condition["RightValue"] is True
    assert condition["LeftValue"]["Std:JsonGet"]["Path"] == "passed"
    assert [s["Name"] for s in gates["IfSteps"]] == ["Register"]
    assert [s["Name"] for s in gates["ElseSteps"]] == ["GateFailed"]
    assert (
        _join(steps["GateFailed"]["Arguments"]["ErrorMessage"]) == "{Steps.Evaluate.PropertyFiles.Evaluation:summary}"
    )
    register = steps["Register"]
    assert register["Type"] == "RegisterModel"
    args = register["Arguments"]
    assert args["ModelPackageGroupName"] == "mangaassist-prod-adapters"
    assert args["ModelApprovalStatus"] == "PendingManualApproval"
    assert _join(args["CustomerMetadataProperties"]["pin"]) == (
        "{AdapterVersion}/{Steps.Validate.PropertyFiles.Validation:artifact_sha256}"
    )
    assert _join(args["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"]) == (
        "{Steps.Evaluate.ProcessingOutputConfig.Outputs['report'].S3Output.S3Uri}/evaluation.json"
    )


def test_one_model_package_group_per_kind_and_outputs_name_them(default_synth: Synth) -> None:
    template = default_synth.template(UNIT)
    template.resource_count_is("AWS::SageMaker::ModelPackageGroup", 2)
    for name in ("mangaassist-prod-base-model", "mangaassist-prod-adapters"):
        template.has_resource_properties("AWS::SageMaker::ModelPackageGroup", {"ModelPackageGroupName": name})
    outputs_ = template.to_json()["Outputs"]
    assert outputs.release_pipeline_output("adapter") in outputs_
    assert outputs.model_package_group_output("base_model") in outputs_


def _job_roles(synth: Synth, kind: str) -> dict[str, str]:
    """Each processing step's ``RoleArn``: the logical id of the role whose ARN CloudFormation joins in there."""
    resources = synth.template(UNIT).find_resources("AWS::SageMaker::Pipeline")
    (body,) = (
        r["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"]
        for r in resources.values()
        if r["Properties"]["PipelineName"].endswith(kind.replace("_", "-"))
    )
    parts, text, roles = body["Fn::Join"][1], "", {}
    for part in parts:
        if isinstance(part, str):
            text += part
        elif text.endswith('"RoleArn": "'):
            step = text[text.rindex('"Name": "') + 9 :].split('"', 1)[0]
            roles[step] = part["Fn::GetAtt"][0]
            text += "{cfn}"
        else:
            text += "{cfn}"
    return roles


def _role_statements(synth: Synth, role: str) -> dict[str, dict[str, Any]]:
    """The statements of ``role``'s policies (``Role`` or ``EvaluateRole``), by Sid (and by action for the rest)."""
    policies = synth.template(UNIT).find_resources("AWS::IAM::Policy")
    prefix = f"ModelRelease{role}DefaultPolicy"
    statements = [
        s
        for lid, p in policies.items()
        if lid.startswith(prefix)
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    return {s.get("Sid") or json.dumps(s["Action"]): s for s in statements}


def _actions(statements: dict[str, dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for statement in statements.values():
        action = statement["Action"]
        found |= {action} if isinstance(action, str) else set(action)
    return found


def test_the_release_role_registers_packages_only_as_pending_and_runs_only_pipeline_jobs(default_synth: Synth) -> None:
    """Issue 53, finding 9: CreateModelPackage had no condition on the approval status, so the release role (and any
    step running as it) could register a package as Approved."""
    statements = _role_statements(default_synth, "Role")
    register = statements["RegisterModelPackages"]
    assert register["Action"] == "sagemaker:CreateModelPackage"
    assert register["Condition"] == {"StringEquals": {"sagemaker:ModelApprovalStatus": "PendingManualApproval"}}
    assert [s for s in statements.values() if "sagemaker:CreateModelPackage" in json.dumps(s["Action"])] == [register]
    assert "sagemaker:UpdateModelPackage" not in _actions(statements)
    assert "processing-job/pipelines-*" in json.dumps(statements["RunStepJobs"]["Resource"])
    assert "bedrock:InvokeModel" not in _actions(statements)  # the judge is the Evaluate step's
    policies = default_synth.template(UNIT).find_resources("AWS::IAM::Policy")
    assert all("*FullAccess" not in json.dumps(p) for p in policies.values())
    default_synth.template(UNIT).has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]
            }
        },
    )


def test_evaluate_runs_as_its_own_role_that_may_only_read_report_and_ask_the_judge(default_synth: Synth) -> None:
    """Issue 53, finding 9: Evaluate, the one step with network, shared the release role (packages, jobs, PassRole).
    Its job now runs as a role that reads its inputs, writes its report, logs and invokes the judge model only."""
    assert _job_roles(default_synth, "base_model")["Evaluate"].startswith("ModelReleaseEvaluateRole")
    assert {
        role.split("Role")[0] for step, role in _job_roles(default_synth, "base_model").items() if step != "Evaluate"
    } == {"ModelRelease"}
    statements = _role_statements(default_synth, "EvaluateRole")
    assert statements["JudgeModel"]["Action"] == "bedrock:InvokeModel"
    assert "foundation-model/amazon.nova-pro-v1:0" in json.dumps(statements["JudgeModel"]["Resource"])
    actions = _actions(statements)
    assert not {a for a in actions if a.startswith(("sagemaker:", "iam:"))}, actions
    writes = json.dumps(statements["WriteEvaluationReport"]["Resource"])
    assert "release-reports/*" in writes and "base-models" not in writes
    release_role = _role_statements(default_synth, "Role")
    passed = [s for s in release_role.values() if s["Action"] == "iam:PassRole"]
    assert any("EvaluateRole" in json.dumps(s["Resource"]) for s in passed)  # the pipeline hands it to the job


def _tools_build(synth: Synth) -> tuple[Any, Any]:
    """The tools image's custom resource and its CodeBuild project's buildspec."""
    (image,) = synth.template(UNIT).find_resources("Custom::ReleaseToolsImage").values()
    (project,) = synth.template(UNIT).find_resources("AWS::CodeBuild::Project").values()
    return image, json.loads(_text(project["Properties"]["Source"]["BuildSpec"]))


def _text(value: Any) -> str:
    """A template string with each intrinsic (``Fn::Join`` part) written ``{cfn}``."""
    if isinstance(value, str):
        return value
    return "".join(part if isinstance(part, str) else "{cfn}" for part in value["Fn::Join"][1])


def test_the_stack_builds_the_tools_image_from_the_serving_image_and_the_steps_run_it(default_synth: Synth) -> None:
    image, spec = _tools_build(default_synth)
    tag = image["Properties"]["ImageTag"]
    assert tag.startswith("release-tools-") and len(tag) == len("release-tools-") + 64
    assert json.loads(image["Properties"]["ArtifactPins"]) == {}  # the serving image holds the weights
    (docker_build,) = [c for c in spec["phases"]["build"]["commands"] if c.startswith("docker build")]
    serving_tag = default_synth.stacks.image_build.image_tags["primary"]  # type: ignore[union-attr]
    assert docker_build.startswith("docker build -f Dockerfile --build-arg SERVING_IMAGE={cfn}")
    assert f":{serving_tag} --build-arg LLMCOMPRESSOR_VERSION=0.14.0.1 " in docker_build
    assert not any("model_artifacts fetch" in c for c in spec["phases"]["pre_build"]["commands"])
    # Every step but the load test runs it: the pipelines' ToolsImageUri defaults to its tag, once it is pushed.
    pipelines = default_synth.template(UNIT).find_resources("AWS::SageMaker::Pipeline")
    for logical_id, pipeline in pipelines.items():
        kind = "base_model" if logical_id.startswith("ModelReleaseBaseModel") else "adapter"
        (tools,) = [p for p in _definition(default_synth, kind)["Parameters"] if p["Name"] == "ToolsImageUri"]
        assert tools["DefaultValue"].endswith(f":{tag}")
        assert any(d.startswith("ToolsImageBuildToolsImage") for d in pipeline["DependsOn"])
    manifest = json.loads((default_synth.outdir / "manifest.json").read_text())
    release = manifest["artifacts"][default_synth.config.stack_name("ModelRelease")]
    assert default_synth.config.stack_name("ImageBuild") in release["dependencies"]


def test_the_tools_image_pulls_a_prebuilt_serving_image_from_its_own_registry(prebuilt_uri_synth: Synth) -> None:
    _, spec = _tools_build(prebuilt_uri_synth)
    uri = prebuilt_uri_synth.config.image.primary.uri
    assert uri is not None
    (docker_build,) = [c for c in spec["phases"]["build"]["commands"] if c.startswith("docker build")]
    assert f"--build-arg SERVING_IMAGE={uri} " in docker_build
    assert (
        "aws ecr get-login-password --region us-east-1 | docker login --username AWS --password-stdin "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    ) in spec["phases"]["pre_build"]["commands"]
    policies = prebuilt_uri_synth.template(UNIT).find_resources("AWS::IAM::Policy")
    pulls = [
        s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "ecr:BatchGetImage" in s["Action"] and "repository/ci/serving" in json.dumps(s["Resource"])
    ]
    assert len(pulls) == 2  # the tools build pulls it, and the pipeline role runs it in the load test


def test_the_tools_image_tag_follows_every_input() -> None:
    tag = tools_image_tag(dockerfile_sha256="a" * 64, build_args={"SERVING_IMAGE": "r:build-1"}, lock_sha256="c" * 64)
    assert tag == tools_image_tag(
        dockerfile_sha256="a" * 64, build_args={"SERVING_IMAGE": "r:build-1"}, lock_sha256="c" * 64
    )
    assert tag != tools_image_tag(
        dockerfile_sha256="a" * 64, build_args={"SERVING_IMAGE": "r:build-2"}, lock_sha256="c" * 64
    )
    assert tag != tools_image_tag(
        dockerfile_sha256="b" * 64, build_args={"SERVING_IMAGE": "r:build-1"}, lock_sha256="c" * 64
    )
    assert tag != tools_image_tag(
        dockerfile_sha256="a" * 64, build_args={"SERVING_IMAGE": "r:build-1"}, lock_sha256="d" * 64
    )


def _ecr_writes(synth: Synth) -> list[str]:
    """The repositories (as template JSON) any policy of the release stack lets push an image."""
    policies = synth.template(UNIT).find_resources("AWS::IAM::Policy")
    return [
        json.dumps(s["Resource"])
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "ecr:PutImage" in s["Action"]
    ]


def test_the_tools_build_pushes_only_to_its_own_repository(default_synth: Synth) -> None:
    """Issue 49, finding 5: the privileged tools build (third-party packages) could push to the serving image's
    repository. Now it may push to the tools repository alone and only pull the serving image."""
    writes = _ecr_writes(default_synth)
    assert writes and all("ToolsImageRepository" in w for w in writes)
    assert not any("ImportValue" in w or "ModelImageRepository" in w for w in writes)
    repositories = default_synth.template(UNIT).find_resources("AWS::ECR::Repository")
    (tools,) = repositories.values()
    assert tools["Properties"]["ImageTagMutability"] == "IMMUTABLE"
    assert tools["Properties"]["EncryptionConfiguration"]["EncryptionType"] == "KMS"


def test_the_tools_image_installs_only_its_hash_lock(default_synth: Synth) -> None:
    (project,) = default_synth.template(UNIT).find_resources("AWS::CodeBuild::Project").values()
    source = project["Properties"]["Source"]["Location"]
    assert source  # the sources asset: the Dockerfile and the lock (tools_image.LOCK)
    dockerfile = (TOOLS_RUNTIME / "Dockerfile").read_text()
    installs = [line for line in dockerfile.splitlines() if "pip install" in line and not line.startswith("#")]
    assert installs == [
        "    && /opt/release-venv/bin/python -m pip install --no-cache-dir --require-hashes -r "
        "/tmp/release-requirements.lock"
    ]
    lock = (TOOLS_RUNTIME / "requirements.lock").read_text()
    pins = [line for line in lock.splitlines() if line and not line.startswith(("#", " "))]
    assert len(pins) > 50 and all(line.endswith(" \\") for line in pins)  # each followed by its hashes
    assert locked_llmcompressor_version(lock) == default_synth.config.release.quantize.llmcompressor_version


def test_an_llmcompressor_version_the_lock_does_not_hold_stops_synth(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as raised:
        synthesize(tmp_path, {"release.quantize.llmcompressor_version": "0.15.0"})
    assert str(raised.value) == (
        "release.quantize.llmcompressor_version = '0.15.0': the tools image installs llmcompressor==0.14.0.1 from "
        "its hash lock (cdk_constructs/release/runtime/requirements.lock); regenerate the lock (its header has the "
        "command) to use another version"
    )


SAMPLE_RUN = {
    "Parameters.ArtifactsBucket": "mangaassist-prod-modelartifacts",
    "Parameters.AdapterName": "manga_domain_v3",
    "Parameters.AdapterVersion": "v4",
    "Parameters.BaseModelVersion": "v1",
    "Parameters.ServingImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mangaassist:build-" + "a" * 64,
    "Execution.PipelineExecutionId": "k3xe7ncbb1de",
}
"""Values one run gives the pipeline variables that the register step's request names."""


def _resolved(value: Any, steps: dict[str, dict[str, Any]]) -> Any:
    """``value`` as the service resolves it for one run (SAMPLE_RUN): Std:Join joined, a step's output property
    that step's own S3Uri, Std:JsonGet of the digest a sha256."""
    if isinstance(value, list):
        return [_resolved(v, steps) for v in value]
    if not isinstance(value, dict):
        return value
    if "Get" in value:
        name = value["Get"]
        if name in SAMPLE_RUN:
            return SAMPLE_RUN[name]
        step, _, rest = name.removeprefix("Steps.").partition(".")
        assert rest == "ProcessingOutputConfig.Outputs['report'].S3Output.S3Uri", name
        (output,) = [
            o for o in steps[step]["Arguments"]["ProcessingOutputConfig"]["Outputs"] if o["OutputName"] == "report"
        ]
        return _resolved(output["S3Output"]["S3Uri"], steps)
    if "Std:Join" in value:
        return value["Std:Join"]["On"].join(_resolved(v, steps) for v in value["Std:Join"]["Values"])
    if "Std:JsonGet" in value:
        assert value["Std:JsonGet"]["Path"] == "artifact_sha256", value
        return "e" * 64
    return {k: _resolved(v, steps) for k, v in value.items()}


def _shape_problems(value: Any, shape: Any, path: str) -> list[str]:
    """What botocore's validator leaves out: each string's pattern and maximum length, and enums."""
    if shape.type_name == "structure":
        return [p for k, v in value.items() for p in _shape_problems(v, shape.members[k], f"{path}.{k}")]
    if shape.type_name == "list":
        return [p for i, v in enumerate(value) for p in _shape_problems(v, shape.member, f"{path}[{i}]")]
    if shape.type_name == "map":
        return [
            p
            for k, v in value.items()
            for p in _shape_problems(k, shape.key, f"{path} key") + _shape_problems(v, shape.value, f"{path}.{k}")
        ]
    problems = []
    if shape.enum and value not in shape.enum:
        problems.append(f"{path} = {value!r} is not one of {shape.enum}")
    if shape.type_name == "string":
        # The API's Java patterns: \p{L} classes (the regex module has them), some with a "${1,N}" length suffix.
        pattern = re.sub(r"\$\{\d+,\d+\}$", "", shape.metadata.get("pattern", ".*"))
        if not regex.fullmatch(pattern, value):
            problems.append(f"{path} = {value!r} does not match {pattern!r}")
        if len(value) > shape.metadata.get("max", len(value)):
            problems.append(f"{path} is longer than {shape.metadata['max']}")
    return problems


@pytest.mark.parametrize("kind", ["adapter", "base_model"])
def test_the_register_steps_request_is_a_create_model_package_request_the_api_accepts(
    default_synth: Synth, kind: str
) -> None:
    # The RegisterModel step's arguments are a CreateModelPackage request (as the SDK's own ModelStep writes
    # them); botocore's service model is the API's shape, lengths, enums and patterns.
    steps = _steps(_definition(default_synth, kind))
    request = _resolved(steps["Register"]["Arguments"], steps)
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateModelPackage")
    report = botocore.validate.ParamValidator().validate(request, shape.input_shape)
    assert not report.has_errors(), report.generate_report()
    assert _shape_problems(request, shape.input_shape, "CreateModelPackage") == []
    # The statistics object is the evaluate step's report, where its job uploads it (<S3Uri>/<file>).
    statistics = request["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"]
    assert statistics == "s3://mangaassist-prod-modelartifacts/release-reports/k3xe7ncbb1de/evaluate/evaluation.json"
    # An uncompressed S3Prefix model source must end with '/' (S3ModelDataSource).
    (container,) = request["InferenceSpecification"]["Containers"]
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri"].endswith("/")


def test_the_shape_check_does_fail_on_a_request_the_api_refuses(default_synth: Synth) -> None:
    steps = _steps(_definition(default_synth, "adapter"))
    request = _resolved(steps["Register"]["Arguments"], steps)
    request["CustomerMetadataProperties"]["pin"] = "v4 | " + "e" * 64  # '|' is outside the value pattern
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateModelPackage")
    (problem,) = _shape_problems(request, shape.input_shape, "CreateModelPackage")
    assert problem.startswith("CreateModelPackage.CustomerMetadataProperties.pin = 'v4 | eee")


def test_a_release_runs_scratch_checkpoints_expire(default_synth: Synth) -> None:
    """Issue 53, finding 14: a failed run's quantized checkpoint (~6 GB) stays only release.scratch_retention_days."""
    buckets = default_synth.template("ModelArtifacts").find_resources("AWS::S3::Bucket")
    rules = [
        rule
        for bucket in buckets.values()
        for rule in bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
        if rule.get("Id") == "ExpireReleaseScratch"
    ]
    assert rules == [
        {
            "Id": "ExpireReleaseScratch",
            "Prefix": "release-scratch/",
            "ExpirationInDays": default_synth.config.release.scratch_retention_days,
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
            "Status": "Enabled",
        }
    ]
    assert default_synth.config.release.scratch_retention_days == 7
