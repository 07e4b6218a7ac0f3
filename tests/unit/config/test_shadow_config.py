"""serving.shadow / scaling.shadow / image(.build).shadow: the shadow variant's config, and the one-line refusals of
what SageMaker refuses with a shadow (botocore's SageMaker model, CreateEndpointConfig.ShadowProductionVariants)."""

import json

from app_config import load_config
from planning.make_plan import make_plan
from planning.planner import Planner
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context

ON = {"serving.shadow.enabled": "true", "serving.canary.enabled": "false"}


def test_the_shadow_is_off_by_default_and_copies_seed_002s_ten_percent_when_on() -> None:
    default = load_config(cdk_json_context()).serving.shadow
    assert not default.enabled
    config = load_config({**cdk_json_context(), **ON})
    shadow = config.serving.shadow
    assert (shadow.variant_name, shadow.sampling_percent, shadow.capture_share) == ("shadow", 10, 10)
    assert shadow.weight(config.serving.primary.initial_weight) == 9.5
    assert (shadow.min_capacity, shadow.initial_instance_count, shadow.max_capacity) == (1, 1, 2)
    # Its own scaling target: the shadow instance type's concurrency at the SLO, as the production variants'.
    tracking = make_plan(config).scaling.shadow.target_tracking
    assert tracking.target_value == Planner.of(config).throughput(shadow.instance_type).concurrency
    assert not tracking.disable_scale_in  # no step policy scales the shadow in


def test_sagemaker_holds_one_production_variant_beside_a_shadow() -> None:
    assert config_error(**{"serving.shadow.enabled": "true"}) == (
        "config error: serving.shadow.enabled = true with serving.canary.enabled = true: an endpoint config with a "
        "shadow variant holds one production variant (CreateEndpointConfig.ShadowProductionVariants); set "
        "serving.canary.enabled = false while the shadow runs (`mangaassist-ops shadow promote` makes it the canary)"
    )


def test_inference_components_have_no_model_for_a_shadow_to_copy_from() -> None:
    pins = json.dumps({name: "v1/" + "1" * 64 for name in ("manga_domain_v3", "general_support_v2", "jp_style_v1")})
    overrides = {**ON, "serving.mode": "inference_components", "serving.inference_components.adapter_artifacts": pins}
    assert config_error(overrides) == (
        "config error: serving.shadow.enabled = true needs serving.mode = variants: a shadow variant copies the "
        "requests of the production variant's model (CreateEndpointConfig.ShadowProductionVariants), and in "
        "inference_components mode that variant hosts components, not a model"
    )


def test_the_shadow_has_every_variants_one_line_errors() -> None:
    assert config_error(ON, **{"serving.shadow.initial_instance_count": "3"}) == (
        "config error: serving.shadow: initial_instance_count = 3 must be within min_capacity = 1 .. max_capacity = 2"
    )
    assert config_error(ON, **{"serving.shadow.instance_type": "ml.m5.xlarge"}).startswith(
        "config error: serving.shadow.instance_type = 'ml.m5.xlarge': "
    )
    assert config_error(ON, **{"serving.shadow.variant_name": "primary"}) == (
        "config error: serving: shadow.variant_name = 'primary' must differ from the production variants' names "
        "(primary)"
    )
    assert config_error(ON, **{"serving.shadow.sampling_percent": "0"}) == (
        "config error: serving.shadow.sampling_percent = '0': must be >= 1"
    )
    assert config_error(ON, **{"serving.shadow.sampling_pct": "5"}) == (
        "config error: serving.shadow.sampling_pct: unknown key; did you mean 'serving.shadow.sampling_percent'?"
    )


def test_the_shadows_instance_must_hold_the_engine() -> None:
    assert config_error(
        ON,
        **{
            "engine.tensor_parallel_size": "2",
            "serving.primary.instance_type": "ml.g6.12xlarge",
            "serving.shadow.instance_type": "ml.g6.xlarge",
        },
    ).startswith(
        "config error: engine.tensor_parallel_size = 2: serving.shadow.instance_type = ml.g6.xlarge has 1 GPU(s)"
    )


def test_the_shadows_pins_name_every_adapter_and_its_prebuilt_image_only_in_prebuilt_mode() -> None:
    pins = json.dumps({"base_model": "v2/" + "2" * 64, "adapters": {"manga_domain_v3": "v4/" + "3" * 64}})
    assert config_error(ON, **{"image.build.shadow": pins}) == (
        "config error: image.build.shadow.adapters pins [manga_domain_v3] but model.adapters is [general_support_v2, "
        "jp_style_v1, manga_domain_v3]; pin exactly one version per configured adapter"
    )
    assert config_error(ON, **{"image.shadow.tag": "v2"}) == (
        "config error: image: shadow.tag = 'v2' is read only with image.source = prebuilt, and source is build (the "
        "shadow's image is built from image.build.shadow's artifact pins): set image.source=prebuilt to run that "
        "image, or pin image.build.shadow"
    )


def test_capturing_more_than_the_shadowed_share_is_refused() -> None:
    """Issue 53, finding 12: the comparison reads answer distributions; more of the primary than is shadowed is user
    data it never uses."""
    assert config_error({**ON, "serving.shadow.capture_percent": "100"}) == (
        "config error: serving.shadow: capture_percent = 100 is above sampling_percent = 10: the shadow comparison "
        "reads answer distributions, so capturing more of the primary's answers than is shadowed keeps user data it "
        "never uses; leave capture_percent unset (= sampling_percent) or lower it"
    )
