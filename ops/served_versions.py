"""Do the answers come from the pinned versions? (issue 36)

Each answer of the container names the base-model and adapter versions that produced it in
``CustomAttributes`` (container/serving_app/versions.py: ``base_model=<name>/<pin>;adapter=<name>/<pin>``).
``ops smoke`` and ``ops rollback`` compare it with the pins the config bakes into each variant's image
(``app_config.pins.built_artifact_sets``; a canary without a set of its own runs the primary's image).
Nothing is compared where no pin is known (``image.source = prebuilt``, inference components, a placeholder).
"""

from collections.abc import Mapping

from app_config.image_build import PLACEHOLDER_SHA256, pin_sha256
from app_config.pins import built_artifact_sets
from app_config.root import AppConfig
from app_config.variants import deployed_variant_keys


def expected_versions(config: AppConfig) -> dict[str, dict[str, str]]:
    """``{variant name: {served model or adapter: pin}}`` of every variant whose image this config builds."""
    sets = built_artifact_sets(config)
    if "primary" not in sets or config.serving.hosts_inference_components:
        return {}
    expected = {}
    for key in deployed_variant_keys(config.serving):
        artifacts = sets.get(key, sets["primary"])
        pins = {config.model.name: artifacts.base_model, **artifacts.adapters}
        if not any(pin_sha256(pin) == PLACEHOLDER_SHA256 for pin in pins.values()):  # a placeholder never deploys
            expected[getattr(config.serving, key).variant_name] = pins
    return expected


def _attributes(text: str) -> dict[str, str]:
    pairs = (item.partition("=") for item in text.replace(",", ";").split(";"))
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def version_problem(custom_attributes: str | None, expected: Mapping[str, str], *, base: str, model: str) -> str | None:
    """What differs between an answer's named versions and ``expected`` (one line), or None when they match."""
    if not custom_attributes:
        return "the answer names no versions (no CustomAttributes; an image older than issue 36?)"
    named = _attributes(custom_attributes)
    wanted = {"base_model": f"{base}/{expected.get(base, 'unknown')}"}
    if model != base:
        wanted["adapter"] = f"{model}/{expected.get(model, 'unknown')}"
    wrong = [f"{key} {named.get(key)!r}, pinned {value!r}" for key, value in wanted.items() if named.get(key) != value]
    return "served " + "; ".join(wrong) if wrong else None
