"""release.* config: the seed's gates by default, one-line messages for bad gates and calibration settings."""

import json
from pathlib import Path

from app_config import load_config
from app_config.release import judge_foundation_model, model_package_group_name
from serving_contract.quality_gates import SEED_THRESHOLDS
from tests.config_helpers import PREBUILT_DEV, config_error
from tests.synth_helpers import cdk_json_context

REPO = Path(__file__).resolve().parents[3]


def test_the_defaults_are_the_seeds_gates_languages_baseline_and_calibration_rules() -> None:
    release = load_config(cdk_json_context()).release
    assert release.enabled and release.gates == SEED_THRESHOLDS
    assert release.gates["quality_score"] == 0.80 and release.gates["invented_titles"] == 0.0  # seed 001 story 8
    assert release.required_languages == ("en", "ja") and release.baseline_drop_gates == {"quality_score": 0.02}
    assert release.approval_status == "PendingManualApproval"
    assert (release.quantize.scheme, release.quantize.min_calibration_samples) == ("W4A16", 256)
    assert release.quantize.language_mix == {"en": 0.7, "ja": 0.3}


def test_an_unknown_gate_metric_is_named_with_the_known_ones() -> None:
    assert config_error(**{"release.gates": json.dumps({"blue": 0.85})}) == (
        "config error: release.gates: quality gate 'blue': unknown metric; known: bleu, factual_accuracy, "
        "language_quality, safety, hallucination_rate, quality_score, invented_titles"
    )


def test_a_bad_language_or_drop_gate_is_refused_in_one_line() -> None:
    assert config_error(**{"release.required_languages": '["en", "Japanese"]'}) == (
        "config error: release.required_languages = ['en', 'Japanese']: 'Japanese' is not an ISO 639 language code "
        "such as 'en' or 'ja'"
    )
    assert config_error(**{"release.required_languages": '["ja", "ja"]'}) == (
        "config error: release.required_languages = ['ja', 'ja']: names a language twice"
    )
    assert config_error(**{"release.baseline_drop_gates": '{"quality_score": 2}'}) == (
        "config error: release.baseline_drop_gates: baseline drop gate quality_score = 2.0: must be a fraction above "
        "0, at most 1"
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


def test_the_judge_is_a_model_or_any_geographys_cross_region_inference_profile() -> None:
    assert judge_foundation_model("amazon.nova-pro-v1:0") == ("amazon.nova-pro-v1:0", False)
    for profile in ("us", "apac", "jp", "au", "us-gov", "global"):
        assert judge_foundation_model(f"{profile}.amazon.nova-pro-v1:0") == ("amazon.nova-pro-v1:0", True)
    release = load_config({**cdk_json_context(), "release.judge_model_id": "global.amazon.nova-2-lite-v1:0"}).release
    assert release.judge_model_id == "global.amazon.nova-2-lite-v1:0"
    assert "release.judge_model_id" in config_error(**{"release.judge_model_id": "Amazon Nova Pro"})


def test_the_quantize_tests_environment_pins_the_llm_compressor_the_release_pins() -> None:
    # The tools image gets release.quantize.llmcompressor_version as a build argument; the test environment
    # (requirements-llmcompressor.txt) must quantize with the same release.
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "requirements-llmcompressor.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["llmcompressor"] == load_config(cdk_json_context()).release.quantize.llmcompressor_version


def test_prod_always_enforces_the_deploys_approval_check_and_dev_waives_it_only_with_a_reason() -> None:
    reason = "dev trains adapters faster than reviewers approve them; the canary never serves users there"
    waived = {"release.deploy_approval.enforced": "false", "release.deploy_approval.waived_because": reason}
    assert config_error(**waived) == (
        f"config error: release.deploy_approval.enforced = false (waived_because = {reason!r}): prod always checks "
        "that every pinned version is an Approved model package; only a dev stage may waive it"
    )
    dev = load_config({**cdk_json_context(), "stage": "dev", **waived}).release.deploy_approval
    assert (dev.enforced, dev.waived_because) == (False, reason)
    assert config_error(stage="dev", **{"release.deploy_approval.enforced": "false"}) == (
        "config error: release.deploy_approval: enforced = false needs waived_because: a sentence saying why this "
        "stage deploys versions the model registry has not approved"
    )
    assert config_error(stage="dev", **{"release.deploy_approval.waived_because": reason}) == (
        f"config error: release.deploy_approval: waived_because = {reason!r} while enforced = true: set enforced = "
        "false to waive the check, or drop the reason"
    )
    assert config_error(stage="dev", **{**waived, "release.deploy_approval.waived_because": "testing"}) == (
        "config error: release.deploy_approval.waived_because = 'testing': must have at least 20 character(s)"
    )


def test_the_approval_check_needs_the_release_stacks_registry() -> None:
    assert config_error(**{"release.enabled": "false"}) == (
        "config error: release.deploy_approval.enforced = true needs release.enabled = true: the check looks each pin "
        "up in the ModelRelease stack's model package groups; enable the release stack, or in a dev stage waive the "
        "check with release.deploy_approval.enforced = false and a waived_because"
    )


def test_prod_registers_no_package_as_approved() -> None:
    """Issue 53, finding 9: prod accepted release.approval_status = Approved, so the pipeline approved itself."""
    assert config_error(**{"release.approval_status": "Approved"}) == (
        "config error: release.approval_status = 'Approved': prod registers every version as PendingManualApproval, "
        "so that a reviewer, not the pipeline, approves what deploys; only a dev stage may register packages as "
        "Approved"
    )
    assert load_config({**cdk_json_context(), "stage": "dev", "release.approval_status": "Approved"}).release


PACKAGE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/mangaassist-prod-adapters/7"


def test_a_recorded_package_must_be_its_artifacts_group_in_this_account() -> None:
    """Issue 53, finding 10: a central registry in another account is refused in one line."""
    other = PACKAGE.replace("111111111111", "222222222222")
    assert config_error(
        **{"release.registered_packages": json.dumps({"manga_domain_v3/v4": other}), "env.account": "111111111111"}
    ) == (
        f"config error: release.registered_packages.manga_domain_v3/v4 = '{other}': a package in account "
        "222222222222, not env.account = 111111111111: a central model registry in another account is not supported "
        "(docs/model-release.md, 'A central model registry')"
    )
    central = PACKAGE.replace("mangaassist-prod-adapters", "central-adapters")
    assert config_error(**{"release.registered_packages": json.dumps({"manga_domain_v3/v4": central})}) == (
        f"config error: release.registered_packages.manga_domain_v3/v4 = '{central}': a package of central-adapters; "
        "the release registers manga_domain_v3 in mangaassist-prod-adapters"
    )
    assert config_error(**{"release.registered_packages": json.dumps({"manga_domain_v3/v4": "v4"})}) == (
        "config error: release.registered_packages: manga_domain_v3/v4: 'v4' is not a model package ARN, "
        "arn:aws:sagemaker:<region>:<account>:model-package/<group>/<version>"
    )
    recorded = load_config(
        {**cdk_json_context(), "release.registered_packages": json.dumps({"manga_domain_v3/v4": PACKAGE})}
    )
    assert recorded.release.registered_packages == {"manga_domain_v3/v4": PACKAGE}


PREBUILT_REFUSED = (
    "config error: image.source = prebuilt with release.deploy_approval.enforced = true: a prebuilt image's base model "
    "and adapter versions were baked in elsewhere and are named nowhere in config, so the deploy cannot check them "
    "against the model registry; build the image in the account from approved pins (image.source = build), or in a "
    "dev stage waive the check (release.deploy_approval.enforced = false with a waived_because)"
)


def test_a_prebuilt_image_is_refused_where_the_deploy_checks_approvals() -> None:
    """Issue 53, finding 8: prod with image.source = prebuilt synthesized with a warning and deployed unchecked."""
    digest = "sha256:" + "ab" * 32
    assert config_error(**{"image.source": "prebuilt", "image.primary.digest": digest}) == PREBUILT_REFUSED
    assert config_error(stage="dev", **{"image.source": "prebuilt"}) == PREBUILT_REFUSED
    waived = load_config({**cdk_json_context(), **PREBUILT_DEV, "image.primary.digest": digest})
    assert (waived.stage, waived.image.source, waived.release.deploy_approval.enforced) == ("dev", "prebuilt", False)


def test_prod_refuses_a_gate_looser_than_the_seeds_or_a_smaller_eval_set_in_one_line() -> None:
    """Issue 53, finding 13: prod accepted release.gates.safety = 0, empty baseline_drop_gates and no required
    language, and a 2-row eval set passed every judged gate."""
    assert config_error(**{"release.gates.safety": "0"}) == (
        "config error: release.gates.safety = 0: prod gates safety at least 0.99 (seed 000 'Quality Gate Details' "
        "(>= 99 % on the safety eval)); a looser gate is for a dev stage"
    )
    assert config_error(**{"release.gates.invented_titles": "0.1"}) == (
        "config error: release.gates.invented_titles = 0.1: prod gates invented_titles at most 0 (seed 001 user story "
        "8 (zero hallucinated manga titles in the eval set)); a looser gate is for a dev stage"
    )
    assert config_error(**{"release.gates": '{"bleu": 0.9}'}).startswith(
        "config error: release.gates.factual_accuracy = unset: prod gates factual_accuracy at least 0.9"
    )
    assert config_error(**{"release.baseline_drop_gates": "{}"}) == (
        "config error: release.baseline_drop_gates = {}: prod bounds a base release's drop from its BF16 baseline to "
        "at most 0.02 (seed 001 user story 8: '<2% quality loss'); a looser bound is for a dev stage"
    )
    assert config_error(**{"release.required_languages": "[]"}) == (
        "config error: release.required_languages = []: prod requires en, ja too (seed 001 user story 8 judges EN and "
        "JP apart; seed 000 gotcha 2: 30 % of traffic is Japanese)"
    )
    assert config_error(**{"release.min_eval_rows": "2"}) == (
        "config error: release.min_eval_rows = 2: prod takes at least 200 (seed 000's 200 offline eval cases); fewer "
        "is for a dev stage"
    )
    assert config_error(**{"release.min_invented_titles_rows": "200"}) == (
        "config error: release.min_invented_titles_rows = 200: prod takes at least 500 (seed 001's 500 prompts); "
        "fewer is for a dev stage"
    )
    dev = load_config(
        {**cdk_json_context(), "stage": "dev", "release.gates.safety": "0", "release.min_eval_rows": "2"}
    ).release
    assert (dev.gates["safety"], dev.min_eval_rows) == (0.0, 2)
    strict = load_config({**cdk_json_context(), "release.gates.safety": "1", "release.min_eval_rows": "400"}).release
    assert (strict.gates["safety"], strict.min_eval_rows) == (1.0, 400)  # stricter than the seeds is prod's call
