"""The artifact pins a config deploys, and the placeholder check (offline, no AWS).

Which pins are in effect follows the stacks:

- ``image.source = build``: the primary image bakes ``image.build.primary`` (stacks/image_build_stack.py);
  a second image bakes ``image.build.canary`` only when it is set, ``serving.canary.enabled`` and
  ``serving.mode = variants``. The image bakes the adapters only in variants mode
  (stacks/image_inputs.py, ``baked_adapters``): in inference_components mode it holds the base model.
- ``serving.mode = inference_components``: each adapter's component loads
  ``<adapters_prefix>/<adapter>/<version>/adapter.tar.gz`` of ``serving.inference_components.adapter_artifacts``
  (whatever image.source is).

A pin is ``<version>/<sha256>`` (app_config/image_build.py); the defaults carry the placeholder sha256
``PLACEHOLDER_SHA256`` ("0" x 64), which the image build handler and inference_components synth refuse.
"""

from dataclasses import dataclass

from app_config.image_build import PLACEHOLDER_SHA256, ArtifactSetConfig, pin_sha256, pin_version
from app_config.model import AppConfig
from serving_contract.model_artifacts import ADAPTER_ARCHIVE, version_prefix


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
    if config.serving.mode == "variants":  # baked only in variants mode (stacks/image_inputs.py)
        pins += [
            PinRef(f"{key}.adapters.{name}", pin, version_prefix(build.adapters_prefix, name, pin_version(pin)))
            for name, pin in sorted(artifacts.adapters.items())
        ]
    return pins


def pins_in_effect(config: AppConfig) -> list[PinRef]:
    """Every pin a deploy of ``config`` reads, in config order (see the module docstring)."""
    build, serving = config.image.build, config.serving
    pins: list[PinRef] = []
    if config.image.source == "build":
        pins += _image_pins(config, "primary", build.primary)
        if build.canary is not None and serving.canary.enabled and serving.mode == "variants":
            pins += _image_pins(config, "canary", build.canary)
    if serving.mode == "inference_components":
        for name, pin in sorted(serving.inference_components.adapter_artifacts.items()):
            prefix = version_prefix(build.adapters_prefix, name, pin_version(pin))
            pins.append(
                PinRef(f"serving.inference_components.adapter_artifacts.{name}", pin, prefix, prefix + ADAPTER_ARCHIVE)
            )
    return pins


def pin_command(config: AppConfig) -> str:
    """The ``devtools.pin_artifacts`` command that prints the current pointers of this config's artifacts."""
    build = config.image.build
    bucket = build.artifacts_bucket_name or "<artifacts bucket>"
    adapters = ",".join(a.name for a in config.model.adapters)
    command = (
        f"python -m devtools.pin_artifacts --bucket {bucket} --base-model {config.model.name} --adapters {adapters}"
    )
    for flag, value, default in (
        ("--base-models-prefix", build.base_models_prefix, "base-models"),
        ("--adapters-prefix", build.adapters_prefix, "adapters"),
    ):
        if value != default:
            command += f" {flag} {value}"
    return command


def placeholder_pins(config: AppConfig) -> list[str]:
    """One line per pin in effect that still holds the placeholder sha256; [] when all are set.

    Pure (no AWS): the stacks reuse it to refuse a deploy of unpinned artifacts. Each line names
    the config key and its value, and says what to do.
    """
    bucket = config.image.build.artifacts_bucket_name or "<artifacts bucket>"
    stage = f"stages.{config.stage}"
    lines = []
    for ref in pins_in_effect(config):
        if not ref.placeholder:
            continue
        upload = f"s3://{bucket}/{ref.archive or ref.prefix}"
        lines.append(
            f"{ref.key} = {ref.pin!r}: the sha256 is the unpinned placeholder; upload the artifacts to {upload}, "
            f"then `{pin_command(config)}` and set {ref.key} in cdk.json ({stage})"
        )
    return lines
