"""serving.compile_cache: a cache-making job per model, and each model reading its cache (issue 25)."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk.assertions import Match

from app_config.cloudformation_limits import CUSTOM_RESOURCE_SERVICE_TIMEOUT_S, PROVIDER_HEADROOM_S
from app_config.compile_cache import JOB_PROVISIONING_S, MAX_JOB_RUNTIME_S, POLL_INTERVAL_S
from cdk_constructs.compile_cache.compile_cache import RUNTIME, job_name_prefix
from serving_contract import compile_cache as contract
from tests.metric_refs import resources
from tests.synth_helpers import REPO, Synth, synthesize

CACHE_TYPE = "Custom::CompileCache"


def _caches(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> properties of each Custom::CompileCache."""
    return {lid: r["Properties"] for lid, r in resources(template, CACHE_TYPE).items()}


def _by_variant(items: dict[str, dict[str, Any]], variant: str, kind: str) -> tuple[str, dict[str, Any]]:
    """The one logical id (and properties) of ``items`` made for ``variant`` (``Primary``, ``Canary``)."""
    (found,) = [(lid, props) for lid, props in items.items() if f"{variant}{kind}" in lid]
    return found


def _models(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lid: r["Properties"]["PrimaryContainer"] for lid, r in resources(template, "AWS::SageMaker::Model").items()}


def test_each_model_reads_the_cache_made_for_it_on_its_instance_type(default_synth: Synth) -> None:
    template = default_synth.template_json("Serving")
    caches, models = _caches(template), _models(template)
    assert len(caches) == 2
    for variant in ("Primary", "Canary"):
        cache_id, cache = _by_variant(caches, variant, "CompileCache")
        _, container = _by_variant(models, variant, "Model")
        # The job runs the model's own image and environment (its cache variables aside) on its instance type.
        environment = dict(container["Environment"])
        assert environment.pop(contract.COMPILE_CACHE_DIR) == "/opt/ml/model"
        assert environment.pop(contract.COMPILE_CACHE_KEY) == {"Fn::GetAtt": [cache_id, "Key"]}
        # The manifest the deploy found: the container loads no cache whose manifest differs (issue 49).
        assert environment.pop(contract.COMPILE_CACHE_MANIFEST_SHA256) == {"Fn::GetAtt": [cache_id, "ManifestSha256"]}
        assert cache["Environment"] == environment
        assert cache["ImageUri"] == container["Image"]
        serving = default_synth.config.serving
        assert cache["InstanceType"] == {"Primary": serving.primary, "Canary": serving.canary}[variant].instance_type
        assert (cache["MaxRuntimeInSeconds"], cache["VolumeSizeInGB"]) == ("2100", "30")
        # serving.compile_cache.lora_tuning_budget_s: the job's LoRA tuning step (0 when lora_tuning is off).
        assert cache["LoraTuningBudgetS"] == "600"
        assert container["ModelDataSource"] == {
            "S3DataSource": {
                "S3Uri": {"Fn::GetAtt": [cache_id, "CacheUri"]},
                "S3DataType": "S3Prefix",
                "CompressionType": "None",
            }
        }
    assert {c["JobNamePrefix"] for c in caches.values()} == {
        "mangaassist-vllm-prod-primary",
        "mangaassist-vllm-prod-canary",
    }


def test_the_job_role_is_sagemakers_and_reaches_only_the_cache_folders(default_synth: Synth) -> None:
    template = default_synth.template("Serving")
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]
            }
        },
    )
    policies = resources(default_synth.template_json("Serving"), "AWS::IAM::Policy")
    job_policy = next(p for lid, p in policies.items() if lid.startswith("CompileCacheJobRole"))
    actions = {
        action
        for statement in job_policy["Properties"]["PolicyDocument"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert not {a for a in actions if a.startswith("s3:")} - {"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
    assert "sagemaker:CreateProcessingJob" not in actions  # only the handlers start jobs


def _s3_writes(template: dict[str, Any], role_prefix: str) -> set[str]:
    """The object ARNs (joined, bucket as ``<bucket>``) a role's policies may s3:PutObject."""
    found = set()
    for lid, policy in resources(template, "AWS::IAM::Policy").items():
        if not lid.startswith(role_prefix):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
            if "s3:PutObject" in actions:
                targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                for target in targets:
                    parts = target["Fn::Join"][1] if isinstance(target, dict) else [target]
                    found.add("".join(p if isinstance(p, str) else "<bucket>" for p in parts))
    return found


def test_only_the_job_may_write_cache_files_the_handlers_write_manifests(default_synth: Synth) -> None:
    """Issue 49, finding 2: the handlers wrote anywhere under compile-cache/; vLLM runs what is there."""
    template = default_synth.template_json("Serving")
    assert _s3_writes(template, "CompileCacheJobRole") == {"<bucket>/compile-cache/*"}
    for handler in ("CompileCacheHandlersOnEventRole", "CompileCacheHandlersIsCompleteRole"):
        assert _s3_writes(template, handler) == {
            "<bucket>/compile-cache/*/manifest.json",
            "<bucket>/compile-cache-jobs/*",
        }


def _waiter_wait_s(template: dict[str, Any]) -> int:
    """How long the compile-cache provider's waiter state machine polls, seconds."""
    (machine,) = [
        m
        for lid, m in resources(template, "AWS::StepFunctions::StateMachine").items()
        if lid.startswith("CompileCache")
    ]
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    definition = json.loads("".join(p if isinstance(p, str) else "<arn>" for p in parts))
    retry = definition["States"]["framework-isComplete-task"]["Retry"][0]
    return int(retry["IntervalSeconds"] * retry["MaxAttempts"])


@pytest.mark.parametrize("max_runtime_s", [2100, MAX_JOB_RUNTIME_S])
def test_the_deploy_waits_for_a_job_inside_cloudformations_wait(tmp_path: Path, max_runtime_s: int) -> None:
    """Issue 49, finding 3: no ServiceTimeout (CloudFormation gave up at 3,600 s) while the waiter allowed
    4,500 s and max_runtime_s 5,400. Now: the handler's wait (WaitSeconds), then the provider's, then
    CloudFormation's, each inside the next, at the largest max_runtime_s too."""
    synth = synthesize(tmp_path, {"serving.compile_cache.max_runtime_s": str(max_runtime_s)})
    template = synth.template_json("Serving")
    waiter_s = _waiter_wait_s(template)
    for cache in _caches(template).values():
        assert int(cache["ServiceTimeout"]) == CUSTOM_RESOURCE_SERVICE_TIMEOUT_S == 3600
        handler_wait_s = int(cache["WaitSeconds"])
        assert handler_wait_s == max_runtime_s + JOB_PROVISIONING_S
        assert handler_wait_s + 2 * POLL_INTERVAL_S == waiter_s
        assert waiter_s + PROVIDER_HEADROOM_S <= int(cache["ServiceTimeout"])


def test_the_handlers_may_touch_only_their_models_jobs(default_synth: Synth) -> None:
    text = str(default_synth.template_json("Serving"))
    for prefix in ("mangaassist-vllm-prod-primary", "mangaassist-vllm-prod-canary"):
        assert f":processing-job/{prefix}-*" in text


def test_inference_components_mode_makes_the_base_models_cache(components_synth: Synth) -> None:
    template = components_synth.template_json("Serving")
    (cache_id,) = _caches(template)
    (container,) = _models(template).values()
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri"] == {"Fn::GetAtt": [cache_id, "CacheUri"]}


def test_with_the_cache_off_models_start_cold_and_nothing_is_made(tmp_path: Path) -> None:
    synth = synthesize(tmp_path, {"serving.compile_cache.enabled": "false"})
    template = synth.template_json("Serving")
    assert _caches(template) == {}
    for container in _models(template).values():
        assert "ModelDataSource" not in container
        assert contract.COMPILE_CACHE_DIR not in container["Environment"]


def _handler_asset(synth: Synth) -> Path:
    """The staged folder of the compile-cache handlers' code (both functions share one asset)."""
    functions = resources(synth.template_json("Serving"), "AWS::Lambda::Function")
    keys = {
        function["Properties"]["Code"]["S3Key"]
        for lid, function in functions.items()
        if lid.startswith("CompileCacheHandlers") and function["Properties"]["Handler"].startswith("index.")
    }
    (key,) = keys  # <asset hash>.zip, staged as asset.<asset hash>/
    return synth.outdir / f"asset.{key.removesuffix('.zip')}"


def test_the_handler_asset_is_its_runtime_folder_and_the_contract(default_synth: Synth) -> None:
    """Exactly the handler's folder and the one contract module it imports, as files (no link)."""
    asset = _handler_asset(default_synth)
    staged = {str(p.relative_to(asset)): p for p in asset.rglob("*") if p.is_file() or p.is_symlink()}
    sources = {
        "__init__.py": RUNTIME / "__init__.py",
        "index.py": RUNTIME / "index.py",
        "serving_contract/compile_cache.py": REPO / "serving_contract" / "compile_cache.py",
    }
    assert sorted(staged) == sorted(sources)
    for name, source in sources.items():
        assert not staged[name].is_symlink() and staged[name].read_bytes() == source.read_bytes(), name


LAMBDA_RUNTIME_PACKAGES = {"boto3", "botocore"}
"""What the Lambda Python runtime bundles besides the standard library (AWS Lambda developer guide,
"Building Lambda functions with Python": the runtime includes the AWS SDK for Python)."""


def test_the_handler_asset_imports_on_its_own(default_synth: Synth) -> None:
    """As the Lambda runtime does: the asset's root first on the path, then the standard library and
    the SDK's folder, without site's path hooks (the repo's editable install would find the repo's
    packages); the contract then comes from the asset."""
    asset = _handler_asset(default_synth)
    sdk_folder = Path(boto3.__file__).parents[1]
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.append(sys.argv[2]); "
        "import index; print(index.contract.__file__)"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, str(asset), str(sdk_folder)],
        cwd=asset,
        env={"AWS_DEFAULT_REGION": "ap-northeast-1", "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == asset / "serving_contract" / "compile_cache.py"


def test_the_handler_asset_imports_only_what_the_lambda_runtime_has(default_synth: Synth) -> None:
    """The SDK folder above also holds aws-cdk and pydantic: the asset's imports are checked by name."""
    asset = _handler_asset(default_synth)
    modules = sorted(asset.rglob("*.py"))
    assert len(modules) == 3  # not an empty glob
    bundled = {path.name.removesuffix(".py") for path in asset.iterdir()}
    for path in modules:
        roots = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                roots.add(node.module.split(".")[0])
        outside = roots - set(sys.stdlib_module_names) - {"__future__"} - LAMBDA_RUNTIME_PACKAGES - bundled
        assert not outside, f"{path.relative_to(asset)} imports {sorted(outside)}"


def test_job_name_prefixes_fit_processing_job_names_and_stay_unique() -> None:
    long_endpoint = "a" * 40 + "-vllm-prod"
    first, second = job_name_prefix(long_endpoint, "primary"), job_name_prefix(long_endpoint, "canary")
    assert len(first) <= contract.JOB_NAME_PREFIX_MAX and len(second) <= contract.JOB_NAME_PREFIX_MAX
    assert first != second
    assert job_name_prefix("mangaassist-vllm-prod", "primary") == "mangaassist-vllm-prod-primary"
