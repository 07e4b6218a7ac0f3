"""A ``serving.mode`` switch under the same endpoint name cannot deploy (issue 20, finding 3):
``make diff`` refuses it with the procedure, on real Serving templates of both modes."""

import pytest

from devtools.mode_switch import mode_switch_refusal
from tests.synth_helpers import Synth, synthesize

RENAMED = "mangaassist-ic-prod"


@pytest.fixture(scope="module")
def renamed_components_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    from tests.conftest import COMPONENTS

    return synthesize(
        tmp_path_factory.mktemp("cdk-out-components-renamed"), {**COMPONENTS, "serving.endpoint_name": RENAMED}
    )


def test_a_switch_under_the_same_name_is_refused_with_the_procedure(
    default_synth: Synth, components_synth: Synth
) -> None:
    before, after = default_synth.template_json("Serving"), components_synth.template_json("Serving")
    assert mode_switch_refusal(before, after) == (
        "serving.mode changes from variants to inference_components on endpoint 'mangaassist-vllm-prod': "
        "CloudFormation would create the new endpoint before deleting the old one, under the same name, and fail. "
        "Set a new serving.endpoint_name in the same change (both fleets run until the old one is deleted; callers "
        "read the new name from the stack's EndpointName output), or destroy the Serving stack first (downtime) "
        "(docs/deploy.md#switching-serving-mode)"
    )
    # And back: the same refusal, the other way round.
    back = mode_switch_refusal(after, before)
    assert back is not None and back.startswith("serving.mode changes from inference_components to variants")


def test_a_switch_with_a_new_endpoint_name_deploys(default_synth: Synth, renamed_components_synth: Synth) -> None:
    before, after = default_synth.template_json("Serving"), renamed_components_synth.template_json("Serving")
    assert mode_switch_refusal(before, after) is None
    old_endpoint = next(iter(default_synth.template("Serving").find_resources("AWS::SageMaker::Endpoint").values()))
    new_endpoint = next(
        iter(renamed_components_synth.template("Serving").find_resources("AWS::SageMaker::Endpoint").values())
    )
    assert old_endpoint["Properties"]["EndpointName"] != new_endpoint["Properties"]["EndpointName"] == RENAMED


def test_no_switch_no_refusal(default_synth: Synth, dev_synth: Synth) -> None:
    assert mode_switch_refusal(default_synth.template_json("Serving"), default_synth.template_json("Serving")) is None
    assert mode_switch_refusal(default_synth.template_json("Serving"), dev_synth.template_json("Serving")) is None
