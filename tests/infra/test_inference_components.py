"""serving.mode = inference_components: the endpoint, its components, their scaling, guardrails,
grants, monitoring dimensions and the image that bakes no adapters."""

import json
from typing import Any

from aws_cdk.assertions import Match

from cdk_constructs.image import image_inputs
from planning.planner import Planner
from serving_contract import outputs
from serving_contract.metrics import SAGEMAKER_COMPONENT_NAMESPACE, SAGEMAKER_NAMESPACE
from tests.metric_refs import metrics_read, resources
from tests.synth_helpers import Synth

BASE = "mangaassist-vllm-prod-base"
ADAPTER_COMPONENTS = {
    "manga_domain_v3": "mangaassist-vllm-prod-manga-domain-v3",
    "general_support_v2": "mangaassist-vllm-prod-general-support-v2",
    "jp_style_v1": "mangaassist-vllm-prod-jp-style-v1",
}


def _components(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["InferenceComponentName"]: r["Properties"]
        for r in resources(template, "AWS::SageMaker::InferenceComponent").values()
    }


def test_endpoint_config_hosts_components_on_one_managed_variant(components_synth: Synth) -> None:
    config = components_synth.config
    prefix = components_synth.plan.prefix_routing  # throughput.routing = prefix_aware by default (make plan)
    assert prefix is not None
    routing = {
        "RoutingStrategy": "PREFIX_AWARE",
        "PrefixAwareRoutingConfig": {
            "PrefixLength": prefix.prefix_length_bytes,
            "ConcurrencyThreshold": prefix.concurrency_threshold,
        },
    }
    template = components_synth.template("Serving")
    template.resource_count_is("AWS::SageMaker::EndpointConfig", 1)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ExecutionRoleArn": Match.any_value(),
            "ProductionVariants": [
                Match.object_equals(
                    {
                        "VariantName": "primary",
                        "InstanceType": config.serving.primary.instance_type,
                        "InitialInstanceCount": 2,
                        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 2, "MaxInstanceCount": 20},
                        "RoutingConfig": routing,
                        "InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
                    }
                )
            ],
        },
    )
    # One model, for the base component; its container loads adapters at runtime.
    (model,) = resources(components_synth.template_json("Serving"), "AWS::SageMaker::Model").values()
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    assert environment["LORA_RUNTIME_ADAPTERS"] == "true"
    assert environment["LORA_ADAPTERS"] == ""


def test_base_component_reserves_one_gpu_and_rolls_back_on_its_guardrails(components_synth: Synth) -> None:
    base = _components(components_synth.template_json("Serving"))[BASE]
    assert base["VariantName"] == "primary"
    assert base["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1,
        "NumberOfCpuCoresRequired": 2,
        "MinMemoryRequiredInMb": 8192,
    }
    assert base["Specification"]["StartupParameters"] == {"ContainerStartupHealthCheckTimeoutInSeconds": 600}
    assert base["RuntimeConfig"] == {"CopyCount": 2}
    assert base["DeploymentConfig"] == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 600,
            "MaximumExecutionTimeoutInSeconds": 28800,
            "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
        },
        "AutoRollbackConfiguration": {
            "Alarms": [
                {"AlarmName": f"{BASE}-5xx-rate"},
                {"AlarmName": f"{BASE}-ttft-p95-cold"},
                {"AlarmName": f"{BASE}-ttft-p95-warm"},
                {"AlarmName": f"{BASE}-model-latency-p99"},
                {"AlarmName": f"{BASE}-4xx-rate"},
            ]
        },
    }
    alarm_names = {
        a["Properties"]["AlarmName"]
        for a in resources(components_synth.template_json("Serving"), "AWS::CloudWatch::Alarm").values()
    }
    assert {
        f"{BASE}-5xx-rate",
        f"{BASE}-ttft-p95-cold",
        f"{BASE}-ttft-p95-warm",
        f"{BASE}-model-latency-p99",
        f"{BASE}-4xx-rate",
    } <= alarm_names


def test_one_adapter_component_per_adapter_on_its_pinned_archive(components_synth: Synth) -> None:
    template = components_synth.template_json("Serving")
    components = _components(template)
    assert set(components) == {BASE, *ADAPTER_COMPONENTS.values()}
    versions = {"manga_domain_v3": "v3", "general_support_v2": "v2", "jp_style_v1": "v1"}
    for adapter, name in ADAPTER_COMPONENTS.items():
        spec = components[name]["Specification"]
        assert spec["BaseInferenceComponentName"] == BASE
        assert "ComputeResourceRequirements" not in spec and "RuntimeConfig" not in components[name]
        url = json.dumps(spec["Container"]["ArtifactUrl"])
        assert f"/adapters/{adapter}/{versions[adapter]}/adapter.tar.gz" in url
    # Adapters load into a running base component.
    adapter_resources = [
        r
        for r in resources(template, "AWS::SageMaker::InferenceComponent").values()
        if "BaseInferenceComponentName" in r["Properties"]["Specification"]
    ]
    base_id = next(
        k
        for k, r in resources(template, "AWS::SageMaker::InferenceComponent").items()
        if r["Properties"]["InferenceComponentName"] == BASE
    )
    assert all(base_id in r["DependsOn"] for r in adapter_resources)
    outputs_json = template["Outputs"]
    assert outputs_json[outputs.SERVING_MODE]["Value"] == "inference_components"
    assert outputs_json[outputs.BASE_COMPONENT_NAME]["Value"] == BASE
    for adapter, name in ADAPTER_COMPONENTS.items():
        assert outputs_json[outputs.adapter_component_output(adapter)]["Value"] == name
    assert outputs.CANARY_VARIANT_NAME not in outputs_json


def test_the_container_gets_each_adapters_pinned_sha256(components_synth: Synth) -> None:
    # Issue 22 item 5: on e706d98 only the version reached the template; the container now
    # refuses an adapter whose files do not hash to its pin (tests/container/test_adapter_digest.py).
    template = components_synth.template_json("Serving")
    environments = [
        container["Environment"]
        for model in resources(template, "AWS::SageMaker::Model").values()
        for container in [model["Properties"].get("PrimaryContainer", {})]
        if "Environment" in container
    ]
    assert len(environments) == 1
    pins = components_synth.config.serving.inference_components.adapter_artifacts
    assert json.loads(environments[0]["ADAPTER_SHA256"]) == {
        name: pins[adapter].split("/")[1] for adapter, name in ADAPTER_COMPONENTS.items()
    }


def test_copies_scale_on_concurrency_per_copy_and_never_to_zero_in_prod(components_synth: Synth) -> None:
    template = components_synth.template("Serving")
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": f"inference-component/{BASE}",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
            "MinCapacity": 2,
            "MaxCapacity": 20,
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
                },
                # One engine's concurrency at the TTFT SLOs, the figure variants mode sizes from (issue 40 item 1).
                "TargetValue": Planner.of(components_synth.config)
                .throughput(components_synth.config.serving.primary.instance_type)
                .concurrency,
            },
        },
    )
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 1)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScheduledAction", 0)


def test_dev_scales_to_zero_and_one_failed_request_wakes_it(dev_components_synth: Synth) -> None:
    template = dev_components_synth.template("Serving")
    base = "mangaassist-vllm-dev-base"
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like({"ManagedInstanceScaling": Match.object_like({"MinInstanceCount": 0})})
            ]
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"ResourceId": f"inference-component/{base}", "MinCapacity": 0}
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": SAGEMAKER_NAMESPACE,
            "MetricName": "NoCapacityInvocationFailures",
            "Dimensions": [{"Name": "InferenceComponentName", "Value": base}],
            "Statistic": "Maximum",
            "Period": 60,
            # AWS's example uses GreaterThanThreshold 1, which ignores a single failed request.
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "Threshold": 1,
            "EvaluationPeriods": 1,
            "AlarmActions": [Match.any_value()],
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": Match.object_like(
                {
                    "AdjustmentType": "ChangeInCapacity",
                    "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
                }
            ),
        },
    )


def test_execution_role_reads_exactly_the_adapter_archives(components_synth: Synth) -> None:
    policies = resources(components_synth.template_json("Serving"), "AWS::IAM::Policy")
    # The capacity job's role reads its own folder and code zip (test_capacity_job.py).
    statements = [
        s
        for lid, p in policies.items()
        if not lid.startswith("CapacityJob")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    s3_resources = json.dumps([s["Resource"] for s in statements if any("s3:" in a for a in _actions(s))])
    for adapter, version in (("manga_domain_v3", "v3"), ("general_support_v2", "v2"), ("jp_style_v1", "v1")):
        assert f"/adapters/{adapter}/{version}/adapter.tar.gz" in s3_resources
    assert "/adapters/*" not in s3_resources
    # Listing only the archives' keys, not the whole bucket (issue 22 item 8).
    lists = [s for s in statements if any(a.startswith("s3:List") for a in _actions(s))]
    assert lists and all(_actions(s) == ["s3:ListBucket"] for s in lists)
    # The compile cache's folders are listed by prefix (test_compile_cache.py); the adapters' by key.
    lists = [s for s in lists if "StringEquals" in s["Condition"]]
    assert lists
    for statement in lists:
        prefixes = statement["Condition"]["StringEquals"]["s3:prefix"]
        assert sorted(p.rsplit("/", 3)[1] for p in prefixes) == sorted(
            ["manga_domain_v3", "general_support_v2", "jp_style_v1"]
        )


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_monitoring_reads_the_base_components_metrics(components_synth: Synth) -> None:
    templates = [components_synth.template_json(unit) for unit in ("Serving", "Observability")]
    read = metrics_read(templates)
    assert (SAGEMAKER_COMPONENT_NAMESPACE, "GPUMemoryUtilizationNormalized") in read
    assert not any(namespace == "/aws/sagemaker/Endpoints" for namespace, _ in read)
    alarms = resources(templates[1], "AWS::CloudWatch::Alarm")
    dimensions = json.dumps([a["Properties"] for a in alarms.values()])
    assert '"Name": "InferenceComponentName", "Value": "mangaassist-vllm-prod-base"' in dimensions
    # The gateway emits each adapter's requests under its component name.
    adapter_alarm = next(
        a["Properties"]
        for a in alarms.values()
        if a["Properties"]["AlarmName"].endswith("adapter-jp_style_v1-latency-p95")
    )
    assert "mangaassist-vllm-prod-jp-style-v1" in json.dumps(adapter_alarm)


def test_image_bakes_only_the_base_model(components_synth: Synth, default_synth: Synth) -> None:
    assert image_inputs.docker_build_args(components_synth.config)["LORA_ADAPTERS"] == ""
    baked = image_inputs.baked_artifacts(components_synth.config.serving, components_synth.config.image.build.primary)
    assert baked.adapters == {}
    # An adapter pin change rebuilds the image in variants mode only.
    changed = components_synth.config.image.build.primary.model_copy(
        update={"adapters": {"jp_style_v1": "v9/" + "9" * 64}}
    )
    tag = {
        synth.config.serving.mode: image_inputs.image_tag(
            sources_sha256="s",
            base_model_name="m",
            artifacts=image_inputs.baked_artifacts(synth.config.serving, changed),
            build_args=image_inputs.docker_build_args(synth.config),
            base_images=image_inputs.base_images(synth.config.image),
        )
        for synth in (components_synth, default_synth)
    }
    unchanged_tag = image_inputs.image_tag(
        sources_sha256="s",
        base_model_name="m",
        artifacts=baked,
        build_args=image_inputs.docker_build_args(components_synth.config),
        base_images=image_inputs.base_images(components_synth.config.image),
    )
    assert tag["inference_components"] == unchanged_tag
    assert tag["variants"] != unchanged_tag
