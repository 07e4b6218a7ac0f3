"""The capacity job's infrastructure in the Serving stack (issue 46): the job's role, key and code zip, the
operator's managed policy and the outputs ``ops throughput measure`` reads; least privilege throughout."""

import datetime as dt
import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest

from cdk_constructs.capacity_job.capacity_job import RUNTIME
from cdk_constructs.capacity_job.runtime import SHARED_MODULES
from cdk_constructs.common.bundled_code import NOT_DEPLOYED, module_file
from serving_contract import capacity_job as contract
from serving_contract.log_groups import PROCESSING_JOBS_LOG_GROUP
from tests.conftest import DEV_WAIVER
from tests.metric_refs import resources
from tests.synth_helpers import REPO, Synth, synthesize

BUCKET = "<bucket>"
ASSETS = "<assets bucket>"
CONTRACT_OUTPUTS = (
    contract.OUTPUT_ROLE_ARN,
    contract.OUTPUT_CODE_URI,
    contract.OUTPUT_KMS_KEY_ARN,
    contract.OUTPUT_OPERATOR_POLICY_ARN,
)
"""The outputs every synth with the job has; the image's and the bucket's only when known at synth."""


def _one(template: dict[str, Any], resource_type: str) -> tuple[str, dict[str, Any]]:
    """The capacity job's one resource of ``resource_type``."""
    ((logical_id, resource),) = [
        (lid, r) for lid, r in resources(template, resource_type).items() if lid.startswith("CapacityJob")
    ]
    return logical_id, resource


def _text(value: Any) -> str:
    """A resource ARN as text: the artifacts bucket as ``<bucket>``, the CDK assets bucket as ``<assets bucket>``,
    a logical id's ``Fn::GetAtt`` as ``<id.Attr>``, pseudo parameters as ``${AWS::...}``."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_text(part) for part in value["Fn::Join"][1])
    if "Fn::ImportValue" in value:
        return BUCKET if "ModelArtifactsBucket" in value["Fn::ImportValue"] else f"<import {value['Fn::ImportValue']}>"
    if "Fn::Sub" in value:
        return ASSETS if value["Fn::Sub"].startswith("cdk-") else value["Fn::Sub"]
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    if "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    raise AssertionError(f"unexpected token {value}")


def _statements(policy: dict[str, Any]) -> list[tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]]:
    """Each statement as (sorted actions, resources as text, condition)."""
    found = []
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        found.append((tuple(sorted(actions)), tuple(_text(t) for t in targets), statement.get("Condition", {})))
    return found


def _job_statements(synth: Synth) -> list[tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]]:
    _, policy = _one(synth.template_json("Serving"), "AWS::IAM::Policy")
    return _statements(policy)


def _code_key(synth: Synth) -> str:
    """The code zip's key in the CDK assets bucket, from the output that names it."""
    uri = synth.template_json("Serving")["Outputs"][contract.OUTPUT_CODE_URI]["Value"]["Fn::Sub"]
    match = re.fullmatch(r"s3://cdk-[a-z0-9]+-assets-\$\{AWS::AccountId\}-\$\{AWS::Region\}/([0-9a-f]{64}\.zip)", uri)
    assert match, uri
    return match.group(1)


def test_the_job_role_is_sagemakers_for_this_account_only(default_synth: Synth) -> None:
    _, role = _one(default_synth.template_json("Serving"), "AWS::IAM::Role")
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role["Properties"]


def test_the_job_role_reaches_its_image_folders_code_logs_and_key_only(default_synth: Synth) -> None:
    role_id, _ = _one(default_synth.template_json("Serving"), "AWS::IAM::Role")
    key_id, _ = _one(default_synth.template_json("Serving"), "AWS::KMS::Key")
    code = _code_key(default_synth)
    root = contract.S3_ROOT
    repository = (
        "<import MangaAssist-prod-ImageRepository:ExportsOutputFnGetAttModelImageRepositoryDE3C89E2Arn3523AF7C>"
    )
    job_logs = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/sagemaker/ProcessingJobs:*"
    assets = f"arn:${{AWS::Partition}}:s3:::{ASSETS}"
    assert sorted(_job_statements(default_synth)) == sorted(
        [
            (("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"), (repository,), {}),
            (("ecr:GetAuthorizationToken",), ("*",), {}),  # no resource-level permission
            (("s3:GetObject",), (f"{BUCKET}/{root}/*/input/*",), {}),
            (("s3:ListBucket",), (BUCKET,), {"StringLike": {"s3:prefix": [f"{root}/*"]}}),
            (("s3:PutObject",), (f"{BUCKET}/{root}/*/output/*",), {}),
            (("s3:GetObject",), (f"{assets}/{code}",), {}),
            (("s3:ListBucket",), (assets,), {"StringEquals": {"s3:prefix": [code]}}),
            (
                ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"),
                (job_logs,),
                {},
            ),
            (
                (
                    "kms:Decrypt",
                    "kms:DescribeKey",
                    "kms:Encrypt",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                ),
                (f"<{key_id}.Arn>",),
                {},
            ),
            (("kms:CreateGrant",), (f"<{key_id}.Arn>",), {"Bool": {"kms:GrantIsForAWSResource": "true"}}),
        ]
    )
    assert role_id.startswith("CapacityJobRole")


def test_the_operator_starts_only_this_endpoints_encrypted_bounded_jobs(default_synth: Synth) -> None:
    template = default_synth.template_json("Serving")
    _, policy = _one(template, "AWS::IAM::ManagedPolicy")
    role_id, _ = _one(template, "AWS::IAM::Role")
    key_id, _ = _one(template, "AWS::KMS::Key")
    key = {"Fn::GetAtt": [key_id, "Arn"]}
    root = contract.S3_ROOT
    arn = "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}"
    jobs = f"{arn}:processing-job/capacity-mangaassist-vllm-prod-*"
    max_runtime_s = str(default_synth.config.throughput.job.max_runtime_s)
    assert sorted(_statements(policy), key=str) == sorted(
        [
            (
                ("sagemaker:CreateProcessingJob",),
                (jobs,),
                {
                    "ArnEquals": {"sagemaker:VolumeKmsKey": key, "sagemaker:OutputKmsKey": key},
                    "NumericLessThanEquals": {"sagemaker:MaxRuntimeInSeconds": max_runtime_s},
                    # Issue 53, finding 11: no network, the candidates' instance types only, named in the request.
                    "Bool": {"sagemaker:NetworkIsolation": "true"},
                    "ForAllValues:StringEquals": {
                        "sagemaker:InstanceTypes": ["ml.g5.xlarge", "ml.g6.xlarge", "ml.g6e.xlarge"]
                    },
                    "Null": {"sagemaker:InstanceTypes": "false"},
                },
            ),
            (("sagemaker:AddTags", "sagemaker:DescribeProcessingJob", "sagemaker:StopProcessingJob"), (jobs,), {}),
            (("sagemaker:ListProcessingJobs",), ("*",), {}),  # no resource-level permission
            (
                ("iam:PassRole",),
                (f"<{role_id}.Arn>",),
                {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            ),
            (("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"), (f"<{key_id}.Arn>",), {}),
            (("s3:PutObject",), (f"{BUCKET}/{root}/*/input/*",), {}),
            (("s3:DeleteObject",), (f"{BUCKET}/{root}/*/input/*",), {}),  # the CLI's clean-up
            (("s3:GetObject",), (f"{BUCKET}/{root}/*/output/*",), {}),
            (("s3:ListBucket",), (BUCKET,), {"StringLike": {"s3:prefix": [f"{root}/*"]}}),
        ],
        key=str,
    )
    assert max_runtime_s == "3600"


@pytest.mark.parametrize("fixture", ["default_synth", "components_synth"])
def test_no_statement_is_service_wide_or_bucket_wide(fixture: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(fixture)  # inference_components mode has the job too
    template = synth.template_json("Serving")
    statements = _job_statements(synth) + _statements(_one(template, "AWS::IAM::ManagedPolicy")[1])
    for actions, targets, _ in statements:
        assert not [a for a in actions if a.endswith("*")], actions
        assert not [t for t in targets if t in {f"{BUCKET}/*", f"{BUCKET}/{contract.S3_ROOT}/*"}], targets
        if "*" in targets:
            assert set(actions) <= {"ecr:GetAuthorizationToken", "sagemaker:ListProcessingJobs"}, actions


def test_the_key_rotates_survives_the_stack_and_denies_grants_but_for_aws(default_synth: Synth) -> None:
    _, key = _one(default_synth.template_json("Serving"), "AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")
    deny = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s["Effect"] == "Deny"]
    assert deny == [
        {
            "Action": "kms:CreateGrant",
            "Condition": {"BoolIfExists": {"aws:PrincipalIsAWSService": "false", "kms:GrantIsForAWSResource": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": "*",
            "Sid": "DenyGrantsExceptForAwsServices",
        }
    ]


def test_the_outputs_name_what_the_cli_reads(default_synth: Synth) -> None:
    template = default_synth.template_json("Serving")
    role_id, _ = _one(template, "AWS::IAM::Role")
    key_id, _ = _one(template, "AWS::KMS::Key")
    policy_id, _ = _one(template, "AWS::IAM::ManagedPolicy")
    outputs = {key: value["Value"] for key, value in template["Outputs"].items() if key.startswith("CapacityJob")}
    assert outputs == {
        contract.OUTPUT_ROLE_ARN: {"Fn::GetAtt": [role_id, "Arn"]},
        contract.OUTPUT_CODE_URI: outputs[contract.OUTPUT_CODE_URI],  # checked by _code_key
        contract.OUTPUT_KMS_KEY_ARN: {"Fn::GetAtt": [key_id, "Arn"]},
        contract.OUTPUT_OPERATOR_POLICY_ARN: {"Ref": policy_id},
    }
    _code_key(default_synth)
    # The image (ImageRepository stack) and the bucket (ModelArtifacts stack) are another stack's exports here.
    assert not set(contract.OUTPUTS_KNOWN_AT_SYNTH_ONLY) & set(outputs)


def test_the_image_and_the_bucket_are_outputs_when_known_at_synth(
    canary_build_synth: Synth, prebuilt_uri_synth: Synth
) -> None:
    """A bucket named in config (image.build.artifacts_bucket_name), an image named by URI (image.primary.uri)."""
    named_bucket = canary_build_synth.template_json("Serving")["Outputs"]
    assert named_bucket[contract.OUTPUT_BUCKET] == {"Value": "mangaassist-model-artifacts"}
    assert contract.OUTPUT_IMAGE_URI not in named_bucket
    named_image = prebuilt_uri_synth.template_json("Serving")["Outputs"]
    assert named_image[contract.OUTPUT_IMAGE_URI] == {"Value": prebuilt_uri_synth.config.image.primary.uri}
    assert contract.OUTPUT_BUCKET not in named_image
    for outputs in (named_bucket, named_image):
        assert set(CONTRACT_OUTPUTS) <= set(outputs)


def test_the_code_zip_is_the_runtime_folder_and_the_shared_modules(default_synth: Synth) -> None:
    """``runtime/`` as a package at the zip's root (``python -m runtime.measure``), each shared module at its
    package path, as files (no link), and nothing else."""
    asset = default_synth.outdir / f"asset.{_code_key(default_synth).removesuffix('.zip')}"
    staged = {str(p.relative_to(asset)): p for p in asset.rglob("*") if p.is_file() or p.is_symlink()}
    sources = {
        f"runtime/{p.relative_to(RUNTIME)}": p
        for p in RUNTIME.rglob("*")
        if p.is_file() and not any(fnmatch.fnmatch(part, pattern) for part in p.parts for pattern in NOT_DEPLOYED)
    }
    sources |= {str(module_file(name).relative_to(REPO)): module_file(name) for name in SHARED_MODULES}
    assert "runtime/__init__.py" in sources
    assert "runtime/measure.py" in sources and "runtime/sweep.py" in sources
    assert "cli_support/open_loop.py" in sources
    # serving_contract is the image's (a regular package there: a copy here could not shadow it).
    assert not any(name.startswith("serving_contract/") for name in staged)
    assert sorted(staged) == sorted(sources)
    for name, source in sources.items():
        assert not staged[name].is_symlink() and staged[name].read_bytes() == source.read_bytes(), name


def test_a_shared_module_without_a_file_stops_synth_with_one_line() -> None:
    message = (
        "shared_modules: cli_support.no_such_module has no file cli_support/no_such_module.py; "
        "each must be one .py module of this repository"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        module_file("cli_support.no_such_module")
    with pytest.raises(ValueError, match=r"^shared_modules: cli_support has no file cli_support\.py;"):
        module_file("cli_support")  # a package: its __init__ would deploy what it imports


@pytest.mark.parametrize("endpoint", ["mangaassist-vllm-prod", "e", "a" * 37, "a" * 38, "a-" * 31 + "a"])
def test_every_job_name_of_an_endpoint_is_in_the_operators_pattern(endpoint: str) -> None:
    pattern = contract.job_name_pattern(endpoint)
    now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
    for instance_type in ("ml.g6e.xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"):
        name = contract.job_name(endpoint, instance_type, now)
        assert fnmatch.fnmatchcase(name.lower(), pattern), (name, pattern)
    if len(endpoint) < 30:  # not cut: another endpoint's jobs stay out
        other = contract.job_name(f"{endpoint}2", "ml.g6e.xlarge", now)
        assert not fnmatch.fnmatchcase(other.lower(), pattern)


def _job_log_groups(synth: Synth) -> list[str]:
    return [
        lid
        for lid, r in resources(synth.template_json("Serving"), "Custom::LogRetention").items()
        if r["Properties"]["LogGroupName"] == PROCESSING_JOBS_LOG_GROUP
    ]


def test_the_jobs_log_group_is_made_once(default_synth: Synth, tmp_path: Path) -> None:
    """The compile cache's construct makes it; with the cache off, the capacity job's does."""
    assert [lid[: len("CompileCache")] for lid in _job_log_groups(default_synth)] == ["CompileCache"]
    cache_off = synthesize(tmp_path, {"serving.compile_cache.enabled": "false"})
    assert [lid[: len("CapacityJob")] for lid in _job_log_groups(cache_off)] == ["CapacityJob"]


def test_without_an_artifacts_bucket_there_is_no_capacity_job(tmp_path: Path) -> None:
    """Prebuilt images, no compile cache, no release pipelines: no bucket, so nowhere for a job to read or write."""
    synth = synthesize(
        tmp_path,
        {
            "stage": "dev",
            "image.source": "prebuilt",
            "image.primary.digest": "sha256:" + "ab" * 32,
            "serving.compile_cache.enabled": "false",
            "release.enabled": "false",
            "release.deploy_approval.enforced": "false",
            "release.deploy_approval.waived_because": DEV_WAIVER,
        },
    )
    assert synth.stacks.model_artifacts is None and synth.stacks.serving.capacity_job is None
    template = synth.template_json("Serving")
    assert not [lid for lid in template["Resources"] if lid.startswith("CapacityJob")]
    assert not [key for key in template["Outputs"] if key.startswith("CapacityJob")]
