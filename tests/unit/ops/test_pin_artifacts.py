"""ops.pin_artifacts reads CURRENT pointers into a config block (Stubber-validated S3 calls)."""

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from app_config.image_build import ArtifactSetConfig
from ops.exit_codes import ExitCode
from ops.pin_artifacts import approved_packages, current_pins, main
from serving_contract.model_packages import find_packages
from tests.botocore_helpers import streaming_body
from tests.unit.ops.model_package_stubs import NOW, add_model_package, add_no_package, describe_package, package_arn

SHA = "a" * 64


def test_pointers_become_a_valid_artifact_set() -> None:
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(s3) as stub:
        stub.add_response(
            "get_object", {"Body": streaming_body(f"v2/{SHA}\n")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"}
        )
        stub.add_response(
            "get_object",
            {"Body": streaming_body(f"v4/{SHA}")},
            {"Bucket": "b", "Key": "adapters/manga_domain_v3/CURRENT"},
        )
        pins = current_pins(s3, bucket="b", base_model="llama", adapters=["manga_domain_v3"])
    assert pins == {"base_model": f"v2/{SHA}", "adapters": {"manga_domain_v3": f"v4/{SHA}"}}
    assert ArtifactSetConfig.model_validate(pins).adapters["manga_domain_v3"] == f"v4/{SHA}"


def test_a_malformed_pointer_names_the_object() -> None:
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(s3) as stub:
        stub.add_response(
            "get_object", {"Body": streaming_body("v2")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"}
        )
        with pytest.raises(SystemExit) as info:
            current_pins(s3, bucket="b", base_model="llama", adapters=[])
    assert (
        str(info.value)
        == "s3://b/base-models/llama/CURRENT: pointer 'v2': must be '<version>/<64 lowercase hex sha256>'"
    )


def _sagemaker():
    return boto3.client("sagemaker", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_pins_of_approved_model_packages_pass_and_name_the_packages_to_record() -> None:
    sagemaker = _sagemaker()
    pins = {"base_model": f"v2/{SHA}", "adapters": {"manga_domain_v3": f"v4/{SHA}"}}
    with Stubber(sagemaker) as stub:
        base = add_model_package(stub, "mangaassist-prod-base-model", "llama", f"v2/{SHA}")
        adapter = add_model_package(stub, "mangaassist-prod-adapters", "manga_domain_v3", f"v4/{SHA}", version=4)
        found = approved_packages(sagemaker, pins, base_model="llama", project_name="MangaAssist", stage="prod")
    assert found == ([], {"llama/v2": base, "manga_domain_v3/v4": adapter})


def test_an_unapproved_or_unreleased_pin_is_refused_in_one_line_each() -> None:
    sagemaker = _sagemaker()
    pins = {"base_model": f"v2/{SHA}", "adapters": {"manga_domain_v3": f"v4/{SHA}"}}
    with Stubber(sagemaker) as stub:
        arn = add_model_package(stub, "mangaassist-prod-base-model", "llama", f"v2/{SHA}", status="Rejected", version=7)
        add_no_package(stub, "mangaassist-prod-adapters")
        lines, packages = approved_packages(
            sagemaker, pins, base_model="llama", project_name="MangaAssist", stage="prod"
        )
    assert packages == {}
    assert lines == [
        f"base_model = 'v2/{SHA}': model package {arn} was rejected (ModelApprovalStatus Rejected): a rejected version "
        "may not deploy; pin another version",
        f"adapters.manga_domain_v3 = 'v4/{SHA}': no model package in mangaassist-prod-adapters registers it (not "
        "released through the quality gates); run `mangaassist-ops release` for manga_domain_v3 v4 "
        "(docs/model-release.md)",
    ]


def _listed(group: str, version: int, status: str = "Approved") -> dict[str, object]:
    return {
        "ModelPackageArn": package_arn(group, version), "ModelPackageDescription": f"manga_domain_v3 v4/{SHA}",
        "CreationTime": NOW, "ModelPackageStatus": "Completed", "ModelApprovalStatus": status,
    }  # fmt: skip


def test_a_package_whose_metadata_names_another_pin_does_not_count() -> None:
    """The description is free text; the customer metadata written by the pipeline decides."""
    sagemaker = _sagemaker()
    group = "mangaassist-prod-adapters"
    with Stubber(sagemaker) as stub:
        stub.add_response(
            "list_model_packages",
            {"ModelPackageSummaryList": [_listed(group, 3)]},
            {"ModelPackageGroupName": group, "SortBy": "CreationTime", "SortOrder": "Descending"},
        )
        stub.add_response(
            "describe_model_package",
            describe_package(group, "manga_domain_v3", f"v5/{SHA}", version=3),
            {"ModelPackageName": package_arn(group, 3)},
        )
        assert find_packages(sagemaker, group, "manga_domain_v3", f"v4/{SHA}") == []


def test_a_pin_two_packages_claim_is_refused_naming_both() -> None:
    """Issue 53, finding 9: a second package naming the pin (anyone who may create packages in the group can make
    one) is not silently preferred; which package the release registered is what ops release printed."""
    sagemaker = _sagemaker()
    group = "mangaassist-prod-adapters"
    pins = {"base_model": f"v2/{SHA}", "adapters": {"manga_domain_v3": f"v4/{SHA}"}}
    with Stubber(sagemaker) as stub:
        add_model_package(stub, "mangaassist-prod-base-model", "llama", f"v2/{SHA}")
        stub.add_response(
            "list_model_packages",
            {"ModelPackageSummaryList": [_listed(group, 9), _listed(group, 4)]},
            {"ModelPackageGroupName": group, "SortBy": "CreationTime", "SortOrder": "Descending"},
        )
        for version in (9, 4):
            stub.add_response(
                "describe_model_package",
                describe_package(group, "manga_domain_v3", f"v4/{SHA}", version=version),
                {"ModelPackageName": package_arn(group, version)},
            )
        lines, packages = approved_packages(
            sagemaker, pins, base_model="llama", project_name="MangaAssist", stage="prod"
        )
    assert packages == {"llama/v2": package_arn("mangaassist-prod-base-model", 1)}
    assert lines == [
        f"adapters.manga_domain_v3 = 'v4/{SHA}': 2 model packages in {group} register it ({package_arn(group, 9)}, "
        f"{package_arn(group, 4)}): record the one `mangaassist-ops release` printed in release.registered_packages "
        "yourself"
    ]


def test_the_command_needs_a_stage_to_check_approvals(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--bucket", "b", "--base-model", "llama", "--adapters", "a"])
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: --stage is required to check the pins' model packages (or pass --no-approval-check)\n"
    )


class _Session:
    """A session whose S3 (and SageMaker) clients are stubbed (Stubber: the real API shapes)."""

    def __init__(self, s3: object, sagemaker: object = None) -> None:
        self.clients = {"s3": s3, "sagemaker": sagemaker}
        self.asked: dict[str, object] = {}

    def __call__(self, **kwargs: object) -> "_Session":
        self.asked = kwargs
        return self

    def client(self, service: str) -> object:
        assert self.clients.get(service) is not None, service
        return self.clients[service]


def test_without_credentials_it_is_one_line_and_exit_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 40 item 4: a 51-line NoCredentialsError traceback before.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    argv = ["--bucket", "b", "--base-model", "llama", "--adapters", "a", "--no-approval-check", "--region", "us-east-1"]
    assert main(argv) == ExitCode.AWS_ERROR
    err = capsys.readouterr().err
    assert err == "pin_artifacts: s3://b: Unable to locate credentials\n"


@pytest.mark.parametrize("variant", ["canary", "shadow"])
def test_write_sets_the_stage_overlay_and_prints_the_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(
        json.dumps({"app": "x", "context": {"stages": {"prod": {}, "dev": {"tags": {"a": "b"}}}}}, indent=2)
    )
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    session = _Session(s3)
    with Stubber(s3) as stub:
        stub.add_response(
            "get_object", {"Body": streaming_body(f"v2/{SHA}")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"}
        )
        stub.add_response(
            "get_object", {"Body": streaming_body(f"v4/{SHA}")}, {"Bucket": "b", "Key": "adapters/a/CURRENT"}
        )
        code = main(
            [
                *("--bucket", "b", "--base-model", "llama", "--adapters", "a", "--no-approval-check"),
                *("--stage", "dev", "--write", variant, "--cdk-json", str(cdk_json), "--profile", "ops"),
            ],
            session_factory=session,
        )
    assert code == ExitCode.OK
    assert session.asked == {"region_name": None, "profile_name": "ops"}
    written = json.loads(cdk_json.read_text())["context"]["stages"]
    assert written["dev"] == {
        "tags": {"a": "b"},
        "image": {"build": {variant: {"base_model": f"v2/{SHA}", "adapters": {"a": f"v4/{SHA}"}}}},
    }
    assert written["prod"] == {}
    diff = [line for line in capsys.readouterr().out.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert f'+              "base_model": "v2/{SHA}",' in diff
    assert all(line.startswith("+") or line.strip() == "-      }" for line in diff), diff  # only the block is added


def test_write_needs_a_stage_that_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"stages": {"prod": {}}}}))
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(s3) as stub:
        stub.add_response(
            "get_object", {"Body": streaming_body(f"v2/{SHA}")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"}
        )
        code = main(
            [
                *("--bucket", "b", "--base-model", "llama", "--adapters", "", "--no-approval-check"),
                *("--stage", "qa", "--write", "primary", "--cdk-json", str(cdk_json)),
            ],
            session_factory=_Session(s3),
        )
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err == f"pin_artifacts: --stage qa: not a stage of {cdk_json} (stages: prod)\n"


def test_write_records_the_package_of_each_pin_beside_the_pins(tmp_path: Path) -> None:
    """Issue 53, finding 9: the deploy looks up release.registered_packages; --write records the packages it found."""
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"stages": {"prod": {}}}}, indent=2))
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    sagemaker = _sagemaker()
    with Stubber(s3) as s3_stub, Stubber(sagemaker) as stub:
        s3_stub.add_response(
            "get_object", {"Body": streaming_body(f"v2/{SHA}")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"}
        )
        s3_stub.add_response(
            "get_object", {"Body": streaming_body(f"v4/{SHA}")}, {"Bucket": "b", "Key": "adapters/a/CURRENT"}
        )
        base = add_model_package(stub, "mangaassist-prod-base-model", "llama", f"v2/{SHA}", version=3)
        adapter = add_model_package(stub, "mangaassist-prod-adapters", "a", f"v4/{SHA}", version=8)
        code = main(
            [
                *("--bucket", "b", "--base-model", "llama", "--adapters", "a"),
                *("--stage", "prod", "--write", "canary", "--cdk-json", str(cdk_json)),
            ],
            session_factory=_Session(s3, sagemaker),
        )
    assert code == ExitCode.OK
    written = json.loads(cdk_json.read_text())["context"]["stages"]["prod"]
    assert written["image"]["build"]["canary"] == {"base_model": f"v2/{SHA}", "adapters": {"a": f"v4/{SHA}"}}
    assert written["release"] == {"registered_packages": {"llama/v2": base, "a/v4": adapter}}
