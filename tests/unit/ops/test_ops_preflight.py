"""``preflight``: placeholder pins, region, bootstrap and quotas, and the command end to end."""

import json
from pathlib import Path

import pytest

from ops.cli import Deps, main
from ops.exit_codes import ExitCode
from ops.preflight import placeholder_pin_lines
from ops.preflight.account import check_bootstrap, check_quotas, check_region, quota_demands
from ops.preflight.command import check_pins
from ops.preflight.report import Finding, exit_code
from tests.config_helpers import PREBUILT_DEV
from tests.synth_helpers import SEEDS_G5_FLAGS
from tests.unit.ops.model_package_stubs import add_described
from tests.unit.ops.preflight_stubs import BUCKET, DIGEST, FILES, REGION, REGISTERED, config, pinned, preflight_stubbed

ZEROS = "0" * 64
PIN_TOOL = (
    "python -m ops.pin_artifacts --bucket <artifacts bucket> --base-model llama-3-8b-instruct-awq "
    "--adapters manga_domain_v3,general_support_v2,jp_style_v1 --stage prod"
)


SEEDS_COUNTS = {"serving.primary.initial_instance_count": "4", "serving.primary.max_capacity": "20"}
"""Seed 003 §8's 4 instances and seed 001's max 20 on the primary, the fleet the quota arithmetic below
is worked for (the defaults are the plan's smaller fleet)."""
SEEDS_COUNTS_FLAGS = tuple(arg for key, value in SEEDS_COUNTS.items() for arg in ("-c", f"{key}={value}"))


def _lines(findings: list[Finding]) -> list[str]:
    return [f.line for f in findings]


# --- pins (offline) -------------------------------------------------------------------------------
def test_placeholder_pin_lines_name_each_key_and_what_to_do():
    problems = placeholder_pin_lines(config())
    assert problems[0] == (
        f"image.build.primary.base_model = 'v1/{ZEROS}': the sha256 is the unpinned placeholder; upload the "
        "artifacts to s3://<artifacts bucket>/base-models/llama-3-8b-instruct-awq/v1/, then "
        f"`{PIN_TOOL}` and set image.build.primary.base_model in cdk.json (stages.prod)"
    )
    assert [p.split(" = ")[0] for p in problems] == [
        "image.build.primary.base_model",
        "image.build.primary.adapters.general_support_v2",
        "image.build.primary.adapters.jp_style_v1",
        "image.build.primary.adapters.manga_domain_v3",
        "image.build.uv_image",
    ]
    assert problems[-1] == (
        f"image.build.uv_image = 'ghcr.io/astral-sh/uv:0.13.8@sha256:{ZEROS}': the digest is the unpinned "
        "placeholder; set it in cdk.json (stages.prod) from `docker buildx imagetools inspect "
        "ghcr.io/astral-sh/uv:0.13.8` (docs/image-build.md)"
    )
    assert {f.code for f in check_pins(config())} == {ExitCode.PREFLIGHT_CONFIG}


def test_pinned_config_has_no_placeholder_and_passes():
    assert placeholder_pin_lines(pinned()) == []
    assert _lines(check_pins(pinned())) == ["ok    pins: 4 pin(s) in effect, none a placeholder"]


def test_inference_components_mode_checks_component_pins_and_not_baked_adapters():
    problems = placeholder_pin_lines(pinned(**{"serving.mode": "inference_components"}))
    # The image holds the base model only in this mode, so image.build.primary.adapters are not read.
    assert [p.split(" = ")[0] for p in problems] == [
        f"serving.inference_components.adapter_artifacts.{a}"
        for a in ("general_support_v2", "jp_style_v1", "manga_domain_v3")
    ]
    assert f"upload the artifacts to s3://{BUCKET}/adapters/jp_style_v1/v1/adapter.tar.gz, then" in problems[1]


def test_prebuilt_variants_mode_has_no_pins_and_canary_pins_count_only_when_built():
    assert _lines(check_pins(config(**PREBUILT_DEV))) == [
        "skip  pins: no artifact pins in effect (image.source = prebuilt, serving.mode = variants)"
    ]
    canary = {"image.build.canary": {"base_model": f"v2/{ZEROS}", "adapters": pinned().image.build.primary.adapters}}
    assert [p.split(" = ")[0] for p in placeholder_pin_lines(pinned(**canary))] == ["image.build.canary.base_model"]
    assert placeholder_pin_lines(pinned(**canary, **{"serving.canary.enabled": "false"})) == []


# --- region -----------------------------------------------------------------------------------
def test_region_passes_where_sagemaker_is_offered():
    assert check_region(config().env, "ap-northeast-1").line == "ok    region: ap-northeast-1: SageMaker is offered"


@pytest.mark.parametrize(
    ("region", "overrides", "message"),
    [
        (None, {}, "no region: pass --region, set AWS_REGION or a profile's region, or set env.region in cdk.json"),
        ("mars-north-1", {}, "mars-north-1: SageMaker is not offered there (botocore's endpoint data); pick "
         "another region (--region or env.region)"),
        (REGION, {"env.region": "ap-northeast-1"}, f"env.region = 'ap-northeast-1' but the checks ran in {REGION}: "
         "the stacks deploy to env.region; drop --region or change env.region"),
    ],
)  # fmt: skip
def test_region_fails(region, overrides, message):
    finding = check_region(config(**overrides).env, region)
    assert finding.line == f"FAIL  region: {message}"
    assert finding.code == ExitCode.PREFLIGHT_ACCOUNT


# --- bootstrap --------------------------------------------------------------------------------
def _manifest(tmp_path: Path, version: int) -> Path:
    artifacts = {
        "MangaAssist-prod-Serving": {"type": "aws:cloudformation:stack",
                                     "properties": {"requiresBootstrapStackVersion": 6}},
        "MangaAssist-prod-Serving.assets": {"type": "cdk:asset-manifest",
                                            "properties": {"requiresBootstrapStackVersion": version}},
        "Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}},
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return tmp_path


def test_bootstrap_passes_at_or_above_the_assembly_requirement(tmp_path):
    with preflight_stubbed() as stubs:
        stubs.toolkit("21")
        finding = check_bootstrap(stubs.clients.cloudformation, REGION, _manifest(tmp_path, 21))
    assert (
        finding.line
        == f"ok    bootstrap: CDKToolkit UPDATE_COMPLETE, BootstrapVersion 21 >= 21 ({tmp_path / 'manifest.json'})"
    )


def test_bootstrap_below_the_default_requirement_fails(tmp_path):
    with preflight_stubbed() as stubs:
        stubs.toolkit("5")
        finding = check_bootstrap(stubs.clients.cloudformation, REGION, tmp_path / "no-cdk-out")
    assert finding.line == (
        "FAIL  bootstrap: CDKToolkit BootstrapVersion = 5, the stacks need >= 6 (aws-cdk-lib's "
        f"DefaultStackSynthesizer; no readable {tmp_path / 'no-cdk-out' / 'manifest.json'}): run `npx cdk bootstrap` "
        "with this account's "
        f"credentials in {REGION}"
    )
    assert finding.code == ExitCode.PREFLIGHT_ACCOUNT


def test_bootstrap_missing_or_failed_stack_fails(tmp_path):
    with preflight_stubbed() as stubs:
        stubs.no_stack("CDKToolkit")
        stubs.toolkit("21", status="ROLLBACK_COMPLETE")
        missing = check_bootstrap(stubs.clients.cloudformation, REGION, tmp_path)
        failed = check_bootstrap(stubs.clients.cloudformation, REGION, tmp_path)
    action = f"run `npx cdk bootstrap` with this account's credentials in {REGION}"
    assert missing.line == f"FAIL  bootstrap: stack CDKToolkit does not exist in {REGION}: {action}"
    assert failed.line == f"FAIL  bootstrap: stack CDKToolkit is ROLLBACK_COMPLETE, not usable: wait for it or {action}"


# --- quotas -----------------------------------------------------------------------------------
def test_quota_demand_counts_blue_green_in_variants_mode_and_max_instances_with_components():
    demand = quota_demands(config(**SEEDS_COUNTS).serving)[0]  # primary 4..20 + canary 1..2, both ml.g5.xlarge
    assert (demand.instance_type, demand.creation, demand.reach, demand.needed) == ("ml.g5.xlarge", 5, 22, 44)
    components = quota_demands(pinned(**{"serving.mode": "inference_components"}).serving)[0]
    assert (components.creation, components.reach, components.needed) == (2, 20, 20)
    split = quota_demands(config(**SEEDS_COUNTS, **{"serving.canary.instance_type": "ml.g6.xlarge"}).serving)
    assert [(d.instance_type, d.usage, d.needed) for d in split] == [
        ("ml.g5.xlarge", "endpoint", 40),
        ("ml.g6.xlarge", "endpoint", 4),
        # One cache-making job per model, on the model's own instance type (serving.compile_cache).
        ("ml.g5.xlarge", "processing job", 1),
        ("ml.g6.xlarge", "processing job", 1),
    ]
    assert [d.usage for d in quota_demands(config(**{"serving.compile_cache.enabled": "false"}).serving)] == [
        "endpoint"
    ]
    # The shadow is a fleet of its own (serving.shadow): its instances and its cache job count too.
    on = {
        "serving.shadow.enabled": "true",
        "serving.canary.enabled": "false",
        "serving.shadow.instance_type": "ml.g5.xlarge",
    }
    shadow = quota_demands(config(**SEEDS_COUNTS, **on).serving)
    assert [(d.instance_type, d.usage, d.reach, d.needed, d.keys) for d in shadow] == [
        ("ml.g5.xlarge", "endpoint", 22, 44, "serving.primary.max_capacity 20 + serving.shadow.max_capacity 2"),
        ("ml.g5.xlarge", "processing job", 2, 2, "serving.primary.instance_type + serving.shadow.instance_type"),
    ]


def test_quota_at_the_blue_green_count_passes():
    with preflight_stubbed() as stubs:
        stubs.quotas(
            {
                "ml.g5.xlarge for endpoint usage": 44.0,
                "ml.p4d.24xlarge for endpoint usage": 0.0,
                "ml.g5.xlarge for processing job usage": 2.0,
            }
        )
        findings = check_quotas(config(**SEEDS_COUNTS), stubs.clients.service_quotas, REGION)
    assert _lines(findings) == [
        "ok    quotas: ml.g5.xlarge for endpoint usage: quota 44, config reaches 22 (creation 5, blue/green 44)",
        "ok    quotas: ml.g5.xlarge for processing job usage: quota 2, config reaches 2 (creation 2, one "
        "cache-making job per model; serving.compile_cache.enabled = false needs none)",
    ]


def test_a_processing_quota_below_the_cache_jobs_fails_naming_the_way_out():
    with preflight_stubbed() as stubs:
        stubs.quotas({"ml.g5.xlarge for endpoint usage": 44.0, "ml.g5.xlarge for processing job usage": 0.0})
        findings = check_quotas(config(), stubs.clients.service_quotas, REGION)
    assert _lines(findings)[1] == (
        "FAIL  quotas: ml.g5.xlarge for processing job usage: quota 0, config reaches 2 (creation 2, one "
        "cache-making job per model; serving.compile_cache.enabled = false needs none) from "
        "serving.primary.instance_type + serving.canary.instance_type; request an increase to >= 2 in Service "
        f"Quotas (sagemaker, {REGION}) or lower those values"
    )


def test_quota_below_the_blue_green_count_fails_naming_the_keys():
    with preflight_stubbed() as stubs:
        stubs.quotas({"ml.g5.xlarge for endpoint usage": 4.0, "ml.g5.xlarge for processing job usage": 2.0})
        findings = check_quotas(config(**SEEDS_COUNTS), stubs.clients.service_quotas, REGION)
    assert _lines(findings)[:1] == [
        "FAIL  quotas: ml.g5.xlarge for endpoint usage: quota 4, config reaches 22 (creation 5, blue/green 44) from "
        "serving.primary.max_capacity 20 + serving.canary.max_capacity 2; request an increase to >= 44 in Service "
        f"Quotas (sagemaker, {REGION}) or lower those values"
    ]
    assert findings[0].code == ExitCode.PREFLIGHT_ACCOUNT


def test_quota_without_applied_value_uses_the_aws_default_and_reports_an_unknown_name():
    with preflight_stubbed() as stubs:
        stubs.quotas({})
        stubs.quotas(
            {"ml.g5.xlarge for endpoint usage": 2.0, "ml.g5.xlarge for processing job usage": 2.0},
            operation="list_aws_default_service_quotas",
        )
        components = check_quotas(
            pinned(**{"serving.mode": "inference_components"}), stubs.clients.service_quotas, REGION
        )
        stubs.quotas({})
        stubs.quotas({"ml.g5.xlarge for processing job usage": 2.0}, operation="list_aws_default_service_quotas")
        unknown = check_quotas(config(), stubs.clients.service_quotas, REGION)
    assert _lines(components)[1] == (
        "ok    quotas: ml.g5.xlarge for processing job usage: quota 2 (AWS default), config reaches 1 (creation 1, one "
        "cache-making job per model; serving.compile_cache.enabled = false needs none)"
    )
    assert _lines(components)[:1] == [
        "FAIL  quotas: ml.g5.xlarge for endpoint usage: quota 2 (AWS default), config reaches 20 (creation 2, "
        "inference components: no second fleet) from serving.inference_components.max_instance_count 20; request "
        f"an increase to >= 20 in Service Quotas (sagemaker, {REGION}) or lower those values"
    ]
    assert _lines(unknown)[:1] == [
        f"FAIL  quotas: quota 'ml.g5.xlarge for endpoint usage' not found in Service Quotas (sagemaker, {REGION}): the "
        "instance type may not be offered for endpoints there; pick another instance_type or region"
    ]


def test_quota_access_denied_is_an_error_line():
    with preflight_stubbed() as stubs:
        stubs.stubs["service-quotas"].add_client_error(
            "list_service_quotas", service_error_code="AccessDeniedException", service_message="not authorized"
        )
        findings = check_quotas(config(), stubs.clients.service_quotas, REGION)
    assert _lines(findings) == ["error quotas: Service Quotas (sagemaker): AccessDeniedException: not authorized"]
    assert exit_code(findings) == ExitCode.AWS_ERROR


# --- the command ------------------------------------------------------------------------------
def _all_green(stubs, tmp_path: Path) -> None:
    """Answers for a pinned variants-mode prod config with everything in place (report order)."""
    stubs.toolkit("21")
    stubs.quotas({"ml.g5.xlarge for endpoint usage": 50.0, "ml.g5.xlarge for processing job usage": 2.0})
    for prefix in (
        "base-models/llama-3-8b-instruct-awq/v1/",
        "adapters/general_support_v2/v2/",
        "adapters/jp_style_v1/v1/",
        "adapters/manga_domain_v3/v3/",
    ):
        stubs.version_folder(prefix)
    stubs.approved(pinned())
    stubs.stubs["sagemaker"].add_client_error(
        "describe_endpoint",
        service_error_code="ValidationException",
        service_message='Could not find endpoint "mangaassist-vllm-prod".',
        expected_params={"EndpointName": "mangaassist-vllm-prod"},
    )
    stubs.stubs["logs"].add_response(
        "describe_log_groups",
        {"logGroups": []},
        {"logGroupNamePrefix": "/aws/sagemaker/Endpoints/mangaassist-vllm-prod"},
    )


UV_PINNED = pinned().image.build.uv_image


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    pins = json.dumps(pinned().image.build.primary.model_dump())
    return ["preflight", "--cdk-out", str(tmp_path), "-c", f"image.build.primary={pins}", "-c",
            f"image.build.artifacts_bucket_name={BUCKET}", "-c", f"image.build.uv_image={UV_PINNED}",
            "-c", f"release.registered_packages={json.dumps(REGISTERED)}", *SEEDS_G5_FLAGS, *extra]  # fmt: skip


def test_cli_preflight_all_ok(tmp_path):
    lines: list[str] = []
    with preflight_stubbed() as stubs:
        _all_green(stubs, tmp_path)
        code = main(_argv(tmp_path), Deps(out=lines.append, preflight_clients=stubs.factory))
    assert code == ExitCode.OK
    assert lines[0] == (
        f"preflight MangaAssist-prod-* in {REGION}: serving.mode variants, image.source build, "
        "endpoint mangaassist-vllm-prod"
    )
    assert [line.split(":")[0] for line in lines[1:-1]] == [
        "ok    pins", "ok    region", "ok    bootstrap", "ok    quotas", "ok    quotas",
        "ok    artifacts", "ok    artifacts", "ok    artifacts", "ok    artifacts", "ok    approvals",
        "skip  image", "ok    endpoint", "ok    log-groups",
    ]  # fmt: skip
    assert lines[6] == (
        f"ok    artifacts: image.build.primary.base_model: s3://{BUCKET}/base-models/llama-3-8b-instruct-awq/v1/ "
        f"matches the pin ({len(FILES)} file(s), from S3 checksums)"
    )
    assert "ok    approvals: 4 pin(s), each an Approved model package" in lines
    assert lines[-1] == "preflight passed: 12 ok, 13 line(s); exit 0"


def test_cli_preflight_reports_every_class_and_exits_with_the_first(tmp_path):
    lines: list[str] = []
    with preflight_stubbed() as stubs:
        stubs.toolkit("21")
        stubs.quotas({"ml.g5.xlarge for endpoint usage": 4.0, "ml.g5.xlarge for processing job usage": 2.0})
        stubs.listing("base-models/llama-3-8b-instruct-awq/v1/", {})
        package = add_described(
            stubs.stubs["sagemaker"],
            "mangaassist-prod-base-model",
            "llama-3-8b-instruct-awq",
            f"v1/{DIGEST}",
            status="PendingManualApproval",
        )
        stubs.stubs["sagemaker"].add_client_error(
            "describe_endpoint", service_error_code="ThrottlingException", service_message="Rate exceeded"
        )
        # -c serving.canary.enabled=false: one variant, so the quota needs 2 x 20; unpinned adapters stay.
        argv = ["preflight", "--cdk-out", str(tmp_path), "-c", f"image.build.primary.base_model=v1/{DIGEST}",
                "-c", f"image.build.artifacts_bucket_name={BUCKET}", "-c", "serving.canary.enabled=false",
                "-c", f"image.build.uv_image={UV_PINNED}", *SEEDS_G5_FLAGS, *SEEDS_COUNTS_FLAGS,
                "-c", f"release.registered_packages={json.dumps(REGISTERED)}"]  # fmt: skip
        code = main(argv, Deps(out=lines.append, preflight_clients=stubs.factory))
    assert code == ExitCode.PREFLIGHT_CONFIG
    assert sum(line.startswith("FAIL  pins: image.build.primary.adapters.") for line in lines) == 3
    assert "FAIL  quotas: ml.g5.xlarge for endpoint usage: quota 4, config reaches 20 (creation 4, blue/green 40)" in (
        "\n".join(lines)
    )
    assert (
        f"FAIL  artifacts: image.build.primary.base_model = 'v1/{DIGEST}': s3://{BUCKET}/base-models/"
        "llama-3-8b-instruct-awq/v1/ has no objects; upload version v1"
    ) in lines
    assert (
        f"FAIL  approvals: image.build.primary.base_model = 'v1/{DIGEST}': model package {package} is "
        "PendingManualApproval, not Approved; approve it (aws sagemaker update-model-package "
        "--model-approval-status Approved) or pin an approved version"
    ) in lines
    assert "error endpoint: endpoint mangaassist-vllm-prod: ThrottlingException: Rate exceeded" in lines
    assert "skip  log-groups: not checked: the endpoint check could not run" in lines
    assert lines[-1] == (
        "preflight failed: 6 problem(s) (config 3, account 1, artifacts 2), 1 check(s) could not run; "
        "exit 6 (PREFLIGHT_CONFIG)"
    )


def test_cli_preflight_without_credentials_runs_the_offline_checks(tmp_path):
    lines: list[str] = []
    with preflight_stubbed(credentials=False) as stubs:
        code = main(["preflight", "--cdk-out", str(tmp_path)], Deps(out=lines.append, preflight_clients=stubs.factory))
    assert code == ExitCode.PREFLIGHT_CONFIG  # the placeholder pins still fail first
    assert lines[-3:] == [
        f"ok    region: {REGION}: SageMaker is offered",
        "error aws: no AWS credentials found (environment, --profile, SSO, instance role); not checked: bootstrap, "
        "quotas, artifacts, approvals, image, endpoint, log-groups",
        "preflight failed: 5 problem(s) (config 5), 1 check(s) could not run; exit 6 (PREFLIGHT_CONFIG)",
    ]
    with preflight_stubbed(credentials=False) as stubs:
        code = main(
            ["preflight", *(arg for key, value in PREBUILT_DEV.items() for arg in ("-c", f"{key}={value}"))],
            Deps(out=lines.append, preflight_clients=stubs.factory),
        )
    assert code == ExitCode.AWS_ERROR
    assert lines[-1] == "preflight incomplete: 1 check(s) could not run; exit 5 (AWS_ERROR)"


def test_cli_preflight_for_the_foundation_checks_region_credentials_and_bootstrap_only(tmp_path):
    # make deploy-foundation runs before any artifact exists: the placeholder pins are not its concern,
    # and a missing bootstrap or credentials is named before CDK's "Unable to resolve AWS account".
    lines: list[str] = []
    with preflight_stubbed() as stubs:
        stubs.toolkit("21")
        code = main(
            ["preflight", "--foundation", "--cdk-out", str(tmp_path)],
            Deps(out=lines.append, preflight_clients=stubs.factory),
        )
    assert code == ExitCode.OK
    assert [line.split(":")[0] for line in lines[1:-1]] == ["skip  pins", "ok    region", "ok    bootstrap"]
    assert lines[1] == "skip  pins: not read by the foundation stacks (ImageRepository, ModelArtifacts)"
    with preflight_stubbed(credentials=False) as stubs:
        code = main(["preflight", "--foundation"], Deps(out=lines.append, preflight_clients=stubs.factory))
    assert code == ExitCode.AWS_ERROR
    assert lines[-2] == (
        "error aws: no AWS credentials found (environment, --profile, SSO, instance role); not checked: bootstrap"
    )


def test_cli_preflight_context_flag_needs_key_equals_value(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["preflight", "-c", "serving.mode"])
    assert exited.value.code == 2
    assert "'serving.mode': expected key=value, e.g. serving.primary.max_capacity=8" in capsys.readouterr().err


def test_cli_preflight_bad_override_is_a_usage_error(capsys):
    code = main(["preflight", "-c", "serving.mode=both"], Deps(preflight_clients=lambda r, p: pytest.fail("no AWS")))
    assert code == ExitCode.USAGE
    assert "serving.mode" in capsys.readouterr().err
