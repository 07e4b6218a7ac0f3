"""Finding an inference_components endpoint: stack outputs, DescribeStacks, config; flags of the other mode."""

import json

import pytest

from ops.cli import main
from ops.endpoint import EndpointRef, ref_from_config, ref_from_outputs_file, ref_from_stack
from ops.exit_codes import ExitCode, OpsError
from tests.unit.ops.ops_stubs import (
    ADAPTER_COMPONENTS,
    ADAPTERS,
    BASE,
    ENDPOINT,
    FakeClock,
    component_outputs,
    stubbed,
    write_component_outputs,
)

EXPECTED = EndpointRef(ENDPOINT, "primary", None, "inference_components", BASE, ADAPTER_COMPONENTS)


def test_outputs_file_gives_mode_base_and_adapter_components(tmp_path):
    path = write_component_outputs(tmp_path)
    assert ref_from_outputs_file(path, "MangaAssist-prod-Serving", ADAPTERS) == EXPECTED


def test_describe_stacks_gives_the_same_names():
    outputs = [{"OutputKey": key, "OutputValue": value} for key, value in component_outputs().items()]
    with stubbed() as stubs:
        stubs.cloudformation.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "MangaAssist-prod-Serving",
                        "CreationTime": "2026-11-20T00:00:00Z",
                        "StackStatus": "UPDATE_COMPLETE",
                        "Outputs": outputs,
                    }
                ]
            },
            {"StackName": "MangaAssist-prod-Serving"},
        )
        ref = ref_from_stack(stubs.clients.cloudformation, "MangaAssist-prod-Serving", ADAPTERS)
    assert ref == EXPECTED


def test_config_names_follow_the_serving_contract():
    assert ref_from_config(ENDPOINT, "inference_components", ADAPTERS) == EndpointRef(
        ENDPOINT, None, None, "inference_components", BASE, ADAPTER_COMPONENTS
    )
    assert ref_from_config(ENDPOINT, "variants", ADAPTERS) == EndpointRef(ENDPOINT, None, None)


def test_endpoint_name_too_long_for_component_names_is_a_usage_error():
    name = "e" * 50
    with pytest.raises(OpsError) as info:
        ref_from_config(name, "inference_components", ("general_support_v2",))
    assert info.value.code == ExitCode.USAGE
    assert str(info.value) == (
        f"--endpoint-name {name}: inference component name '{name}-general-support-v2' (69 characters) must be 1-63 "
        "letters, digits and hyphens (SageMaker InferenceComponentName); shorten serving.endpoint_name or the adapter "
        "name"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"ServingMode": "multi_model"},
            "stack MangaAssist-prod-Serving: output 'ServingMode' is 'multi_model'; expected one of variants, "
            "inference_components",
        ),
        (
            {"BaseInferenceComponentName": ""},
            "stack MangaAssist-prod-Serving: no output 'BaseInferenceComponentName' (ServingMode is "
            "inference_components)",
        ),
    ],
)
def test_bad_component_outputs_are_usage_errors(tmp_path, capsys, extra, message):
    path = write_component_outputs(tmp_path, **extra)
    with stubbed() as stubs:
        code = main(["smoke", "--stack-outputs", str(path)], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == f"error: --stack-outputs {path}: {message}"


def test_outputs_without_serving_mode_are_variants(tmp_path):
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"MangaAssist-prod-Serving": {"EndpointName": ENDPOINT, "CanaryVariantName": "c"}}))
    assert ref_from_outputs_file(path, "MangaAssist-prod-Serving", ADAPTERS) == EndpointRef(ENDPOINT, None, "c")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["smoke", "--variant", "primary"],
            "--variant: not used in inference_components mode ({e}): requests go "
            "to inference components; pick them with --adapter",
        ),
        (
            ["load", "--variant", "primary"],
            "--variant: not used in inference_components mode ({e}): requests go "
            "to inference components; pick them with --adapter",
        ),
        (
            ["load", "--instances", "2"],
            "--instances: not used in inference_components mode ({e}): the suggestion "
            "is per copy of the base component; see --copies",
        ),
        (
            ["promote", "--steps", "50,100"],
            "--steps: not used in inference_components mode ({e}): the base "
            "component's rolling update has no traffic steps; see --rollout-timeout-s",
        ),
        (
            ["promote", "--watch-s", "60"],
            "--watch-s: not used in inference_components mode ({e}): SageMaker bakes "
            "each batch of the rolling update; see --rollout-timeout-s",
        ),
        (
            ["promote", "--primary-variant", "p"],
            "--primary-variant: not used in inference_components mode ({e}): "
            "its one variant hosts inference components",
        ),
        (
            ["rollback", "--canary-variant", "c"],
            "--canary-variant: not used in inference_components mode ({e}): "
            "there is no canary variant; the base component rolls its updates",
        ),
    ],
)
def test_variant_flags_are_refused_in_component_mode(tmp_path, capsys, argv, message):
    path = write_component_outputs(tmp_path)
    with stubbed() as stubs:
        code = main([*argv, "--stack-outputs", str(path)], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == "error: " + message.format(e=ENDPOINT)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["load", "--copies", "2"],
            "--copies: not used in variants mode ({e}): the suggestion is per instance; see --instances",
        ),
        (
            ["promote", "--expect-image", "repo:v2"],
            "--expect-image: not used in variants mode ({e}): promote "
            "shifts traffic to the canary variant, which runs its own image",
        ),
    ],
)
def test_component_flags_are_refused_in_variants_mode(capsys, argv, message):
    with stubbed() as stubs:
        code = main([*argv, "--endpoint-name", ENDPOINT], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == "error: " + message.format(e=ENDPOINT)
