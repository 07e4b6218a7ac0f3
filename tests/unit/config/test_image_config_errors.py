"""Bad image-source and image-build values: one line naming the key, the value and what is allowed."""

import pytest

from app_config import load_config
from tests.config_helpers import PREBUILT_DEV, config_error
from tests.synth_helpers import cdk_json_context

SHA = "1" * 64


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"image.source": "docker"},
            "config error: image.source = 'docker': must be one of 'build' or 'prebuilt'",
        ),
        (
            {"image.build.primary.base_model": "v1"},
            "config error: image.build.primary.base_model = 'v1': must be a CURRENT pointer '{version}/{sha256}': "
            "a version of [A-Za-z0-9._-] (1-64, starting with a letter or digit), '/', and 64 lowercase hex characters",
        ),
        (
            {"image.build.primary.adapters": f'{{"manga_domain_v3": "v3/{SHA}"}}'},
            "config error: image.build.primary.adapters pins [manga_domain_v3] but model.adapters is "
            "[general_support_v2, jp_style_v1, manga_domain_v3]; pin exactly one version per configured adapter",
        ),
        (
            {"image.build.timeout_min": "90"},
            "config error: image.build.timeout_min = '90': must be <= 50",
        ),
        (
            # The build plus 5 min queued must end inside CloudFormation's wait (3600 s less 300 s head room).
            {"image.build.timeout_min": "51"},
            "config error: image.build.timeout_min = '51': must be <= 50",
        ),
        (
            {"image.build.compute_type": "BUILD_GENERAL1_SMALL"},
            "config error: image.build.compute_type = 'BUILD_GENERAL1_SMALL': must be one of 'BUILD_GENERAL1_MEDIUM', "
            "'BUILD_GENERAL1_LARGE', 'BUILD_GENERAL1_XLARGE' or 'BUILD_GENERAL1_2XLARGE'",
        ),
        (
            {"image.build.artifacts_bucket_name": "Bad_Bucket"},
            "config error: image.build.artifacts_bucket_name = 'Bad_Bucket': "
            "must match ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        ),
        (
            {"image.source": "prebuilt", "image.canary.uri": "ghcr.io/x/serving:latest"},
            "config error: image.canary: uri = 'ghcr.io/x/serving:latest': must be an ECR image URI pinned by digest, "
            "<account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<64 hex>",
        ),
        (
            # Issue 21, finding 4: the canary runbook's key used to be ignored in build mode.
            {"image.canary.tag": "v2"},
            "config error: image: canary.tag = 'v2' is read only with image.source = prebuilt, and source is build "
            "(the canary's image is built from image.build.canary's artifact pins): set image.source=prebuilt to run "
            "that image, or pin image.build.canary",
        ),
        (
            {"image.primary.digest": "sha256:" + "ab" * 32},
            "config error: image: primary.digest = 'sha256:" + "ab" * 32 + "' is read only with image.source = "
            "prebuilt, and source is build (the primary's image is built from image.build.primary's artifact pins): "
            "set image.source=prebuilt to run that image, or pin image.build.primary",
        ),
        (
            # Issue 22 item 6: a base image by tag alone is refused.
            {"image.build.cuda_base_image": "nvidia/cuda:12.4.1-base-ubuntu22.04"},
            "config error: image.build.cuda_base_image = 'nvidia/cuda:12.4.1-base-ubuntu22.04': must be an image "
            "reference pinned by digest, name:tag@sha256:<64 lowercase hex> (a tag alone is refused; get the digest "
            "with docker buildx imagetools inspect name:tag)",
        ),
        (
            # A digest without the tag is refused too: the tag is what tells a reader which release it is.
            {"image.build.uv_image": f"ghcr.io/astral-sh/uv@sha256:{SHA}"},
            f"config error: image.build.uv_image = 'ghcr.io/astral-sh/uv@sha256:{SHA}': must be an image reference "
            "pinned by digest, name:tag@sha256:<64 lowercase hex> (a tag alone is refused; get the digest with docker "
            "buildx imagetools inspect name:tag)",
        ),
        (
            {"image.primary": "{}"},
            "config error: image.primary: tag = None, digest = None, uri = None: set a tag, a digest or a uri",
        ),
    ],
)
def test_bad_image_values_name_key_value_and_allowed(overrides: dict[str, str], expected: str) -> None:
    assert config_error(overrides) == expected


def test_pin_mismatch_is_not_checked_for_prebuilt_images() -> None:
    config = load_config({**cdk_json_context(), **PREBUILT_DEV, "image.build.primary.adapters": f'{{"x": "v1/{SHA}"}}'})
    assert config.image.source == "prebuilt"


def test_a_placeholder_base_digest_passes_synth_validation() -> None:
    # Synth has no registry access, so the uv default's placeholder digest is accepted here and
    # refused by the image-build handler before StartBuild (tests/lambdas/test_image_build_handler.py).
    config = load_config(cdk_json_context())
    assert config.image.build.uv_image.endswith("@sha256:" + "0" * 64)
    assert config.image.build.cuda_base_image == (
        "nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:0f6bfcbf267e65123bcc2287e2153dedfc0f24772fb5ce84afe16ac4b2fada95"
    )
