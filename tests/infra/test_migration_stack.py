"""The Migration stack (issue 54): the comparison store, the ramp's state machine and parameter, the policies, as
tests/conftest.py's Bedrock synth enables it (BEDROCK_OVERRIDES). The ramp's behaviour is run in
tests/lambdas/test_migration_ramp.py; these are the template's facts."""

import json
from typing import Any

from aws_cdk.assertions import Match

from serving_contract import migration, outputs
from tests.synth_helpers import Synth

UNIT = "Migration"


def _resources(synth: Synth, kind: str) -> dict[str, Any]:
    return {lid: resource for lid, resource in synth.template(UNIT).find_resources(kind).items()}


def test_the_stack_exists_only_when_the_migration_is_enabled(default_synth: Synth, bedrock_synth: Synth) -> None:
    assert default_synth.stacks.migration is None
    assert default_synth.config.stack_name(UNIT) not in default_synth.templates
    stack = bedrock_synth.stacks.migration
    assert stack is not None
    # Ordering only: the ramp watches the Observability stack's alarms by name.
    assert bedrock_synth.stacks.observability in stack.dependencies


def test_the_store_expires_everything_and_takes_only_its_own_key(bedrock_synth: Synth) -> None:
    template = bedrock_synth.template(UNIT)
    days = bedrock_synth.config.migration.store.retention_days
    keys = _resources(bedrock_synth, "AWS::KMS::Key")
    (key_id,) = [k for k, r in keys.items() if "comparison store" in r["Properties"]["Description"]]
    store = [
        r for r in _resources(bedrock_synth, "AWS::S3::Bucket").values() if "LoggingConfiguration" in r["Properties"]
    ]
    (bucket,) = store
    rule = bucket["Properties"]["LifecycleConfiguration"]["Rules"][0]
    assert (rule["ExpirationInDays"], rule["NoncurrentVersionExpiration"]["NoncurrentDays"]) == (days, 1)
    encryption = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
    }
    assert encryption["BucketKeyEnabled"] is True
    assert keys[key_id]["Properties"]["EnableKeyRotation"] is True
    assert keys[key_id]["DeletionPolicy"] == "RetainExceptOnCreate"
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:PutObject",
                                "Condition": {
                                    "StringNotEqualsIfExists": {
                                        "s3:x-amz-server-side-encryption-aws-kms-key-id": {
                                            "Fn::GetAtt": [key_id, "Arn"]
                                        }
                                    }
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_the_ramp_is_a_logged_traced_standard_state_machine_over_the_configured_steps(bedrock_synth: Synth) -> None:
    config = bedrock_synth.config.migration
    template = bedrock_synth.template(UNIT)
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineType": "STANDARD",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL", "IncludeExecutionData": True}),
        },
    )
    (parameter,) = _resources(bedrock_synth, "AWS::SSM::Parameter").values()
    assert json.loads(parameter["Properties"]["Value"]) == json.loads(migration.INITIAL_RAMP_STATE)
    (function,) = _resources(bedrock_synth, "AWS::Lambda::Function").values()
    env = function["Properties"]["Environment"]["Variables"]
    assert json.loads(env["STEPS"]) == [[s.percent, int(s.hold_hours * 3600)] for s in config.ramp.steps]
    assert json.loads(env["ALARM_NAMES"]) == [
        "mangaassist-vllm-prod-critical",
        "mangaassist-vllm-prod-client-fallback-rate",
        "mangaassist-vllm-prod-shadow-5xx-rate",  # migration.ramp.alarm_names
    ]
    assert (env["REPORT_KEY"], env["REPORT_MAX_AGE_S"]) == (migration.LATEST_REPORT_KEY, "86400")
    assert "KmsKeyArn" in function["Properties"]
    for group in _resources(bedrock_synth, "AWS::Logs::LogGroup").values():
        assert "KmsKeyId" in group["Properties"]


def test_the_step_function_reads_only_the_watched_alarms_and_the_one_report(bedrock_synth: Synth) -> None:
    statements = [
        statement
        for policy in _resources(bedrock_synth, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    (alarms,) = [s for s in statements if s.get("Sid") == "WatchedAlarms"]
    resources = [json.dumps(r) for r in alarms["Resource"]]
    assert len(resources) == 3 and all(":alarm:mangaassist-vllm-prod-" in r for r in resources)
    gets = [s for s in statements if s["Action"] == "s3:GetObject"]
    assert [json.dumps(s["Resource"]).endswith(f'/{migration.LATEST_REPORT_KEY}"]]}}') for s in gets] == [True]


def test_the_callers_policy_writes_pairs_and_reads_the_ramp_and_nothing_else(bedrock_synth: Synth) -> None:
    policies = _resources(bedrock_synth, "AWS::IAM::ManagedPolicy")
    (writer,) = [p for p in policies.values() if "write pairs" in p["Properties"]["Description"]]
    actions = [s["Action"] for s in writer["Properties"]["PolicyDocument"]["Statement"]]
    assert actions == ["s3:PutObject", "kms:GenerateDataKey", "ssm:GetParameter"]
    (put,) = [s for s in writer["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "s3:PutObject"]
    assert json.dumps(put["Resource"]).endswith(f'/{migration.PAIRS_PREFIX}*"]]}}')
    (reporter,) = [p for p in policies.values() if p is not writer]
    guardrail = [s for s in reporter["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "Guardrail"]
    assert [s["Action"] for s in guardrail] == ["bedrock:ApplyGuardrail"]  # migration.guardrail_id is set


def test_the_outputs_the_client_and_ops_read(bedrock_synth: Synth) -> None:
    found = set(bedrock_synth.template_json(UNIT)["Outputs"])
    assert found == {
        outputs.MIGRATION_STORE_BUCKET_NAME,
        outputs.MIGRATION_STORE_KEY_ARN,
        outputs.MIGRATION_STATE_PARAMETER_NAME,
        outputs.MIGRATION_RAMP_STATE_MACHINE_ARN,
        outputs.MIGRATION_PAIR_WRITER_POLICY_ARN,
        outputs.MIGRATION_REPORTER_POLICY_ARN,
    }


def test_no_physical_names(bedrock_synth: Synth) -> None:
    """CloudFormation names every resource (house style 7): a second stage or a re-created stack never collides."""
    template = bedrock_synth.template_json(UNIT)
    named = {"BucketName", "FunctionName", "StateMachineName", "Name", "ManagedPolicyName", "LogGroupName"}
    for logical_id, resource in template["Resources"].items():
        assert not named & set(resource.get("Properties", {})), logical_id
