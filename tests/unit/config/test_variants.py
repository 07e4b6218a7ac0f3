"""AppConfig.variants(): one way to walk the variants with both sections of each (issue 27)."""

from app_config import load_config
from tests.conftest import COMPONENTS
from tests.synth_helpers import cdk_json_context


def test_each_variant_carries_its_serving_and_scaling_sections() -> None:
    config = load_config(cdk_json_context())
    primary, canary = config.variants()
    assert (primary.key, primary.name, primary.is_primary) == ("primary", "primary", True)
    assert (canary.key, canary.name, canary.is_primary) == ("canary", "canary", False)
    assert primary.serving is config.serving.primary and primary.scaling is config.plan.scaling.primary
    assert canary.serving is config.serving.canary and canary.scaling is config.plan.scaling.canary
    # After the config derived it, the scaling section is the one the variant carries.
    assert canary.scaling.target_tracking.concurrent_requests_target is not None
    assert config.deployed_variants() == config.variants()


def test_a_disabled_canary_and_inference_components_leave_the_primary() -> None:
    no_canary = load_config({**cdk_json_context(), "serving.canary.enabled": "false"})
    assert [v.key for v in no_canary.variants()] == ["primary"]
    assert no_canary.variant("canary").serving is no_canary.serving.canary  # still configured
    components = load_config({**cdk_json_context(), **COMPONENTS})
    assert [v.key for v in components.variants()] == ["primary", "canary"]
    assert [v.key for v in components.deployed_variants()] == ["primary"]
