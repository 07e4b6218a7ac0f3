"""Session fixtures: each app configuration is synthesized once per test session."""

import os
from pathlib import Path

import pytest

from tests.synth_helpers import Synth, synthesize

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default config (stage prod, the seeds' values), as ``npx cdk synth`` builds it."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-prod"))


@pytest.fixture(scope="session")
def dev_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The dev stage overlay."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-dev"), {"stage": "dev"})


@pytest.fixture(scope="session")
def all_synths(default_synth: Synth, dev_synth: Synth) -> list[Synth]:
    return [default_synth, dev_synth]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


VPC_OVERRIDES = {
    "image.source": "prebuilt",
    "serving.vpc": '{"subnet_ids": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]}',
    "serving.canary.enabled": "false",
    "image.primary.digest": "sha256:" + "ab" * 32,
}


@pytest.fixture(scope="session")
def vpc_single_variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """VPC placement, no canary, prebuilt image pinned by digest: the optional paths."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-vpc"), VPC_OVERRIDES)


PIN = "{version}/" + "1" * 64
CANARY_BUILD_OVERRIDES = {
    "image.build.artifacts_bucket_name": "mangaassist-model-artifacts",
    "image.build.canary": (
        '{"base_model": "v1/' + "1" * 64 + '", "adapters": {"manga_domain_v3": "v4/' + "2" * 64 + '", '
        '"general_support_v2": "v2/' + "3" * 64 + '", "jp_style_v1": "v1/' + "4" * 64 + '"}}'
    ),
    "image.canary.uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ci/serving@sha256:" + "cd" * 32,
}


@pytest.fixture(scope="session")
def canary_build_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """source = build with a canary pinned to a new adapter version and an existing artifacts bucket.

    ``image.canary.uri`` is set too, to prove that prebuilt references are ignored in build mode.
    """
    return synthesize(tmp_path_factory.mktemp("cdk-out-canary-build"), CANARY_BUILD_OVERRIDES)


@pytest.fixture(scope="session")
def prebuilt_uri_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """source = prebuilt with both variants on image URIs from another (CI) account's repository."""
    uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ci/serving@sha256:"
    return synthesize(
        tmp_path_factory.mktemp("cdk-out-prebuilt"),
        {"image.source": "prebuilt", "image.primary.uri": uri + "ab" * 32, "image.canary.uri": uri + "cd" * 32},
    )
