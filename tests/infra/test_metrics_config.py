"""The endpoint config says MetricsConfig explicitly in both topologies (issue 24 item 2)."""

import pytest

from app_config import load_config
from planning.make_plan import make_plan
from stacks.serving_stack import _hosting
from tests.synth_helpers import Synth, cdk_json_context


@pytest.mark.parametrize("synth_name", ["default_synth", "components_synth"])
def test_endpoint_config_turns_detailed_observability_on_explicitly(
    synth_name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(synth_name)
    configs = synth.template("Serving").find_resources("AWS::SageMaker::EndpointConfig")
    assert [c["Properties"]["MetricsConfig"] for c in configs.values()] == [
        {"EnableDetailedObservability": True, "MetricPublishFrequencyInSeconds": 60}
    ]


def test_detailed_observability_and_frequency_follow_the_config() -> None:
    config = load_config(
        {
            **cdk_json_context(),
            "observability.detailed_observability": "false",
            "observability.metric_publish_frequency_s": "10",
        }
    )
    metrics = _hosting(config, make_plan(config)).metrics_config
    assert metrics.enable_detailed_observability is False
    assert metrics.metric_publish_frequency_in_seconds == 10


def test_a_publish_frequency_sagemaker_refuses_is_refused_at_synth() -> None:
    with pytest.raises(ValueError) as error:
        load_config({**cdk_json_context(), "observability.metric_publish_frequency_s": "15"})
    assert str(error.value) == (
        "config error: observability.metric_publish_frequency_s = '15': must be one of 10, 30, 60, 120, 180, 240 or 300"
    )
