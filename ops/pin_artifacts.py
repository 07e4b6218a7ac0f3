"""Print the current CURRENT pointers as an ``image.build.<variant>`` config block.

Run by an operator with AWS credentials (never at synth):

    python -m ops.pin_artifacts --bucket mangaassist-model-artifacts \\
        --base-model llama-3-8b-instruct-awq --adapters manga_domain_v3,general_support_v2,jp_style_v1

prints ``{"base_model": "v1/<sha>", "adapters": {"manga_domain_v3": "v4/<sha>", ...}}``, the
value for ``image.build.shadow`` or ``image.build.canary`` (a new candidate) or ``image.build.primary`` (a
promotion) in cdk.json's stage overlay; ``--write primary|canary|shadow`` sets it there and prints the diff. Key layout:
serving_contract/model_artifacts.py. ``--region`` / ``--profile`` pick the session; a failed AWS call
(no credentials, no such pointer, access denied) is one line and exit 5, as ``ops preflight``.

Each pin must be a model package the release pipeline registered and that is Approved, in the
stage's model package groups (``--stage``, ``--project-name``; serving_contract/model_packages.py): otherwise it
prints one line per refused pin, naming it and its status, prints no block and exits 8. A pin that two packages
claim is refused too: the deploy looks up one recorded package per version, and which one the release registered is
for ``ops release``'s output to say, not for a search (issue 53, finding 9). The packages it found are printed as the
value of ``release.registered_packages`` (``--write`` records them in the stage overlay too). Only
``--no-approval-check`` (a stage without the ModelRelease stack) skips the check, and records no package.
"""

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from app_config.loader import set_in_stage_overlay
from app_config.release import model_package_group_name
from ops.exit_codes import ExitCode, OpsError, aws_error
from serving_contract.model_artifacts import parse_pointer, pointer_key
from serving_contract.model_packages import find_packages, registered_key, status_problem, unreleased_problem


def read_pointer(s3: Any, bucket: str, key: str) -> str:
    """The validated ``{version}/{sha256}`` text of one pointer object."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode().strip()
    try:
        parse_pointer(body)
    except ValueError as error:
        raise SystemExit(f"s3://{bucket}/{key}: {error}") from None
    return str(body)


def current_pins(
    s3: Any,
    *,
    bucket: str,
    base_model: str,
    adapters: list[str],
    base_models_prefix: str = "base-models",
    adapters_prefix: str = "adapters",
) -> dict[str, Any]:
    """``{"base_model": pin, "adapters": {name: pin}}`` from the CURRENT pointers."""
    return {
        "base_model": read_pointer(s3, bucket, pointer_key(base_models_prefix, base_model)),
        "adapters": {name: read_pointer(s3, bucket, pointer_key(adapters_prefix, name)) for name in adapters},
    }


def approved_packages(
    sagemaker: Any, pins: dict[str, Any], *, base_model: str, project_name: str, stage: str
) -> tuple[list[str], dict[str, str]]:
    """``(one line per pin of current_pins' block that is not one Approved model package, {"<artifact>/<version>":
    package ARN} of the others)``: the second is what ``release.registered_packages`` records."""
    checks = [("base_model", "base_model", base_model, pins["base_model"])]
    checks += [("adapter", f"adapters.{name}", name, pin) for name, pin in pins["adapters"].items()]
    lines, packages = [], {}
    for kind, key, artifact, pin in checks:
        group = model_package_group_name(project_name, stage, kind)
        found = find_packages(sagemaker, group, artifact, pin)
        if not found:
            lines.append(unreleased_problem(key, pin, group, artifact))
        elif len(found) > 1:
            arns = ", ".join(package.arn for package in found)
            lines.append(
                f"{key} = {pin!r}: {len(found)} model packages in {group} register it ({arns}): record the one "
                "`mangaassist-ops release` printed in release.registered_packages yourself"
            )
        elif (problem := status_problem(key, pin, found[0])) is not None:
            lines.append(problem)
        else:
            packages[registered_key(artifact, pin.split("/", 1)[0])] = found[0].arn
    return lines, packages


def main(argv: list[str] | None = None, session_factory: Callable[..., Any] = boto3.Session) -> int:
    """Run the command; return its exit code (ops/exit_codes.py): 0, 2 usage, 5 an AWS call failed,
    8 a pin is not an Approved model package. Every failure is one line on stderr."""
    parser = argparse.ArgumentParser(prog="python -m ops.pin_artifacts", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bucket",
        required=True,
        help="The model-artifacts bucket: the ModelArtifacts stack's output ModelArtifactsBucketName, or "
        "image.build.artifacts_bucket_name.",
    )
    parser.add_argument("--base-model", required=True, help="model.name, e.g. llama-3-8b-instruct-awq")
    parser.add_argument("--adapters", required=True, help="comma-separated adapter names (model.adapters)")
    parser.add_argument("--base-models-prefix", default="base-models")
    parser.add_argument("--adapters-prefix", default="adapters")
    parser.add_argument("--stage", help="Stage whose model package groups hold the releases (required unless skipped).")
    parser.add_argument("--project-name", default="MangaAssist", help="project_name (default MangaAssist).")
    parser.add_argument(
        "--no-approval-check", action="store_true", help="Print the pins without checking their model packages."
    )
    parser.add_argument(
        "--write",
        choices=("primary", "canary", "shadow"),
        help="Also set image.build.<variant> in cdk.json's stages.<stage> overlay (shadow: the candidate a shadow "
        "variant runs first, docs/operations.md), and print the diff.",
    )
    parser.add_argument(
        "--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to --write (default ./cdk.json)."
    )
    parser.add_argument("--region", help="AWS region (default: the SDK's).")
    parser.add_argument("--profile", help="AWS profile (default: the SDK's).")
    args = parser.parse_args(argv)
    if not args.no_approval_check and not args.stage:
        parser.error("--stage is required to check the pins' model packages (or pass --no-approval-check)")
    if args.write and not args.stage:
        parser.error("--write needs --stage: the pins go to cdk.json's stages.<stage> overlay")
    try:
        session = session_factory(region_name=args.region, profile_name=args.profile)
        pins = current_pins(
            session.client("s3"),
            bucket=args.bucket,
            base_model=args.base_model,
            adapters=[a for a in args.adapters.split(",") if a],
            base_models_prefix=args.base_models_prefix,
            adapters_prefix=args.adapters_prefix,
        )
        packages: dict[str, str] = {}
        if not args.no_approval_check:
            problems, packages = approved_packages(
                session.client("sagemaker"),
                pins,
                base_model=args.base_model,
                project_name=args.project_name,
                stage=args.stage,
            )
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return ExitCode.PREFLIGHT_ARTIFACTS
        json.dump(pins, sys.stdout, indent=2)
        print()
        if packages:
            print(f"release.registered_packages (the packages the deploy looks up): {json.dumps(packages)}")
        if args.write:
            _write(args, pins, packages)
    except (BotoCoreError, ClientError) as error:
        print(f"pin_artifacts: {aws_error(f's3://{args.bucket}', error)}", file=sys.stderr)
        return ExitCode.AWS_ERROR
    except OpsError as error:
        print(f"pin_artifacts: {error}", file=sys.stderr)
        return error.code
    return ExitCode.OK


def _write(args: argparse.Namespace, pins: dict[str, Any], packages: dict[str, str]) -> None:
    """Set ``image.build.<variant>`` and each package of ``release.registered_packages`` in the stage overlay; print
    the diff.

    Raises:
        OpsError: (USAGE) the file has no such stage.
    """
    try:
        diff = set_in_stage_overlay(args.cdk_json, args.stage, ("image", "build", args.write), pins)
        for key, arn in packages.items():
            diff += set_in_stage_overlay(args.cdk_json, args.stage, ("release", "registered_packages", key), arn)
    except ValueError as error:
        raise OpsError(str(error), ExitCode.USAGE) from None
    print("\n".join(diff) if diff else f"{args.cdk_json}: image.build.{args.write} already holds these pins")


if __name__ == "__main__":
    sys.exit(main())
