"""The placeholder-pin check (offline, no AWS), over the pins :func:`app_config.pins.pins_in_effect` names.

Which pins are in effect follows the stacks:

- ``image.source = build``: the primary image bakes ``image.build.primary`` (stacks/image_build_stack.py);
  a second image bakes ``image.build.canary`` only when it is set, ``serving.canary.enabled`` and
  ``serving.mode = variants``. The image bakes the adapters only in variants mode
  (cdk_constructs/image/image_inputs.py, ``baked_adapters``): in inference_components mode it holds the base model.
- ``serving.mode = inference_components``: each adapter's component loads
  ``<adapters_prefix>/<adapter>/<version>/adapter.tar.gz`` of ``serving.inference_components.adapter_artifacts``
  (whatever image.source is).

A pin is ``<version>/<sha256>`` (app_config/image_build.py); the defaults carry the placeholder sha256
``PLACEHOLDER_SHA256`` ("0" x 64), which the image build handler and inference_components synth refuse.
"""

from app_config.pins import PinRef, pins_in_effect, placeholder_base_images
from app_config.root import AppConfig

__all__ = ["PinRef", "pin_command", "pins_in_effect", "placeholder_pin_lines"]


def pin_command(config: AppConfig) -> str:
    """The ``ops.pin_artifacts`` command that prints the current pointers of this config's artifacts."""
    build = config.image.build
    bucket = build.artifacts_bucket_name or "<artifacts bucket>"
    adapters = ",".join(a.name for a in config.model.adapters)
    command = f"python -m ops.pin_artifacts --bucket {bucket} --base-model {config.model.name} --adapters {adapters}"
    command += f" --stage {config.stage}" if config.release.enabled else " --no-approval-check"
    if config.release.enabled and config.project_name != "MangaAssist":
        command += f" --project-name {config.project_name}"
    for flag, value, default in (
        ("--base-models-prefix", build.base_models_prefix, "base-models"),
        ("--adapters-prefix", build.adapters_prefix, "adapters"),
    ):
        if value != default:
            command += f" {flag} {value}"
    return command


def placeholder_pin_lines(config: AppConfig) -> list[str]:
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
    for key, image in placeholder_base_images(config):
        name_tag = image.split("@", 1)[0]
        lines.append(
            f"{key} = {image!r}: the digest is the unpinned placeholder; set it in cdk.json ({stage}) from "
            f"`docker buildx imagetools inspect {name_tag}` (docs/image-build.md)"
        )
    return lines
