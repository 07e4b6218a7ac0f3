"""Which artifact pins a deploy of this config would use while they still hold the placeholder.

The defaults name the seeds' versions with a placeholder sha256 (``PLACEHOLDER_SHA256``), so
that `make synth` works offline on a fresh checkout. A deploy must not start with them: the image
build would fail minutes in (``lambdas/image_build/index.py`` refuses them), after CloudFormation
has created the stacks before it. This module names them, once, for everything that refuses a
deploy before anything is created: the ImageBuild stack's CloudFormation rule
(``stacks/image_build_stack.py``), `make synth`'s summary and ``ops preflight``.
"""

from app_config.image_build import PLACEHOLDER_SHA256, ArtifactSetConfig, pin_sha256
from app_config.model import AppConfig

DEPLOY_DOC = "docs/deploy.md"
RULE_ID = "ArtifactPinsSet"
"""Logical id of the ImageBuild template's CloudFormation rule that refuses placeholder pins."""


def built_artifact_sets(config: AppConfig) -> dict[str, ArtifactSetConfig]:
    """``{"primary": ..., "canary": ...}``: the artifact sets the image build bakes in.

    Empty with ``image.source = prebuilt``; the canary's only when it is built (a canary set,
    the canary enabled, variants mode), as ``stacks/image_build_stack.py`` decides.
    """
    if config.image.source != "build":
        return {}
    build = config.image.build
    sets = {"primary": build.primary}
    if build.canary is not None and config.serving.canary.enabled and config.serving.mode == "variants":
        sets["canary"] = build.canary
    return sets


def placeholder_pins(config: AppConfig) -> list[tuple[str, str]]:
    """``(config key, pin)`` for every pin a deploy of ``config`` uses that holds the placeholder.

    Covers the pins baked into images (``image.build.<variant>.base_model`` and
    ``.adapters.<name>``) and, in inference_components mode, the adapter components'
    ``serving.inference_components.adapter_artifacts.<name>``. Sorted by key.
    """
    found: list[tuple[str, str]] = []
    for variant, artifacts in built_artifact_sets(config).items():
        found.append((f"image.build.{variant}.base_model", artifacts.base_model))
        found.extend((f"image.build.{variant}.adapters.{name}", pin) for name, pin in artifacts.adapters.items())
    if config.serving.mode == "inference_components":
        found.extend(
            (f"serving.inference_components.adapter_artifacts.{name}", pin)
            for name, pin in config.serving.inference_components.adapter_artifacts.items()
        )
    return sorted((key, pin) for key, pin in found if pin_sha256(pin) == PLACEHOLDER_SHA256)


def placeholder_pin_problem(config: AppConfig) -> str | None:
    """One line naming every placeholder pin and what to do, or None when every pin is set.

    Kept under CloudFormation's 1,024-character limit on a rule's ``AssertDescription``
    (CloudFormation user guide, "Rules syntax"): the keys are listed, the pins are not.
    """
    keys = [key for key, _ in placeholder_pins(config)]
    if not keys:
        return None
    shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    return (
        f"placeholder artifact pin(s) {shown}: upload the artifacts, pin them with "
        f"`python -m devtools.pin_artifacts` and set these keys in cdk.json before deploying ({DEPLOY_DOC})"
    )
