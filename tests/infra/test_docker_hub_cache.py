"""The image build's Docker Hub base image through an ECR pull-through cache (issue 22, item 6):
CodeBuild pulls from this account's registry instead of anonymously from Docker Hub."""

import json
from typing import Any

import pytest

from cdk_constructs.image.docker_hub_cache import is_docker_hub
from tests.synth_helpers import Synth, synthesize

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
PREFIX = "mangaassist-prod-hub"


@pytest.fixture(scope="module")
def cache_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    # cdk-nag runs inside the synth: an unacknowledged finding on the new grant fails here.
    return synthesize(
        tmp_path_factory.mktemp("cdk-out-hub-cache"), {"image.build.docker_hub_credentials_secret_arn": SECRET}
    )


def _serving_images(synth: Synth) -> list[Any]:
    return list(synth.template("ImageBuild").find_resources("Custom::ServingImage").values())


def test_the_rule_caches_docker_hub_with_the_configured_credentials(cache_synth: Synth) -> None:
    cache_synth.template("ImageBuild").has_resource_properties(
        "AWS::ECR::PullThroughCacheRule",
        {
            "EcrRepositoryPrefix": PREFIX,
            "UpstreamRegistry": "docker-hub",
            "UpstreamRegistryUrl": "registry-1.docker.io",
            "CredentialArn": SECRET,
        },
    )


def test_the_build_pulls_the_cuda_base_through_the_cache_by_the_same_digest(
    cache_synth: Synth, default_synth: Synth
) -> None:
    cuda = cache_synth.config.image.build.cuda_base_image  # nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:...
    (image,) = _serving_images(cache_synth)
    rendered = json.dumps(image["Properties"]["BaseImages"])
    assert f".dkr.ecr.us-east-1.amazonaws.com/{PREFIX}/{cuda}" in rendered or (
        f"/{PREFIX}/{cuda}" in rendered and ".dkr.ecr." in rendered
    ), rendered
    assert cache_synth.config.image.build.uv_image in rendered  # ghcr.io: not Docker Hub, pulled as configured
    # Same digests, same image: the tag does not change with where the build pulls from.
    (default_image,) = _serving_images(default_synth)
    assert image["Properties"]["ImageTag"] == default_image["Properties"]["ImageTag"]
    assert "AWS::ECR::PullThroughCacheRule" not in json.dumps(default_synth.template_json("ImageBuild"))


def test_the_build_role_may_import_only_under_the_cache_prefix(cache_synth: Synth) -> None:
    template = cache_synth.template("ImageBuild")
    statements = [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ecr:BatchImportUpstreamImage" in statement["Action"]
    ]
    (statement,) = statements
    assert json.dumps(statement["Resource"]).endswith(f':repository/{PREFIX}/*"]]}}')
    assert "ecr:CreateRepository" in statement["Action"]


@pytest.mark.parametrize(
    ("ref", "hub"),
    [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:" + "a" * 64, True),
        ("python:3.12@sha256:" + "a" * 64, True),
        ("docker.io/nvidia/cuda:12@sha256:" + "a" * 64, True),
        ("ghcr.io/astral-sh/uv:0.13.8@sha256:" + "a" * 64, False),
        ("public.ecr.aws/docker/library/python:3.12@sha256:" + "a" * 64, False),
        ("localhost:5000/x:1@sha256:" + "a" * 64, False),
    ],
)
def test_which_references_docker_hub_serves(ref: str, hub: bool) -> None:
    assert is_docker_hub(ref) is hub


def test_official_images_map_to_library(cache_synth: Synth) -> None:
    cache = cache_synth.stacks.image_build.docker_hub_cache  # type: ignore[union-attr]
    assert cache is not None
    stack = cache_synth.stacks.image_build
    resolved = stack.resolve(cache.cached("python:3.12@sha256:" + "a" * 64))  # type: ignore[union-attr]
    assert f"/{PREFIX}/library/python:3.12@sha256:" in json.dumps(resolved)
    assert cache.cached("ghcr.io/astral-sh/uv:0.13.8@sha256:" + "a" * 64).startswith("ghcr.io/")
