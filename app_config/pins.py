"""Which artifact pins a deploy of this config would use while they still hold the placeholder.

The defaults name the seeds' versions with a placeholder sha256 (``PLACEHOLDER_SHA256``), so
that `make synth` works offline on a fresh checkout. A deploy must not start with them: the image
build would fail minutes in (``cdk_constructs/image/runtime/index.py`` refuses them), after CloudFormation
has created the stacks before it. This module names them, once, for everything that refuses a
deploy before anything is created: the ImageBuild stack's CloudFormation rule
and the Serving stack's in ``inference_components`` mode (``cdk_constructs/common/placeholder_pins.py``),
`make synth`'s summary and ``ops preflight``.
"""

from dataclasses import dataclass

from app_config.image_build import PLACEHOLDER_SHA256, ArtifactSetConfig, pin_sha256, pin_version
from app_config.llm import ModelConfig
from app_config.release import model_package_group_name
from app_config.root import AppConfig
from app_config.variants import deployed_variant_keys
from serving_contract.model_artifacts import ADAPTER_ARCHIVE, version_prefix

DEPLOY_DOC = "docs/deploy.md"
RULE_ID = "ArtifactPinsSet"
"""Logical id of the CloudFormation rule that refuses placeholder pins: in the ImageBuild template
(every pin the build bakes in) and, in ``inference_components`` mode, the Serving template (the adapter
components' archives, which SageMaker reads at deploy, whatever ``image.source`` is)."""


def built_artifact_sets(config: AppConfig) -> dict[str, ArtifactSetConfig]:
    """``{"primary": ..., "canary": ..., "shadow": ...}``: the artifact sets the image build bakes in.

    Empty with ``image.source = prebuilt``; the canary's (the shadow's) only when it is built (its own set,
    the variant enabled, variants mode); ``cdk_constructs/image/serving_images.py`` builds one image per set.
    """
    if config.image.source != "build":
        return {}
    build = config.image.build
    sets: dict[str, ArtifactSetConfig] = {}
    for key in deployed_variant_keys(config.serving):
        artifacts = build.primary if key == "primary" else build.canary
        if artifacts is not None:
            sets[key] = artifacts
    if config.serving.shadow.enabled and build.shadow is not None:  # check_shadow: variants mode only
        sets["shadow"] = build.shadow
    return sets


@dataclass(frozen=True)
class PinRef:
    """One pin in effect: its config key, its text, and where its version folder is in the bucket.

    ``archive`` is the adapter component's ``adapter.tar.gz`` key (inference_components mode), else None.
    """

    key: str
    pin: str
    prefix: str
    archive: str | None = None

    @property
    def version(self) -> str:
        return pin_version(self.pin)

    @property
    def sha256(self) -> str:
        return pin_sha256(self.pin)

    @property
    def placeholder(self) -> bool:
        return self.sha256 == PLACEHOLDER_SHA256


def _image_pins(config: AppConfig, variant: str, artifacts: ArtifactSetConfig) -> list[PinRef]:
    build = config.image.build
    key = f"image.build.{variant}"
    base = artifacts.base_model
    pins = [
        PinRef(
            f"{key}.base_model", base, version_prefix(build.base_models_prefix, config.model.name, pin_version(base))
        )
    ]
    if not config.serving.hosts_inference_components:  # baked only in variants mode (image_inputs.baked_adapters)
        pins += [
            PinRef(f"{key}.adapters.{name}", pin, version_prefix(build.adapters_prefix, name, pin_version(pin)))
            for name, pin in sorted(artifacts.adapters.items())
        ]
    return pins


def pins_in_effect(config: AppConfig) -> list[PinRef]:
    """Every pin a deploy of ``config`` reads, in config order (see the module docstring)."""
    build, serving = config.image.build, config.serving
    pins: list[PinRef] = []
    for variant, artifacts in built_artifact_sets(config).items():
        pins += _image_pins(config, variant, artifacts)
    if serving.hosts_inference_components:
        for name, pin in sorted(serving.inference_components.adapter_artifacts.items()):
            prefix = version_prefix(build.adapters_prefix, name, pin_version(pin))
            pins.append(
                PinRef(f"serving.inference_components.adapter_artifacts.{name}", pin, prefix, prefix + ADAPTER_ARCHIVE)
            )
    return pins


def pin_kind(model: ModelConfig, ref: PinRef) -> tuple[str, str]:
    """``(release kind, artifact name)`` of a pin in effect: the base model or one adapter."""
    if ref.key.endswith(".base_model"):
        return "base_model", model.name
    return "adapter", ref.key.rsplit(".", 1)[-1]


def pin_package_group(config: AppConfig, ref: PinRef) -> tuple[str, str]:
    """``(model package group, artifact name)``: where the release registered the pin ``ref``
    (serving_contract/model_packages.py looks it up there)."""
    kind, artifact = pin_kind(config.model, ref)
    return model_package_group_name(config.project_name, config.stage, kind), artifact


def placeholder_pins(config: AppConfig) -> list[tuple[str, str]]:
    """``(config key, pin)`` of every pin in effect (:func:`pins_in_effect`) that holds the placeholder,
    sorted by key."""
    return sorted((ref.key, ref.pin) for ref in pins_in_effect(config) if ref.placeholder)


def placeholder_base_images(config: AppConfig) -> list[tuple[str, str]]:
    """``(config key, image reference)`` of each base image the build pulls whose digest is the placeholder.

    Only with ``image.source = build`` (a prebuilt image was built elsewhere). The image-build
    handler refuses them too (cdk_constructs/image/runtime/index.py); this names them before a deploy starts.
    """
    if config.image.source != "build":
        return []
    build = config.image.build
    images = {"image.build.cuda_base_image": build.cuda_base_image, "image.build.uv_image": build.uv_image}
    return [(key, ref) for key, ref in images.items() if ref.endswith("@sha256:" + PLACEHOLDER_SHA256)]


def placeholder_pin_problem(config: AppConfig) -> str | None:
    """One line naming every placeholder pin and what to do, or None when every pin is set.

    Kept under CloudFormation's 1,024-character limit on a rule's ``AssertDescription``
    (CloudFormation user guide, "Rules syntax"): the keys are listed, the pins are not.
    """
    return placeholder_keys_problem([key for key, _ in placeholder_pins(config) + placeholder_base_images(config)])


def component_pin_problem(config: AppConfig) -> str | None:
    """:func:`placeholder_pin_problem` for the pins the Serving stack reads itself: the adapter
    components' archives in ``inference_components`` mode (SageMaker downloads them at deploy)."""
    prefix = "serving.inference_components.adapter_artifacts."
    return placeholder_keys_problem([key for key, _ in placeholder_pins(config) if key.startswith(prefix)])


def placeholder_keys_problem(keys: list[str]) -> str | None:
    """The one-line refusal for ``keys`` (config keys holding a placeholder), or None when there are none."""
    if not keys:
        return None
    shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    return (
        f"placeholder pin(s) {shown}: set these keys in cdk.json before deploying (artifacts: upload them and "
        f"pin them with `python -m ops.pin_artifacts`; base images: their registry digest) ({DEPLOY_DOC})"
    )
