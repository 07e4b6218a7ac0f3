"""Focused template assertions for the serving stack."""

import json
import re
from pathlib import Path
from typing import Any

from aws_cdk import assertions
from aws_cdk.assertions import Match

from cdk_constructs.endpoint.components_serving import ComponentsServing
from cdk_constructs.endpoint.variants_serving import VariantsServing
from serving_contract import env, outputs
from tests.synth_helpers import SEEDS_G5, Synth, synthesize


def _variants(synth: Synth) -> list[dict[str, Any]]:
    configs = synth.template("Serving").find_resources("AWS::SageMaker::EndpointConfig")
    assert len(configs) == 1
    variants: list[dict[str, Any]] = next(iter(configs.values()))["Properties"]["ProductionVariants"]
    return variants


def test_endpoint_config_has_primary_and_canary_from_the_config(default_synth: Synth) -> None:
    config = default_synth.config
    variants = {v["VariantName"]: v for v in _variants(default_synth)}
    assert set(variants) == {"primary", "canary"}
    # The fleet make plan recommends (tests/unit/planning/test_default_fleet.py) and its counts; the weights are
    # the seeds'.
    for serving in (config.serving.primary, config.serving.canary):
        assert variants[serving.variant_name]["InstanceType"] == serving.instance_type
        assert variants[serving.variant_name]["InitialInstanceCount"] == serving.initial_instance_count
    assert variants["primary"]["InitialVariantWeight"] == 95
    assert variants["canary"]["InitialVariantWeight"] == 5
    prefix = default_synth.plan.prefix_routing  # throughput.routing = prefix_aware by default
    assert prefix is not None
    for variant in variants.values():
        assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
        assert variant["RoutingConfig"] == {
            "RoutingStrategy": "PREFIX_AWARE",
            "PrefixAwareRoutingConfig": {
                "PrefixLength": prefix.prefix_length_bytes,
                "ConcurrencyThreshold": prefix.concurrency_threshold,
            },
        }
        assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
        # g5 and g6 have local NVMe: SageMaker rejects VolumeSizeInGB there.
        assert "VolumeSizeInGB" not in variant


def test_least_outstanding_routing_synthesizes_the_strategy_alone(tmp_path: Path) -> None:
    synth = synthesize(tmp_path, {"throughput.routing": "least_outstanding"})
    variants = _variants(synth)
    assert len(variants) == 2
    assert all(v["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"} for v in variants)


def test_prefix_aware_routing_synthesizes_both_derived_fields(tmp_path: Path) -> None:
    # The derivation (tests/unit/planning/test_prefix_routing.py): PrefixLength = 64 bytes of JSON + (600 system +
    # 64 conversation tokens) x 4 bytes; ConcurrencyThreshold = the instance's concurrency at the SLO,
    # here measured on the seeds' fleet.
    measured = '{"ml.g5.xlarge": {"concurrency": 6, "requests_per_minute": 150, "ttft_p50_ms": 90}}'
    synth = synthesize(tmp_path, {**SEEDS_G5, "throughput.routing": "prefix_aware", "throughput.measured": measured})
    variants = _variants(synth)
    assert variants
    for variant in variants:
        assert variant["RoutingConfig"] == {
            "RoutingStrategy": "PREFIX_AWARE",
            "PrefixAwareRoutingConfig": {"PrefixLength": 64 + (600 + 64) * 4, "ConcurrencyThreshold": 6},
        }


def test_each_variant_has_its_own_model(default_synth: Synth) -> None:
    template = default_synth.template("Serving")
    models = template.find_resources("AWS::SageMaker::Model")
    assert len(models) == 2
    referenced = {v["ModelName"]["Fn::GetAtt"][0] for v in _variants(default_synth)}
    assert referenced == set(models)


def test_models_are_network_isolated_and_carry_engine_settings(default_synth: Synth) -> None:
    template = default_synth.template("Serving")
    for variant in ("primary", "canary"):
        template.has_resource_properties(
            "AWS::SageMaker::Model",
            {
                "EnableNetworkIsolation": True,
                "PrimaryContainer": {
                    "Mode": "SingleModel",
                    "Environment": Match.object_like(
                        {
                            env.ENGINE_GPU_MEMORY_UTILIZATION: "0.92",
                            env.ENGINE_MAX_NUM_SEQS: "128",
                            env.ENGINE_MAX_MODEL_LEN: "4096",
                            env.ENGINE_MAX_NUM_BATCHED_TOKENS: "8192",
                            env.ENGINE_BLOCK_SIZE: "16",
                            env.LORA_ADAPTERS: "manga_domain_v3,general_support_v2,jp_style_v1",
                            env.LORA_MAX_RANK: "16",
                            env.ENDPOINT_NAME: "mangaassist-vllm-prod",
                            env.VARIANT_NAME: variant,
                        }
                    ),
                },
            },
        )


def test_engine_setting_override_reaches_the_container_without_touching_the_image(tmp_path) -> None:
    from tests.synth_helpers import synthesize

    synth = synthesize(tmp_path, {"engine.max_num_seqs": "96"})
    models = synth.template("Serving").find_resources("AWS::SageMaker::Model")
    for model in models.values():
        assert model["Properties"]["PrimaryContainer"]["Environment"][env.ENGINE_MAX_NUM_SEQS] == "96"
        assert model["Properties"]["PrimaryContainer"]["Image"]["Fn::Join"][1][-1] == (
            ":" + synth.stacks.image_build.image_tags["primary"]  # type: ignore[union-attr]
        )


def test_endpoint_retains_counts_and_weights(default_synth: Synth) -> None:
    default_synth.template("Serving").has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": "mangaassist-vllm-prod",
            "RetainAllVariantProperties": True,
            "ExcludeRetainedVariantProperties": Match.absent(),
        },
    )


def test_execution_role_is_least_privilege(default_synth: Synth) -> None:
    template = default_synth.template("Serving")
    roles = {
        k: v
        for k, v in template.find_resources("AWS::IAM::Role").items()
        if v["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "sagemaker.amazonaws.com"}
        # The cache-making job's role (test_compile_cache.py), the capacity job's (test_capacity_job.py).
        and not k.startswith(("CompileCache", "CapacityJob"))
    }
    assert len(roles) == 1
    ((role_id, role),) = roles.items()
    assert "ManagedPolicyArns" not in role["Properties"]
    (policy,) = [
        p
        for p in template.find_resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {}
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            by_action[action] = statement
    # No cloudwatch:PutMetricData: the container's metrics are EMF lines in its log group.
    assert set(by_action) == {
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
        "ecr:GetAuthorizationToken",
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
        # The model data SageMaker downloads: the compile cache, under compile-cache/ only.
        "s3:GetObject",
        "s3:ListBucket",
    }
    assert json.dumps(by_action["s3:GetObject"]["Resource"]).endswith('/compile-cache/*"]]}')
    assert by_action["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": ["compile-cache/*"]}}
    # Pull is scoped to the one repository (imported from the image repository stack).
    assert "Fn::ImportValue" in by_action["ecr:BatchGetImage"]["Resource"]
    # Writes only to the endpoint's own log group (any stream: SageMaker names them per instance).
    log_group_arn = json.dumps(by_action["logs:PutLogEvents"]["Resource"])
    assert log_group_arn.endswith(':log-group:/aws/sagemaker/Endpoints/mangaassist-vllm-prod:*"]]}'), log_group_arn
    assert not any("FullAccess" in str(statement) for statement in statements)


def test_log_group_is_the_one_sagemaker_writes_to_and_is_adopted_when_it_exists(default_synth: Synth) -> None:
    """CDK's LogRetention creates the group or adopts the one an earlier stack left (retained on
    delete), so deleting the stack and deploying it again works (issue 20); no
    AWS::Logs::LogGroup of that fixed name would survive a re-create."""
    template = default_synth.template("Serving")
    template.has_resource_properties(
        "Custom::LogRetention",
        {
            "LogGroupName": "/aws/sagemaker/Endpoints/mangaassist-vllm-prod",
            "RetentionInDays": 365,
            "RemovalPolicy": "retain",
        },
    )
    assert (
        template.find_resources(
            "AWS::Logs::LogGroup", {"Properties": {"LogGroupName": "/aws/sagemaker/Endpoints/mangaassist-vllm-prod"}}
        )
        == {}
    )


def _log_group_keys(synth: Synth, unit: str) -> dict[str, Any]:
    """LogGroupName -> the Custom::LogGroupKey resource of that group."""
    found = synth.template(unit).find_resources("Custom::LogGroupKey")
    return {r["Properties"]["LogGroupName"]: r for r in found.values()}


def test_the_endpoints_log_group_is_encrypted_with_the_stacks_key(
    default_synth: Synth, components_synth: Synth
) -> None:
    """Issue 49, finding 8: LogRetention has no KMS option, so the endpoint's group (every line the container
    writes) was on CloudWatch's default key while every other group used the stack's."""
    template = default_synth.template_json("Serving")
    keys = _log_group_keys(default_synth, "Serving")
    assert set(keys) == {"/aws/sagemaker/Endpoints/mangaassist-vllm-prod"}
    (key_id,) = [
        lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::KMS::Key" and lid.startswith("LogsKey")
    ]
    resource = keys["/aws/sagemaker/Endpoints/mangaassist-vllm-prod"]
    assert resource["Properties"]["KmsKeyArn"] == {"Fn::GetAtt": [key_id, "Arn"]}
    retention = [lid for lid in resource["DependsOn"] if lid.startswith("EndpointLogGroupRetention")]
    assert retention  # the group exists (created or adopted) before the key is set on it
    # The same key every custom-resource log group of the stack uses.
    groups = [r for r in template["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert groups and all(g["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]} for g in groups)
    components = _log_group_keys(components_synth, "Serving")
    assert "/aws/sagemaker/Endpoints/mangaassist-vllm-prod" in components
    assert any(name.startswith("/aws/sagemaker/InferenceComponents/") for name in components)


def test_processing_job_logs_are_kept_a_year_retained_and_shared(default_synth: Synth, dev_synth: Synth) -> None:
    """Issue 49, finding 8: /aws/sagemaker/ProcessingJobs (the compile cache's jobs, the release steps) kept logs
    forever. Account-wide: the same retention in every stage, never deleted with a stack, no stack's key."""
    for synth in (default_synth, dev_synth):
        for unit in ("Serving", "ModelRelease"):
            synth.template(unit).has_resource_properties(
                "Custom::LogRetention",
                {"LogGroupName": "/aws/sagemaker/ProcessingJobs", "RetentionInDays": 365, "RemovalPolicy": "retain"},
            )
            assert "/aws/sagemaker/ProcessingJobs" not in _log_group_keys(synth, unit)


def test_outputs_name_the_endpoint_and_variants(default_synth: Synth) -> None:
    template = default_synth.template("Serving")
    template.has_output(outputs.ENDPOINT_NAME, {"Value": "mangaassist-vllm-prod"})
    template.has_output(outputs.PRIMARY_VARIANT_NAME, {"Value": "primary"})
    template.has_output(outputs.CANARY_VARIANT_NAME, {"Value": "canary"})


def test_dev_overlay_shrinks_the_fleet(dev_synth: Synth) -> None:
    variants = {v["VariantName"]: v for v in _variants(dev_synth)}
    assert variants["primary"]["InitialInstanceCount"] == 1
    dev_synth.template("Serving").has_resource_properties(
        "AWS::SageMaker::Endpoint", {"EndpointName": "mangaassist-vllm-dev"}
    )
    dev_synth.template("Serving").has_resource_properties(
        "Custom::LogRetention",
        {
            "LogGroupName": "/aws/sagemaker/Endpoints/mangaassist-vllm-dev",
            "RetentionInDays": 7,
            "RemovalPolicy": "destroy",
        },
    )


def test_vpc_placement_single_variant_and_digest(vpc_single_variant_synth: Synth) -> None:
    synth = vpc_single_variant_synth
    template = synth.template("Serving")
    assert [v["VariantName"] for v in _variants(synth)] == ["primary"]
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {"VpcConfig": {"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]}},
    )
    model = next(iter(template.find_resources("AWS::SageMaker::Model").values()))
    assert model["Properties"]["PrimaryContainer"]["Image"]["Fn::Join"][1][-1] == "@sha256:" + "ab" * 32
    policy = next(iter(template.find_resources("AWS::IAM::Policy").values()))
    actions = {
        a
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert "ec2:CreateNetworkInterface" in actions
    assert outputs.CANARY_VARIANT_NAME not in template.to_json()["Outputs"]


def test_canary_can_run_its_own_prebuilt_image(tmp_path) -> None:
    from tests.config_helpers import PREBUILT_DEV
    from tests.synth_helpers import synthesize

    synth = synthesize(tmp_path, {**PREBUILT_DEV, "image.canary.tag": "candidate-v2"})
    images = {
        m["Properties"]["PrimaryContainer"]["Environment"][env.VARIANT_NAME]: m["Properties"]["PrimaryContainer"][
            "Image"
        ]["Fn::Join"][1][-1]
        for m in synth.template("Serving").find_resources("AWS::SageMaker::Model").values()
    }
    assert images == {"primary": ":vllm0.26.0-llama3-8b-awq-lora3-v1", "canary": ":candidate-v2"}


def _has_warning(synth: Synth, text: str) -> None:
    """The serving stack carries a synth warning with exactly ``text``."""
    assertions.Annotations.from_stack(synth.stacks.serving).has_warning(
        "*", assertions.Match.string_like_regexp(re.escape(text))
    )


def test_vpc_placement_of_an_isolated_container_warns(vpc_single_variant_synth: Synth, default_synth: Synth) -> None:
    # VPC_OVERRIDES keeps network isolation on (the default): the subnets give the container nothing.
    warning = (
        "serving.vpc is set while serving.network_isolation = true: the container makes no network calls, so VPC "
        "placement gives it nothing (SageMaker still creates its network interfaces in the subnets); drop "
        "serving.vpc, or set serving.network_isolation = false if the container must reach the VPC"
    )
    _has_warning(vpc_single_variant_synth, warning)
    assertions.Annotations.from_stack(default_synth.stacks.serving).has_no_warning(
        "*", assertions.Match.string_like_regexp("serving.vpc is set")
    )


def test_models_wait_for_the_roles_grants(default_synth: Synth, components_synth: Synth) -> None:
    # CreateModel checks the role can pull the image: the policy with the ECR grant must exist first.
    for synth in (default_synth, components_synth):
        template = synth.template_json("Serving")
        (policy_id,) = [
            k
            for k, v in template["Resources"].items()
            if v["Type"] == "AWS::IAM::Policy" and v["Properties"]["PolicyName"].startswith("ExecutionRole")
        ]
        models = [v for v in template["Resources"].values() if v["Type"] == "AWS::SageMaker::Model"]
        assert models
        assert all(policy_id in model.get("DependsOn", []) for model in models)


def test_multi_gpu_instances_run_one_engine_per_gpu_group_and_the_gpu_alarm_counts_them(tmp_path: Path) -> None:
    # ml.g5.12xlarge has 4 A10Gs; tensor_parallel_size 2 makes 2 data-parallel engines of 2 GPUs
    # each. SageMaker sums GPUMemoryUtilization over all 4 (0-400 %), and every one fills up.
    synth = synthesize(
        tmp_path,
        {
            **SEEDS_G5,
            # a cold SLO two A10Gs per engine hold with the A10G projection's 35 % margin (TTFT p95 675 ms alone;
            # synth names 911 ms as the least it holds)
            "slo.cold.ttft_p95_ms": "950",
            "serving.primary.instance_type": "ml.g5.12xlarge",
            "serving.canary.instance_type": "ml.g5.12xlarge",
            "engine.tensor_parallel_size": "2",
        },
    )
    (alarm,) = [
        a["Properties"]
        for a in synth.template("Observability").find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("AlarmName", "").endswith("gpu-memory-high")
    ]
    assert alarm["Threshold"] == 98 * 4
    models = synth.template("Serving").find_resources("AWS::SageMaker::Model").values()
    environments = [m["Properties"]["PrimaryContainer"]["Environment"] for m in models]
    assert environments and all(e["ENGINE_DATA_PARALLEL_SIZE"] == "2" for e in environments)
    assert all(e["ENGINE_TENSOR_PARALLEL_SIZE"] == "2" for e in environments)


def test_a_single_gpu_instance_sets_no_data_parallel_size(default_synth: Synth) -> None:
    models = default_synth.template("Serving").find_resources("AWS::SageMaker::Model").values()
    assert models
    assert all("ENGINE_DATA_PARALLEL_SIZE" not in m["Properties"]["PrimaryContainer"]["Environment"] for m in models)


def test_each_mode_gives_the_stack_the_same_face(default_synth: Synth, components_synth: Synth) -> None:
    variants, components = default_synth.stacks.serving.endpoint, components_synth.stacks.serving.endpoint
    assert isinstance(variants, VariantsServing) and isinstance(components, ComponentsServing)
    assert variants.rollout_target is variants.endpoint  # blue/green updates the endpoint
    assert components.rollout_target is components.endpoint_construct.base_component  # rolling updates
    assert sorted(variants.scalable_targets) == ["canary", "primary"]
    assert list(components.scalable_targets) == ["mangaassist-vllm-prod-base"]
    assert (len(variants.log_groups), len(components.log_groups)) == (1, 2)
    assert list(variants.outputs) == [outputs.CANARY_VARIANT_NAME]
    assert outputs.BASE_COMPONENT_NAME in components.outputs
