"""Plan.variants(): one way to walk the variants with both sections of each (issue 27)."""

from app_config import load_config
from app_config.variants import deployed_variant_keys, existing_variant_keys
from planning.make_plan import make_plan
from tests.conftest import COMPONENTS
from tests.synth_helpers import cdk_json_context


def test_each_variant_carries_its_serving_and_scaling_sections() -> None:
    config = load_config(cdk_json_context())
    plan = make_plan(config)
    primary, canary = plan.variants()
    assert (primary.key, primary.name, primary.is_primary) == ("primary", "primary", True)
    assert (canary.key, canary.name, canary.is_primary) == ("canary", "canary", False)
    assert primary.serving is config.serving.primary and primary.scaling is plan.scaling.primary
    assert canary.serving is config.serving.canary and canary.scaling is plan.scaling.canary
    # The scaling section a variant carries is the plan's, with the derived values set; the config's is unset.
    assert config.scaling.canary.target_tracking.concurrent_requests_target is None
    assert canary.scaling.target_tracking.concurrent_requests_target is not None
    assert plan.deployed_variants() == plan.variants()


def test_a_disabled_canary_and_inference_components_leave_the_primary() -> None:
    no_canary = load_config({**cdk_json_context(), "serving.canary.enabled": "false"})
    plan = make_plan(no_canary)
    assert [v.key for v in plan.variants()] == ["primary"] == list(existing_variant_keys(no_canary.serving))
    assert plan.variant("canary").serving is no_canary.serving.canary  # still configured
    components = load_config({**cdk_json_context(), **COMPONENTS})
    plan = make_plan(components)
    assert [v.key for v in plan.variants()] == ["primary", "canary"] == list(existing_variant_keys(components.serving))
    assert [v.key for v in plan.deployed_variants()] == ["primary"] == list(deployed_variant_keys(components.serving))
