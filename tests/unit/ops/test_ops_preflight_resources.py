"""``preflight``: pinned artifacts in S3, the prebuilt image in ECR, the endpoint name and leftover log groups."""

from typing import Any

from ops.exit_codes import ExitCode
from ops.preflight.artifacts import check_artifacts, check_image
from ops.preflight.conflicts import DeployedEndpoint, check_endpoint, check_log_groups
from tests.config_helpers import PREBUILT_DEV
from tests.unit.ops.preflight_stubs import (
    ACCOUNT,
    BUCKET,
    DIGEST,
    FILES,
    NOW,
    REGION,
    archive,
    config,
    pinned,
    preflight_stubbed,
)

BASE = "base-models/llama-3-8b-instruct-awq/v1/"
ADAPTER_PREFIXES = ("adapters/general_support_v2/v2/", "adapters/jp_style_v1/v1/", "adapters/manga_domain_v3/v3/")
ENDPOINT = "mangaassist-vllm-prod"
ENDPOINT_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{ENDPOINT}"
BASE_PIN = f"image.build.primary.base_model = 'v1/{DIGEST}'"
COMPONENT_PINS = {
    f"serving.inference_components.adapter_artifacts.{adapter}": f"{version}/{DIGEST}"
    for adapter, version in (("manga_domain_v3", "v3"), ("general_support_v2", "v2"), ("jp_style_v1", "v1"))
}
BASE_OK = f"ok    artifacts: image.build.primary.base_model: s3://{BUCKET}/{BASE} matches the pin (2 file(s), "


def _artifacts(stubs, cfg, *, download=False):
    return [f.line for f in check_artifacts(cfg, stubs.clients.cloudformation, stubs.clients.s3, download=download)]


# --- artifacts --------------------------------------------------------------------------------
def test_artifacts_match_their_pins_from_s3_checksums():
    with preflight_stubbed() as stubs:
        for prefix in (BASE, *ADAPTER_PREFIXES):
            stubs.version_folder(prefix)
        lines = _artifacts(stubs, pinned())
    assert lines[0] == BASE_OK + "from S3 checksums)"
    assert len(lines) == 4 and all(line.startswith("ok    artifacts: ") for line in lines)


def test_artifacts_with_other_bytes_fail_with_the_actual_digest():
    changed = {**FILES, "config.json": b'{"r": 32}'}
    with preflight_stubbed() as stubs:
        stubs.version_folder(BASE, changed)
        for prefix in ADAPTER_PREFIXES:
            stubs.version_folder(prefix)
        findings = check_artifacts(pinned(), stubs.clients.cloudformation, stubs.clients.s3, download=False)
    assert findings[0].code == ExitCode.PREFLIGHT_ARTIFACTS
    assert findings[0].line.startswith(
        f"FAIL  artifacts: {BASE_PIN}: the files under s3://{BUCKET}/{BASE} have sha256 "
    )
    assert findings[0].line.endswith(
        "(from S3 checksums); upload the pinned files or pin the uploaded ones (`python -m ops.pin_artifacts`)"
    )
    assert DIGEST not in findings[0].line.split("have sha256 ")[1]


def test_artifacts_missing_folder_fails():
    with preflight_stubbed() as stubs:
        stubs.listing(BASE, {f"{BASE}": b""})  # only a console folder marker: no files
        for prefix in ADAPTER_PREFIXES:
            stubs.version_folder(prefix)
        lines = _artifacts(stubs, pinned())
    assert lines[0] == f"FAIL  artifacts: {BASE_PIN}: s3://{BUCKET}/{BASE} has no objects; upload version v1"


def test_artifacts_without_full_object_checksums_are_not_a_failure_unless_downloaded():
    cfg = pinned(**{"serving.mode": "inference_components", **COMPONENT_PINS})
    with preflight_stubbed() as stubs:
        stubs.version_folder(BASE, kind="COMPOSITE")  # multipart uploads: a checksum of part checksums
        for prefix in ADAPTER_PREFIXES:
            keys = {prefix + p: d for p, d in sorted(FILES.items())} | {prefix + "adapter.tar.gz": archive(FILES)}
            stubs.listing(prefix, keys)
            for key, data in keys.items():
                if not key.endswith(".tar.gz"):
                    stubs.head(key, data, kind=None)  # uploaded without a checksum
        lines = _artifacts(stubs, cfg)
    assert lines[0] == (
        f"ok    artifacts: image.build.primary.base_model: s3://{BUCKET}/{BASE} has 2 object(s); sha256 not checked "
        "here (no full-object SHA-256 checksums in S3): the image build checks it, or pass --download-digests"
    )
    assert len(lines) == 4
    assert lines[1].endswith(
        "(no full-object SHA-256 checksums in S3): the container checks it, or pass --download-digests"
    )


def test_download_digests_streams_files_and_adapter_archives():
    cfg = pinned(**{"serving.mode": "inference_components", **COMPONENT_PINS})
    with preflight_stubbed() as stubs:
        stubs.listing(BASE, {BASE + p: d for p, d in sorted(FILES.items())})
        for path, data in sorted(FILES.items()):
            stubs.get(BASE + path, data)
        for index, prefix in enumerate(ADAPTER_PREFIXES):
            files = FILES if index else {**FILES, "extra.txt": b"not pinned"}  # general_support_v2's archive differs
            stubs.listing(prefix, {prefix + "adapter.tar.gz": archive(files)})
            stubs.get(prefix + "adapter.tar.gz", archive(files))
        findings = check_artifacts(cfg, stubs.clients.cloudformation, stubs.clients.s3, download=True)
    lines = [f.line for f in findings]
    assert lines[0] == BASE_OK + "downloaded)"
    assert lines[1].startswith(
        f"FAIL  artifacts: serving.inference_components.adapter_artifacts.general_support_v2 = 'v2/{DIGEST}': the "
        f"files under s3://{BUCKET}/{ADAPTER_PREFIXES[0]} have sha256 "
    )
    assert lines[2] == (
        "ok    artifacts: serving.inference_components.adapter_artifacts.jp_style_v1: "
        f"s3://{BUCKET}/{ADAPTER_PREFIXES[1]} matches the pin (2 file(s), adapter.tar.gz downloaded)"
    )


def test_adapter_archive_missing_fails():
    cfg = config(**{**PREBUILT_DEV, "image.build.artifacts_bucket_name": BUCKET,
                    "serving.mode": "inference_components", **COMPONENT_PINS})  # fmt: skip
    with preflight_stubbed() as stubs:
        for prefix in ADAPTER_PREFIXES:
            stubs.listing(prefix, {prefix + path: data for path, data in FILES.items()})  # no adapter.tar.gz
        lines = _artifacts(stubs, cfg)
    assert len(lines) == 3
    assert lines[0] == (
        f"FAIL  artifacts: serving.inference_components.adapter_artifacts.general_support_v2 = 'v2/{DIGEST}': "
        f"s3://{BUCKET}/{ADAPTER_PREFIXES[0]}adapter.tar.gz is missing; upload the version's adapter.tar.gz "
        "(docs/inference-components.md)"
    )


def test_bucket_comes_from_the_model_artifacts_stack_or_asks_for_the_foundation():
    cfg = config(**{"image.build.primary.base_model": f"v1/{DIGEST}"})
    with preflight_stubbed() as stubs:
        stubs.no_stack("MangaAssist-prod-ModelArtifacts")
        missing = _artifacts(stubs, cfg)
        stubs.stack("MangaAssist-prod-ModelArtifacts", {"ModelArtifactsBucketName": "from-stack"})
        stubs.listing(BASE, {}, bucket="from-stack")
        found = _artifacts(stubs, cfg)
    assert missing == [
        "FAIL  artifacts: stack MangaAssist-prod-ModelArtifacts does not exist (image.build.artifacts_bucket_name "
        "unset): deploy the foundation first: make deploy-foundation"
    ]
    # Listed in the stack's bucket (the stub checks Bucket="from-stack").
    assert found == [f"FAIL  artifacts: {BASE_PIN}: s3://from-stack/{BASE} has no objects; upload version v1"]


# --- prebuilt image ---------------------------------------------------------------------------
def _describe_images(stubs, repository, image_id, *, registry=ACCOUNT, found=True):
    params = {"registryId": registry, "repositoryName": repository, "imageIds": [image_id]}
    if not found:
        stubs.stubs["ecr"].add_client_error(
            "describe_images",
            service_error_code="ImageNotFoundException",
            service_message=f"The image with imageId {image_id} does not exist within the repository",
            expected_params=params,
        )
        return
    detail = {"registryId": registry, "repositoryName": repository, "imageDigest": "sha256:" + "a" * 64,
              "imageTags": ["v1"], "imagePushedAt": NOW}  # fmt: skip
    stubs.stubs["ecr"].add_response("describe_images", {"imageDetails": [detail]}, params)


def test_prebuilt_image_in_the_app_repository_passes_and_a_missing_one_fails():
    cfg = config(**{**PREBUILT_DEV, "image.canary": {"tag": "v2"}})
    repo_uri = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/mangaassist-modelimage-1a2b"
    with preflight_stubbed() as stubs:
        stubs.stack("MangaAssist-dev-ImageRepository", {"ImageRepositoryUri": repo_uri})
        _describe_images(stubs, "mangaassist-modelimage-1a2b", {"imageTag": "vllm0.26.0-llama3-8b-awq-lora3-v1"})
        stubs.stack("MangaAssist-dev-ImageRepository", {"ImageRepositoryUri": repo_uri})
        _describe_images(stubs, "mangaassist-modelimage-1a2b", {"imageTag": "v2"}, found=False)
        findings = check_image(cfg, stubs.clients.cloudformation, stubs.ecr_in, REGION)
    assert [f.line for f in findings] == [
        "ok    image: image.primary = 'vllm0.26.0-llama3-8b-awq-lora3-v1': in ECR repository "
        f"mangaassist-modelimage-1a2b (sha256:{'a' * 64})",
        "FAIL  image: image.canary = 'v2': The image with imageId {'imageTag': 'v2'} does not exist within the "
        "repository; push it first",
    ]
    assert findings[1].code == ExitCode.PREFLIGHT_ARTIFACTS


def test_prebuilt_image_by_uri_and_a_missing_repository_stack():
    digest = "sha256:" + "b" * 64
    uri = f"210987654321.dkr.ecr.eu-west-1.amazonaws.com/ci/vllm@{digest}"
    with preflight_stubbed() as stubs:
        _describe_images(stubs, "ci/vllm", {"imageDigest": digest}, registry="210987654321")
        by_uri = check_image(config(**{**PREBUILT_DEV, "image.primary": {"uri": uri}}),
                             stubs.clients.cloudformation, stubs.ecr_in, REGION)  # fmt: skip
        stubs.no_stack("MangaAssist-dev-ImageRepository")
        no_stack = check_image(config(**PREBUILT_DEV), stubs.clients.cloudformation,
                               stubs.ecr_in, REGION)  # fmt: skip
    assert by_uri[0].line == f"ok    image: image.primary = '{uri}': in ECR repository ci/vllm (sha256:{'a' * 64})"
    assert no_stack[0].line == (
        "FAIL  image: image.primary = 'vllm0.26.0-llama3-8b-awq-lora3-v1': stack MangaAssist-dev-ImageRepository does "
        "not exist; deploy the foundation first: make deploy-foundation, then push the image"
    )


# --- endpoint name and mode -------------------------------------------------------------------
def _endpoint(stubs, owner: str | None, variants: list[dict[str, Any]], role: bool = False) -> None:
    sagemaker = stubs.stubs["sagemaker"]
    sagemaker.add_response(
        "describe_endpoint",
        {"EndpointName": ENDPOINT, "EndpointArn": ENDPOINT_ARN, "EndpointConfigName": "cfg-1",
         "EndpointStatus": "InService", "CreationTime": NOW, "LastModifiedTime": NOW},
        {"EndpointName": ENDPOINT},
    )  # fmt: skip
    tags = [{"Key": "aws:cloudformation:stack-name", "Value": owner}] if owner else []
    sagemaker.add_response(
        "list_tags", {"Tags": [*tags, {"Key": "Project", "Value": "x"}]}, {"ResourceArn": ENDPOINT_ARN}
    )
    if owner != "MangaAssist-prod-Serving":
        return
    config_answer = {
        "EndpointConfigName": "cfg-1",
        "EndpointConfigArn": ENDPOINT_ARN.replace("endpoint/", "endpoint-config/"),
        "ProductionVariants": variants,
        "CreationTime": NOW,
    }
    if role:
        config_answer["ExecutionRoleArn"] = f"arn:aws:iam::{ACCOUNT}:role/exec"
    sagemaker.add_response("describe_endpoint_config", config_answer, {"EndpointConfigName": "cfg-1"})


VARIANT = {"VariantName": "primary", "ModelName": "m", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 4}
IC_VARIANT = {"VariantName": "primary", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 2}


def test_endpoint_absent_or_owned_in_the_same_mode_passes():
    with preflight_stubbed() as stubs:
        stubs.stubs["sagemaker"].add_client_error(
            "describe_endpoint", service_error_code="ValidationException",
            service_message=f'Could not find endpoint "{ENDPOINT}".', expected_params={"EndpointName": ENDPOINT},
        )  # fmt: skip
        absent, state = check_endpoint(config(), stubs.clients.sagemaker)
        _endpoint(stubs, "MangaAssist-prod-Serving", [VARIANT])
        owned, owned_state = check_endpoint(config(), stubs.clients.sagemaker)
    assert [f.line for f in absent] == [f"ok    endpoint: {ENDPOINT}: no such endpoint yet; the deploy creates it"]
    assert state == DeployedEndpoint(False)
    assert [f.line for f in owned] == [
        f"ok    endpoint: {ENDPOINT}: owned by MangaAssist-prod-Serving, serving.mode variants"
    ]
    assert owned_state == DeployedEndpoint(True, owned=True)


def test_endpoint_of_another_stack_fails():
    with preflight_stubbed() as stubs:
        _endpoint(stubs, "OtherApp-prod-Serving", [VARIANT])
        findings, _ = check_endpoint(config(), stubs.clients.sagemaker)
    assert [f.line for f in findings] == [
        f"FAIL  endpoint: endpoint {ENDPOINT} exists and is not this app's (stack OtherApp-prod-Serving; this app's is "
        "MangaAssist-prod-Serving): pick another serving.endpoint_name"
    ]
    assert findings[0].code == ExitCode.PREFLIGHT_CONFLICT


def test_endpoint_in_the_other_mode_prints_the_switch_procedure():
    with preflight_stubbed() as stubs:
        _endpoint(stubs, "MangaAssist-prod-Serving", [IC_VARIANT], role=True)
        findings, _ = check_endpoint(config(), stubs.clients.sagemaker)
    assert [f.line for f in findings] == [
        f"FAIL  endpoint: endpoint {ENDPOINT} runs serving.mode inference_components, the config says variants: a mode "
        "switch needs the endpoint re-created: `npx cdk destroy MangaAssist-prod-Serving` (or change "
        "serving.endpoint_name), then deploy"
    ]


# --- leftover log groups ----------------------------------------------------------------------
def _log_groups(stubs, prefix: str, names: list[str]) -> None:
    groups = [
        {"logGroupName": n, "creationTime": 1, "arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{n}:*"} for n in names
    ]
    stubs.stubs["logs"].add_response("describe_log_groups", {"logGroups": groups}, {"logGroupNamePrefix": prefix})


def test_a_log_group_left_without_its_endpoint_is_reported_as_adopted_and_a_longer_name_is_not_it():
    """CDK's LogRetention adopts a retained group (tests/infra/test_serving_stack.py): no conflict."""
    group = f"/aws/sagemaker/Endpoints/{ENDPOINT}"
    base_group = f"/aws/sagemaker/InferenceComponents/{ENDPOINT}-base"
    with preflight_stubbed() as stubs:
        _log_groups(stubs, group, [group])
        _log_groups(stubs, base_group, [base_group + "-old"])  # only a prefix match: not the stack's name
        findings = check_log_groups(
            pinned(**{"serving.mode": "inference_components", **COMPONENT_PINS}),
            stubs.clients.logs,
            DeployedEndpoint(False),
        )
    assert [f.line for f in findings] == [
        f"ok    log-groups: {group}: left by an earlier deploy while endpoint {ENDPOINT} does not exist; the stack "
        "adopts it (its events stay, retention set to 365 days)",
        f"ok    log-groups: {base_group}: absent",
    ]


def test_a_log_group_that_cannot_be_described_is_an_error_line():
    group = f"/aws/sagemaker/Endpoints/{ENDPOINT}"
    with preflight_stubbed() as stubs:
        stubs.stubs["logs"].add_client_error(
            "describe_log_groups", "AccessDeniedException", "not authorized to perform: logs:DescribeLogGroups"
        )
        findings = check_log_groups(config(), stubs.clients.logs, DeployedEndpoint(False))
    assert [f.line for f in findings] == [
        f"error log-groups: log group {group}: AccessDeniedException: not authorized to perform: logs:DescribeLogGroups"
    ]


def test_log_groups_are_expected_while_the_endpoint_exists():
    with preflight_stubbed() as stubs:
        findings = check_log_groups(config(), stubs.clients.logs, DeployedEndpoint(True, owned=True))
    assert [f.line for f in findings] == [f"skip  log-groups: endpoint {ENDPOINT} exists, so its log groups may too"]


def test_adapter_folder_with_only_its_archive_is_left_to_the_container():
    cfg = config(**{**PREBUILT_DEV, "image.build.artifacts_bucket_name": BUCKET,
                    "serving.mode": "inference_components", **COMPONENT_PINS})  # fmt: skip
    with preflight_stubbed() as stubs:
        for prefix in ADAPTER_PREFIXES:
            stubs.listing(prefix, {prefix + "adapter.tar.gz": archive(FILES)})
        lines = _artifacts(stubs, cfg)
    assert lines[0] == (
        "ok    artifacts: serving.inference_components.adapter_artifacts.general_support_v2: "
        f"s3://{BUCKET}/{ADAPTER_PREFIXES[0]} has 1 object(s); sha256 not checked here (no full-object SHA-256 "
        "checksums in S3): the container checks it, or pass --download-digests"
    )
