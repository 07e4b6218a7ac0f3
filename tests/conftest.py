"""Session fixtures: each app configuration is synthesized once per test session."""

import json
from pathlib import Path

from stacks.jsii_node import prefer_pinned_node

prefer_pinned_node()  # before aws_cdk starts the jsii runtime

import pytest  # noqa: E402

from tests.config_helpers import PREBUILT_DEV  # noqa: E402
from tests.synth_helpers import Synth, synthesize  # noqa: E402


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


POOLS = '["ml.g6e.xlarge", "ml.g6e.2xlarge"]'
"""The primary's instance pools (issue 55): ml.g6e.2xlarge when ml.g6e.xlarge is short of capacity."""

VPC_OVERRIDES = {
    **PREBUILT_DEV,  # a prebuilt image deploys only where the approval check is waived (issue 53, finding 8)
    "serving.primary.instance_pools": POOLS,
    "serving.vpc": '{"subnet_ids": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]}',
    "serving.canary.enabled": "false",
    "image.primary.digest": "sha256:" + "ab" * 32,
    "monitoring.adapter_latency_ceilings_ms": '{"jp_style_v1": 1500}',
    "monitoring.notifications.emails": '["oncall@example.com"]',
    "monitoring.notifications.https_endpoints": '["https://hooks.example.com/alarms"]',
}


@pytest.fixture(scope="session")
def vpc_single_variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """VPC placement, no canary, instance pools, prebuilt image pinned by digest (dev, the approval check waived),
    alarm subscribers and an adapter ceiling."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-vpc"), VPC_OVERRIDES)


SCALING_OVERRIDE = {"scaling.primary.release_lead_time_min": "180"}
"""One scaling value changed with -c: must reach both the template and the capacity plan."""

WEIGHT_CHANGE = {"serving.primary.initial_weight": "90", "serving.canary.initial_weight": "10"}
"""A canary promotion step: only the traffic weights change."""


@pytest.fixture(scope="session")
def scaling_override_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-scaling-override"), SCALING_OVERRIDE)


@pytest.fixture(scope="session")
def weight_change_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-weights"), WEIGHT_CHANGE)


ADAPTER_PINS = {
    "manga_domain_v3": "v3/" + "5" * 64,
    "general_support_v2": "v2/" + "6" * 64,
    "jp_style_v1": "v1/" + "7" * 64,
}
"""Adapter components' pins: inference_components mode refuses the placeholder digests."""

COMPONENTS = {
    "serving.mode": "inference_components",
    "serving.inference_components.adapter_artifacts": json.dumps(ADAPTER_PINS),
}
"""inference_components mode on the prod defaults (adapters pinned): warm pool of 2, copies 2..20, rolling updates."""


@pytest.fixture(scope="session")
def components_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-components"), COMPONENTS)


@pytest.fixture(scope="session")
def dev_components_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """inference_components mode on the dev overlay: scales to zero."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-components-dev"), {**COMPONENTS, "stage": "dev"})


@pytest.fixture(scope="session")
def extra_synths(  # noqa: PLR0917 - one fixture per synth is how pytest injects them
    scaling_override_synth: Synth,
    weight_change_synth: Synth,
    bedrock_synth: Synth,
    canary_build_synth: Synth,
    prebuilt_uri_synth: Synth,
    components_synth: Synth,
    dev_components_synth: Synth,
    shadow_synth: Synth,
    dev_waived_shadow_synth: Synth,
) -> list[Synth]:
    """Synths added for scaling, Bedrock, image-build, inference-component and shadow tests; cfn-lint and
    cdk-nag cover them too."""
    return [
        scaling_override_synth,
        weight_change_synth,
        bedrock_synth,
        canary_build_synth,
        prebuilt_uri_synth,
        components_synth,
        dev_components_synth,
        shadow_synth,
        dev_waived_shadow_synth,
    ]


SHADOW_PINS = (
    '{"base_model": "v2/' + "2" * 64 + '", "adapters": {"manga_domain_v3": "v4/' + "3" * 64 + '", '
    '"general_support_v2": "v2/' + "4" * 64 + '", "jp_style_v1": "v2/' + "5" * 64 + '"}}'
)
SHADOW = {"serving.shadow.enabled": "true", "serving.canary.enabled": "false", "image.build.shadow": SHADOW_PINS}
"""The shadow phase on the prod defaults (issue 47): the canary off, a shadow with its own pins at 10 %."""


@pytest.fixture(scope="session")
def shadow_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-shadow"), SHADOW)


DEV_WAIVER = "dev serves engineers only; adapters are tried there before the release pipeline registers them"


@pytest.fixture(scope="session")
def dev_waived_shadow_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The dev stage with a prebuilt shadow image, the deploy's approval check waived with a reason."""
    return synthesize(
        tmp_path_factory.mktemp("cdk-out-dev-shadow"),
        {
            "stage": "dev",
            "serving.shadow.enabled": "true",
            "serving.canary.enabled": "false",
            "release.deploy_approval.enforced": "false",
            "release.deploy_approval.waived_because": DEV_WAIVER,
            "image.source": "prebuilt",
            "image.primary.digest": "sha256:" + "ab" * 32,
            "image.shadow.digest": "sha256:" + "cd" * 32,
        },
    )


RESERVATION = {
    "ml_reservation_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/release-day",
    "instance_type": "ml.g6e.xlarge",
    "instance_count": 6,
    "starts_at": "2030-04-01T00:00",
    "ends_at": "2030-04-03T00:00",
    "upfront_fee_usd": 700,
}
"""A training plan for a two-day release event (issue 55): the primary's six instances at most, far enough ahead
that no test pins the clock for it."""

BEDROCK_OVERRIDES = {
    # The Bedrock synth's Serving and Observability stacks are otherwise the defaults': they carry the reservation,
    # so nag, cfn-lint, checkov and Control Tower see it.
    "serving.primary.capacity_reservation": json.dumps(RESERVATION),
    "bedrock.enabled": "true",
    # The migration from Bedrock to the endpoint (issue 54) rides on this synth: its stack is independent of the
    # BedrockImport stack, and one synth fewer keeps the infra tier's minutes (cdk-nag, cfn-lint, checkov and
    # Control Tower cover it here).
    "migration.enabled": "true",
    "migration.guardrail_id": "gr0example1",
    "migration.ramp.alarm_names": '["mangaassist-vllm-prod-shadow-5xx-rate"]',
    "env.region": "us-east-1",
    "bedrock.models": '[{"name": "mangaassist-llama3-domain-v1", "s3_prefix": "llama3-domain-v1/"},'
    ' {"name": "mangaassist-jp-style-v1", "s3_prefix": "merged/jp-style-v1/", "revision": "2",'
    ' "adapter": "jp_style_v1"}]',
}

PIN = "{version}/" + "1" * 64
CANARY_BUILD_OVERRIDES = {
    "image.build.artifacts_bucket_name": "mangaassist-model-artifacts",
    "image.build.canary": (
        '{"base_model": "v1/' + "1" * 64 + '", "adapters": {"manga_domain_v3": "v4/' + "2" * 64 + '", '
        '"general_support_v2": "v2/' + "3" * 64 + '", "jp_style_v1": "v1/' + "4" * 64 + '"}}'
    ),
}


@pytest.fixture(scope="session")
def bedrock_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Bedrock Custom Model Import enabled in us-east-1 with two models (the opt-in stack), the migration's stack
    with a guardrail and one more watched alarm, and the primary on a capacity reservation."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-bedrock"), BEDROCK_OVERRIDES)


@pytest.fixture(scope="session")
def canary_build_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """source = build with a canary pinned to a new adapter version and an existing artifacts bucket."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-canary-build"), CANARY_BUILD_OVERRIDES)


@pytest.fixture(scope="session")
def prebuilt_uri_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """source = prebuilt with both variants on image URIs from another (CI) account's repository (dev, the approval
    check waived)."""
    uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ci/serving@sha256:"
    return synthesize(
        tmp_path_factory.mktemp("cdk-out-prebuilt"),
        {**PREBUILT_DEV, "image.primary.uri": uri + "ab" * 32, "image.canary.uri": uri + "cd" * 32},
    )
