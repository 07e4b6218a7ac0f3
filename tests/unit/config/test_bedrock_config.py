"""bedrock.* config: the region check at synth and one-line messages for bad values."""

from pathlib import Path

import pytest

from app_config import load_config
from app_config.bedrock import CUSTOM_MODEL_IMPORT_REGIONS
from tests.config_helpers import config_error
from tests.infra.test_app_entrypoint import _run_app
from tests.synth_helpers import cdk_json_context

ENABLED = {"bedrock.enabled": "true", "env.region": "us-east-1"}


def test_off_by_default_in_any_region() -> None:
    config = load_config({**cdk_json_context(), "env.region": "ap-northeast-1"})
    assert config.bedrock.enabled is False


@pytest.mark.parametrize("region", CUSTOM_MODEL_IMPORT_REGIONS)
def test_enabled_in_each_import_region(region: str) -> None:
    config = load_config({**cdk_json_context(), "bedrock.enabled": "true", "env.region": region})
    assert config.bedrock.enabled


def test_enabled_in_an_unsupported_region_lists_the_supported_ones() -> None:
    assert config_error(**{"bedrock.enabled": "true", "env.region": "ap-northeast-1"}) == (
        "config error: bedrock.enabled = true but env.region = 'ap-northeast-1' has no Bedrock Custom Model Import; "
        "allowed: us-east-1, us-east-2, us-west-2, eu-central-1"
    )


def test_enabled_without_a_region_is_rejected() -> None:
    assert config_error(**{"bedrock.enabled": "true"}) == (
        "config error: bedrock.enabled = true needs env.region set to a Custom Model Import region "
        "(us-east-1, us-east-2, us-west-2, eu-central-1); an environment-agnostic stack cannot be checked"
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "bedrock.models",
            '[{"name": "Llama3_Domain", "s3_prefix": "a/"}]',
            "config error: bedrock.models.0.name = 'Llama3_Domain': must be 1-52 lowercase letters and digits, "
            "single '-' or '_' between them (Bedrock importedModelName, less the 11-character revision suffix)",
        ),
        (
            "bedrock.models",
            '[{"name": "domain", "s3_prefix": "/llama3"}]',
            "config error: bedrock.models.0.s3_prefix = '/llama3': must be an S3 key prefix such as "
            "'llama3-domain-v1/': segments of letters, digits and -!_*'(). each ending in '/', no leading '/'",
        ),
        (
            "bedrock.models",
            '[{"name": "domain", "s3_prefix": "a/"}, {"name": "domain", "s3_prefix": "b/"}]',
            "config error: bedrock: models: duplicate model name(s) domain; each name must be unique",
        ),
        (
            "bedrock.models",
            '[{"name": "domain", "s3_prefix": "a/", "revison": "2"}]',
            "config error: bedrock.models.0.revison: unknown key; did you mean 'bedrock.models.revision'?",
        ),
        ("bedrock.max_model_size_gb", "250", "config error: bedrock.max_model_size_gb = '250': must be <= 200"),
        ("bedrock.import_timeout_min", "180", "config error: bedrock.import_timeout_min = '180': must be <= 55"),
        # CloudFormation's custom-resource ServiceTimeout (max 3600 s) less the provider's head room.
        ("bedrock.import_timeout_min", "60", "config error: bedrock.import_timeout_min = '60': must be <= 55"),
        (
            "bedrock.bucket_name",
            "My_Bucket",
            "config error: bedrock.bucket_name = 'My_Bucket': must be an S3 bucket name: "
            "3-63 lowercase letters, digits, '.' and '-'",
        ),
    ],
)
def test_bad_values_give_one_line(key: str, value: str, expected: str) -> None:
    message = config_error(**ENABLED, **{key: value})
    assert message.startswith(expected), message


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        (
            '[{"name": "domain", "s3_prefix": "a/", "adapter": "manga_domian_v3"}]',
            "config error: bedrock.models[0].adapter = 'manga_domian_v3': not a name the endpoint serves; allowed: "
            "general_support_v2, jp_style_v1, llama-3-8b-instruct-awq, manga_domain_v3 (did you mean "
            "'manga_domain_v3'?)",
        ),
        (
            '[{"name": "a", "s3_prefix": "a/", "adapter": "jp_style_v1"},'
            ' {"name": "b", "s3_prefix": "b/", "adapter": "jp_style_v1"}]',
            "config error: bedrock.models[1].adapter = 'jp_style_v1': bedrock.models[0] answers for it already; "
            "one imported model per adapter",
        ),
    ],
    ids=["unknown-adapter", "two-models-one-adapter"],
)
def test_the_adapter_an_imported_model_answers_for_is_one_the_endpoint_serves(models: str, expected: str) -> None:
    """Issue 53, finding 3: the client library's fallback reads it from the stack's outputs."""
    assert config_error(**ENABLED, **{"bedrock.models": models}) == expected


def test_an_imported_model_may_answer_for_an_adapter_or_the_base_model() -> None:
    models = '[{"name": "a", "s3_prefix": "a/", "adapter": "jp_style_v1"}, {"name": "b", "s3_prefix": "b/"}]'
    config = load_config({**cdk_json_context(), **ENABLED, "bedrock.models": models})
    assert [m.adapter for m in config.bedrock.models] == ["jp_style_v1", None]


def test_app_stops_synth_on_an_unsupported_region(tmp_path: Path) -> None:
    result = _run_app(tmp_path, {"bedrock.enabled": "true", "env.region": "eu-west-1"})
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("config error")] == [
        "config error: bedrock.enabled = true but env.region = 'eu-west-1' has no Bedrock Custom Model Import; "
        "allowed: us-east-1, us-east-2, us-west-2, eu-central-1"
    ]
