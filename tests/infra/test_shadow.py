"""The shadow variant in the templates (issue 47): ShadowProductionVariants, the data capture of both
variants' requests and answers (KMS, retention, least privilege), the shadow's own scaling and alarms, which page
nobody, and the dashboard row that compares it with the primary."""

import json
from typing import Any

from planning.planner import Planner
from serving_contract import alarms as alarm_names
from serving_contract.metrics import Dimension
from tests.metric_refs import dashboard_bodies, resources
from tests.synth_helpers import Synth


def _one(template: dict[str, Any], resource_type: str) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = resources(template, resource_type).items()
    return logical_id, resource


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_endpoint_config_holds_the_primary_and_a_shadow_at_its_sampling_share(shadow_synth: Synth) -> None:
    config, template = shadow_synth.config, shadow_synth.template_json("Serving")
    _, endpoint_config = _one(template, "AWS::SageMaker::EndpointConfig")
    properties = endpoint_config["Properties"]
    (primary,) = properties["ProductionVariants"]  # SageMaker: one production variant beside a shadow
    (shadow,) = properties["ShadowProductionVariants"]
    assert (primary["VariantName"], shadow["VariantName"]) == ("primary", "shadow")
    assert shadow["InitialVariantWeight"] == primary["InitialVariantWeight"] * 10 / 100  # 10 % copied (seed 002)
    assert (shadow["InstanceType"], shadow["InitialInstanceCount"]) == (config.serving.shadow.instance_type, 1)
    # A shadow is a ProductionVariant shape: the same routing, AMI and startup health check.
    for key in ("RoutingConfig", "InferenceAmiVersion", "ContainerStartupHealthCheckTimeoutInSeconds"):
        assert shadow[key] == primary[key]
    models = resources(template, "AWS::SageMaker::Model")
    (shadow_model,) = [m for lid, m in models.items() if lid.startswith("EndpointShadowModel")]
    assert shadow["ModelName"]["Fn::GetAtt"][0] in models
    environment = shadow_model["Properties"]["PrimaryContainer"]["Environment"]
    assert environment["VARIANT_NAME"] == "shadow"
    pins = config.image.build.shadow
    assert pins is not None
    assert json.loads(environment["MODEL_VERSIONS"])["manga_domain_v3"] == pins.adapters["manga_domain_v3"]


def test_the_shadowed_share_of_answers_is_captured_encrypted_to_the_artifacts_bucket(shadow_synth: Synth) -> None:
    """Issue 53, finding 12: InitialSamplingPercentage 100 with Input and Output kept every primary prompt and answer
    for 30 days while 10 % was shadowed. The comparison reads answers: only they are captured, at the shadowed share."""
    template = shadow_synth.template_json("Serving")
    _, endpoint_config = _one(template, "AWS::SageMaker::EndpointConfig")
    capture = endpoint_config["Properties"]["DataCaptureConfig"]
    shadowed = shadow_synth.config.serving.shadow.sampling_percent
    assert capture["EnableCapture"] is True and capture["InitialSamplingPercentage"] == shadowed == 10
    assert capture["CaptureOptions"] == [{"CaptureMode": "Output"}]
    assert capture["CaptureContentTypeHeader"] == {"JsonContentTypes": ["application/json"]}
    assert capture["DestinationS3Uri"]["Fn::Join"][1][-1] == "/data-capture"
    key_id, key = _capture_key(template)
    assert capture["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True and key["DeletionPolicy"] == "RetainExceptOnCreate"
    denies = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s["Effect"] == "Deny"]
    assert [s["Action"] for s in denies] == ["kms:CreateGrant"]
    # The execution role may put captures under this endpoint's prefix only, and encrypt with the key.
    statements = _statements(template)
    (write,) = [s for s in statements if s.get("Sid") == "WriteDataCapture"]
    assert write["Action"] == "s3:PutObject"
    assert write["Resource"]["Fn::Join"][1][-1] == "/data-capture/mangaassist-vllm-prod/*"
    encrypt = [s for s in statements if s.get("Resource") == {"Fn::GetAtt": [key_id, "Arn"]}]
    assert [sorted(s["Action"]) for s in encrypt] == [["kms:Encrypt", "kms:GenerateDataKey"]]
    assert template["Outputs"]["DataCapturePrefix"]["Value"] == "data-capture/mangaassist-vllm-prod/"


def _capture_key(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    keys = {lid: k for lid, k in resources(template, "AWS::KMS::Key").items() if lid.startswith("DataCaptureKey")}
    ((logical_id, key),) = keys.items()
    return logical_id, key


def test_captures_expire_after_the_retention(shadow_synth: Synth) -> None:
    buckets = resources(shadow_synth.template_json("ModelArtifacts"), "AWS::S3::Bucket")
    rules = [
        rule
        for bucket in buckets.values()
        for rule in bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
        if rule.get("Id") == "ExpireDataCapture"
    ]
    assert rules == [
        {
            "Id": "ExpireDataCapture",
            "Prefix": "data-capture/",
            "ExpirationInDays": 30,
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
            "Status": "Enabled",
        }
    ]


def test_the_shadow_scales_on_its_own_target_with_no_schedule_and_no_steps(shadow_synth: Synth) -> None:
    template = shadow_synth.template_json("Serving")
    targets = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    (shadow,) = [t for t in targets.values() if "variant/shadow" in json.dumps(t["Properties"]["ResourceId"])]
    assert (shadow["Properties"]["MinCapacity"], shadow["Properties"]["MaxCapacity"]) == (1, 2)
    assert "ScheduledActions" not in shadow["Properties"]
    policies = [
        p
        for lid, p in resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy").items()
        if lid.startswith("ShadowScaling")
    ]
    assert [p["Properties"]["PolicyType"] for p in policies] == ["TargetTrackingScaling"]
    tracking = policies[0]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    expected = Planner.of(shadow_synth.config).throughput(shadow_synth.config.serving.shadow.instance_type).concurrency
    assert tracking["TargetValue"] == expected
    assert tracking["DisableScaleIn"] is False


def test_the_shadows_alarms_page_nobody_and_roll_nothing_back(shadow_synth: Synth) -> None:
    observability = shadow_synth.template_json("Observability")
    names = alarm_names.shadow_alarm_names("mangaassist-vllm-prod", "shadow")
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in resources(observability, "AWS::CloudWatch::Alarm").values()
    }
    assert set(names) <= set(alarms)
    for name in names:
        assert "AlarmActions" not in alarms[name] and "OKActions" not in alarms[name]
    ttft = alarms["mangaassist-vllm-prod-shadow-ttft-p95-cold"]
    assert ttft["Threshold"] == 500 and {"Name": "VariantName", "Value": "shadow"} in ttft["Dimensions"]
    composites = json.dumps(resources(observability, "AWS::CloudWatch::CompositeAlarm"))
    assert "shadow" not in composites  # neither the paging composite nor the deployment one names them
    # The endpoint-wide alarms (on-call's) read the production variants only.
    paging = [a for n, a in alarms.items() if n not in names]
    assert '"shadow"' not in json.dumps(paging)
    _, endpoint = _one(shadow_synth.template_json("Serving"), "AWS::SageMaker::Endpoint")
    rollback = endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    assert rollback and not any("shadow" in alarm["AlarmName"] for alarm in rollback)


def test_the_dashboard_compares_primary_and_shadow_per_request_class(shadow_synth: Synth) -> None:
    (body,) = dashboard_bodies(shadow_synth.template_json("Observability"))
    widgets = {w["properties"].get("title"): w["properties"] for w in body["widgets"] if "title" in w["properties"]}
    for klass in ("cold", "warm"):
        rows = widgets[f"Shadow vs primary: TTFT, {klass} requests (ms)"]["metrics"]
        variants = {row[row.index(Dimension.VARIANT.value) + 1] for row in rows}
        assert variants == {"primary", "shadow"} and all(klass in row for row in rows)
    assert "Shadow vs primary: answer length (output tokens)" in widgets
    assert "Shadow vs primary: requests and 5xx" in widgets


def test_the_shadows_own_pins_are_built_and_checked_for_approval(shadow_synth: Synth) -> None:
    build = shadow_synth.template_json("ImageBuild")
    assert "ShadowImageTag" in build["Outputs"]
    (check,) = resources(shadow_synth.template_json("Serving"), "Custom::ApprovedPins").values()
    keys = [pin["Key"] for pin in check["Properties"]["Pins"]]
    assert "image.build.shadow.adapters.jp_style_v1" in keys and "image.build.primary.base_model" in keys


def test_a_dev_stage_may_waive_the_approval_check_and_run_a_prebuilt_shadow(dev_waived_shadow_synth: Synth) -> None:
    template = dev_waived_shadow_synth.template_json("Serving")
    assert resources(template, "Custom::ApprovedPins") == {}
    models = resources(template, "AWS::SageMaker::Model")
    (shadow_model,) = [m for lid, m in models.items() if lid.startswith("EndpointShadowModel")]
    assert json.dumps(shadow_model["Properties"]["PrimaryContainer"]["Image"]).count("cd" * 32) == 1
