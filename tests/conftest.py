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
    "serving.vpc": '{"subnet_ids": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]}',
    "serving.canary.enabled": "false",
    "image.primary.digest": "sha256:" + "ab" * 32,
}


@pytest.fixture(scope="session")
def vpc_single_variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """VPC placement, no canary, image pinned by digest: the optional paths."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-vpc"), VPC_OVERRIDES)


BEDROCK_OVERRIDES = {
    "bedrock.enabled": "true",
    "env.region": "us-east-1",
    "bedrock.models": '[{"name": "mangaassist-llama3-domain-v1", "s3_prefix": "llama3-domain-v1/"},'
    ' {"name": "mangaassist-jp-style-v1", "s3_prefix": "merged/jp-style-v1/", "revision": "2"}]',
}


@pytest.fixture(scope="session")
def bedrock_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Bedrock Custom Model Import enabled in us-east-1 with two models (the opt-in stack)."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-bedrock"), BEDROCK_OVERRIDES)
