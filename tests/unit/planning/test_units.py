"""Plan.units (issue 55): every unit the endpoint deploys, decided once from the serving mode and the variants'
switches, with its hardware, image, bounds and resolved scaling."""

from planning.make_plan import load_plan
from tests.conftest import COMPONENTS, SHADOW


def _overrides(values: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in values.items()]


def test_variants_mode_deploys_the_primary_and_the_canary() -> None:
    _, plan = load_plan([])
    primary, canary = plan.units
    assert [(u.key, u.role, u.name, u.image, u.unit_of_scale) for u in plan.units] == [
        ("primary", "variant", "primary", "primary", "instances"),
        ("canary", "variant", "canary", "canary", "instances"),
    ]
    assert primary.hardware is plan.hardware["primary"]
    assert primary.scaling is plan.scaling.primary  # resolved: the derived targets are set
    assert (primary.min_capacity, primary.max_capacity, primary.weight) == (2, 6, 95)
    assert plan.instance_units == plan.units
    assert [v.key for v in plan.deployed_variants()] == ["primary", "canary"]
    assert plan.unit("base") is None and plan.unit("canary") is canary


def test_the_shadow_phase_deploys_the_primary_and_the_shadow() -> None:
    config, plan = load_plan(_overrides(SHADOW))
    assert [(u.key, u.role) for u in plan.units] == [("primary", "variant"), ("shadow", "shadow")]
    shadow = plan.units[1]
    assert shadow.weight == config.serving.shadow.weight(config.serving.primary.initial_weight)
    assert shadow.scaling is plan.scaling.shadow
    assert [u.key for u in plan.instance_units] == ["primary"]  # the shadow answers nobody


def test_inference_components_mode_deploys_a_base_and_one_component_per_adapter() -> None:
    config, plan = load_plan(_overrides(COMPONENTS))
    base, *adapters = plan.units
    assert (base.role, base.name, base.variant_name, base.image, base.unit_of_scale) == (
        "base_component",
        "mangaassist-vllm-prod-base",
        "primary",
        "primary",
        "copies",
    )
    assert (base.min_capacity, base.max_capacity) == (
        config.serving.inference_components.min_copy_count,
        config.serving.inference_components.max_copy_count,
    )
    assert base.scaling is plan.inference_components.scaling  # its copy target derived
    assert [(u.key, u.role, u.image, u.scaling) for u in adapters] == [
        (a.name, "adapter_component", None, None) for a in config.model.adapters
    ]
    assert all(u.hardware is plan.hardware["primary"] for u in plan.units)  # the one variant's instances
    assert [v.key for v in plan.deployed_variants()] == ["primary"]
    assert plan.instance_unit("primary") is base
