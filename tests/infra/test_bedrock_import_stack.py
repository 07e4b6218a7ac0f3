"""The opt-in Bedrock Custom Model Import stack: off by default, scoped access, long enough waits."""

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match
from cdk_nag import AwsSolutionsChecks
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from app_config import load_config
from app_config.bedrock import PROVIDER_MAX_TIMEOUT_MIN
from app_config.cloudformation_limits import CUSTOM_RESOURCE_SERVICE_TIMEOUT_S, PROVIDER_HEADROOM_S
from serving_contract import outputs
from stacks.bedrock_import_stack import BedrockImportStack
from tests.infra.test_snapshots import mask_asset_hashes
from tests.synth_helpers import Synth, cdk_json_context

UNIT = "BedrockImport"
IMPORT_JOB_ARN = {
    "Fn::Join": [
        "",
        [
            "arn:",
            {"Ref": "AWS::Partition"},
            ":bedrock:",
            {"Ref": "AWS::Region"},
            ":",
            {"Ref": "AWS::AccountId"},
            ":model-import-job/*",
        ],
    ]
}


@pytest.fixture(scope="module")
def template(bedrock_synth: Synth) -> assertions.Template:
    return bedrock_synth.template(UNIT)


def _resources(template: assertions.Template, resource_type: str, props: Any = None) -> dict[str, Any]:
    pattern = {"Properties": props} if props is not None else None
    return dict(template.find_resources(resource_type, pattern))


def _only(found: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    assert len(found) == 1, f"expected one match, got {sorted(found)}"
    return next(iter(found.items()))


def _role_statements(template: assertions.Template, role_id: str) -> list[dict[str, Any]]:
    policies = _resources(template, "AWS::IAM::Policy", {"Roles": [{"Ref": role_id}]})
    return [s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]


def _import_role_id(template: assertions.Template) -> str:
    trust = {
        "AssumeRolePolicyDocument": {
            "Statement": [Match.object_like({"Principal": {"Service": "bedrock.amazonaws.com"}})]
        }
    }
    role_id, _ = _only(_resources(template, "AWS::IAM::Role", trust))
    return role_id


def test_default_synth_has_no_bedrock_stack(default_synth: Synth) -> None:
    assert default_synth.stacks.bedrock_import is None
    assert not [name for name in default_synth.templates if name.endswith(UNIT)]


def test_enabled_synth_adds_the_stack_in_the_configured_region(bedrock_synth: Synth) -> None:
    stack = bedrock_synth.stacks.bedrock_import
    assert stack is not None
    assert stack.region == "us-east-1"
    assert bedrock_synth.config.stack_name(UNIT) in bedrock_synth.templates


def test_import_role_trusts_only_this_accounts_import_jobs(template: assertions.Template) -> None:
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Principal": {"Service": "bedrock.amazonaws.com"},
                        "Condition": {
                            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                            "ArnLike": {"aws:SourceArn": IMPORT_JOB_ARN},
                        },
                    }
                ]
            }
        },
    )


def test_import_role_reads_the_configured_prefixes_only(template: assertions.Template, bedrock_synth: Synth) -> None:
    prefixes = sorted(m.s3_prefix for m in bedrock_synth.config.bedrock.models)
    statements = _role_statements(template, _import_role_id(template))
    bucket_id, _ = _only(_resources(template, "AWS::S3::Bucket"))
    bucket_arn = {"Fn::GetAtt": [bucket_id, "Arn"]}

    assert sorted(json.dumps(s["Action"]) for s in statements) == ['"s3:GetObject"', '"s3:ListBucket"']
    get_object = next(s for s in statements if s["Action"] == "s3:GetObject")
    assert get_object["Resource"] == [{"Fn::Join": ["", [bucket_arn, f"/{p}*"]]} for p in prefixes]
    list_bucket = next(s for s in statements if s["Action"] == "s3:ListBucket")
    assert list_bucket["Resource"] == bucket_arn
    assert list_bucket["Condition"] == {"StringLike": {"s3:prefix": [x for p in prefixes for x in (p, f"{p}*")]}}


def test_artifact_bucket_is_encrypted_tls_only_private_and_retained(template: assertions.Template) -> None:
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                        ]
                    },
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                }
            ),
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_model_key_rotates_and_is_passed_to_the_import_handler(template: assertions.Template) -> None:
    # The stack's other key encrypts the handlers' logs and environments (stack_logs_key).
    key_id, _ = _only(
        _resources(
            template,
            "AWS::KMS::Key",
            {"EnableKeyRotation": True, "Description": "Encrypts models imported into Bedrock Custom Model Import"},
        )
    )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "index.on_event",
            "Environment": {"Variables": Match.object_like({"MODEL_KMS_KEY_ARN": {"Fn::GetAtt": [key_id, "Arn"]}})},
        },
    )


def test_handlers_run_the_newest_python_runtime_cdk_knows(template: assertions.Template) -> None:
    def version(name: str) -> tuple[int, ...]:
        return tuple(int(part) for part in name.removeprefix("python").split("."))

    newest = max((r.name for r in lambda_.Runtime.ALL if re.fullmatch(r"python\d+\.\d+", r.name)), key=version)
    handlers = _resources(template, "AWS::Lambda::Function", {"Handler": Match.string_like_regexp(r"^index\.")})
    assert sorted(h["Properties"]["Handler"] for h in handlers.values()) == ["index.is_complete", "index.on_event"]
    assert {h["Properties"]["Runtime"] for h in handlers.values()} == {newest}


def test_on_event_may_pass_only_the_import_role(template: assertions.Template) -> None:
    role_id = _import_role_id(template)
    pass_role = [
        s
        for policy in _resources(template, "AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "iam:PassRole" in json.dumps(s["Action"])
    ]
    assert [s["Resource"] for s in pass_role] == [{"Fn::GetAtt": [role_id, "Arn"]}]
    # ...and only to Bedrock (issue 22 item 8: the grant carried no condition).
    assert [s.get("Condition") for s in pass_role] == [
        {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}}
    ]


def test_model_key_grants_only_for_aws_resources(template: assertions.Template) -> None:
    create_grant = [
        s
        for policy in _resources(template, "AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "kms:CreateGrant" in json.dumps(s["Action"])
    ]
    assert create_grant
    assert all(s.get("Condition") == {"Bool": {"kms:GrantIsForAWSResource": "true"}} for s in create_grant)


def test_provider_waits_long_enough_for_an_import(template: assertions.Template, bedrock_synth: Synth) -> None:
    _, machine = _only(_resources(template, "AWS::StepFunctions::StateMachine"))
    # The definition is a Fn::Join of JSON text and function ARNs; put placeholders in for the ARNs.
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    definition = json.loads("".join(p if isinstance(p, str) else "<arn>" for p in parts))
    retry = definition["States"]["framework-isComplete-task"]["Retry"][0]
    total_s = retry["IntervalSeconds"] * retry["MaxAttempts"]
    assert retry["BackoffRate"] == 1
    assert retry["IntervalSeconds"] == bedrock_synth.config.bedrock.poll_interval_s
    # Imports take tens of minutes; CloudFormation waits at most 3600 s for a custom resource
    # (ServiceTimeout), and the default uses all of it less the provider's head room.
    assert total_s == bedrock_synth.config.bedrock.import_timeout_min * 60 == PROVIDER_MAX_TIMEOUT_MIN * 60
    imports = _resources(template, "Custom::BedrockModelImport")
    assert imports
    for _, resource in imports.items():
        service_timeout = int(resource["Properties"]["ServiceTimeout"])  # CDK renders it as a string
        # The provider gives up (with its own message) before CloudFormation does.
        assert service_timeout == total_s + PROVIDER_HEADROOM_S
        assert service_timeout <= CUSTOM_RESOURCE_SERVICE_TIMEOUT_S
    machine_logging = machine["Properties"]["LoggingConfiguration"]
    assert machine_logging["Level"] == "ALL"
    # Control Tower's CT.STEPFUNCTIONS.PR.2; CDK's Provider has no option for it (CustomResourceHandlers).
    assert machine["Properties"]["TracingConfiguration"] == {"Enabled": True}


def test_one_import_per_model_with_its_prefix_and_an_arn_output(
    template: assertions.Template, bedrock_synth: Synth
) -> None:
    models = bedrock_synth.config.bedrock.models
    imports = _resources(template, "Custom::BedrockModelImport")
    props = sorted(
        (r["Properties"]["ModelName"], r["Properties"]["Prefix"], r["Properties"]["Revision"]) for r in imports.values()
    )
    assert props == sorted((m.name, m.s3_prefix, m.revision) for m in models)
    assert {r["Properties"]["RetainOnDelete"] for r in imports.values()} == {"false"}
    template_outputs = bedrock_synth.template_json(UNIT)["Outputs"]
    for model in models:
        resource_id = next(k for k, r in imports.items() if r["Properties"]["ModelName"] == model.name)
        key = outputs.imported_model_output(model.name)
        assert template_outputs[key]["Value"] == {"Fn::GetAtt": [resource_id, "ImportedModelArn"]}


def test_each_imported_model_names_the_adapter_it_answers_for(bedrock_synth: Synth) -> None:
    """Issue 53, finding 3: the client library's documented path (config_from_outputs_file) builds its Bedrock
    fallback from these outputs; a model with no adapter configured names none, and is not a fallback."""
    template_outputs = bedrock_synth.template_json(UNIT)["Outputs"]
    named = {
        key: value["Value"]
        for key, value in template_outputs.items()
        if key.startswith(outputs.IMPORTED_MODEL_ADAPTER_PREFIX)
    }
    assert named == {
        outputs.imported_model_adapter_output(m.name): m.adapter
        for m in bedrock_synth.config.bedrock.models
        if m.adapter is not None
    }
    assert list(named.values()) == ["jp_style_v1"]  # tests/conftest.py BEDROCK_OVERRIDES


def _stack_template(tmp_path: Path, overrides: dict[str, str]) -> assertions.Template:
    """Just the Bedrock stack with cdk-nag (synth raises on a finding): cheaper than a full synth."""
    context = {**cdk_json_context(), "bedrock.enabled": "true", "env.region": "eu-central-1", **overrides}
    config = load_config(context)
    app = cdk.App(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack = BedrockImportStack(
        app,
        "Probe",
        bedrock=config.bedrock,
        observability=config.observability,
        env=cdk.Environment(region=config.env.region),
    )
    app.synth()
    return assertions.Template.from_stack(stack)


def test_existing_bucket_and_retain(tmp_path: Path) -> None:
    template = _stack_template(
        tmp_path, {"bedrock.bucket_name": "mangaassist-bedrock-import", "bedrock.retain_imported_models": "true"}
    )
    template.resource_count_is("AWS::S3::Bucket", 0)
    template.has_resource_properties(
        "Custom::BedrockModelImport", {"Bucket": "mangaassist-bedrock-import", "RetainOnDelete": "true"}
    )
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "s3:GetObject",
                                "Resource": {
                                    "Fn::Join": [
                                        "",
                                        [
                                            "arn:",
                                            {"Ref": "AWS::Partition"},
                                            ":s3:::mangaassist-bedrock-import/llama3-domain-v1/*",
                                        ],
                                    ]
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_bedrock_stack_snapshot(bedrock_synth: Synth, snapshot: SnapshotAssertion) -> None:
    assert mask_asset_hashes(bedrock_synth.template_json(UNIT)) == snapshot.use_extension(JSONSnapshotExtension)
