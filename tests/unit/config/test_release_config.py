"""release.* config: the seed's gates by default, one-line messages for bad gates and calibration settings."""

import json

from app_config import load_config
from app_config.release import model_package_group_name
from serving_contract.quality_gates import SEED_THRESHOLDS
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context


def test_the_defaults_are_seed_000s_gates_and_calibration_rules() -> None:
    release = load_config(cdk_json_context()).release
    assert release.enabled and release.gates == SEED_THRESHOLDS
    assert release.approval_status == "PendingManualApproval"
    assert (release.quantize.scheme, release.quantize.min_calibration_samples) == ("W4A16", 256)
    assert release.quantize.language_mix == {"en": 0.7, "ja": 0.3}


def test_an_unknown_gate_metric_is_named_with_the_known_ones() -> None:
    assert config_error(**{"release.gates": json.dumps({"blue": 0.85})}) == (
        "config error: release.gates: quality gate 'blue': unknown metric; known: bleu, factual_accuracy, "
        "language_quality, safety, hallucination_rate"
    )


def test_a_threshold_above_one_is_refused() -> None:
    assert "quality gate bleu = 85.0: must be a fraction from 0 to 1" in config_error(
        **{"release.gates": '{"bleu": 85}'}
    )


def test_a_language_mix_that_does_not_add_up_is_refused() -> None:
    message = config_error(**{"release.quantize.language_mix": '{"en": 0.7, "ja": 0.2}'})
    assert "release.quantize.language_mix" in message and "must be positive and add up to 1" in message


def test_group_names_fit_the_model_package_group_pattern() -> None:
    assert model_package_group_name("MangaAssist", "prod", "adapter") == "mangaassist-prod-adapters"
    assert model_package_group_name("MangaAssist", "dev", "base_model") == "mangaassist-dev-base-model"
