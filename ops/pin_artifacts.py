"""Print the current CURRENT pointers as an ``image.build.<variant>`` config block.

Run by an operator with AWS credentials (never at synth):

    python -m ops.pin_artifacts --bucket mangaassist-model-artifacts \\
        --base-model llama-3-8b-instruct-awq --adapters manga_domain_v3,general_support_v2,jp_style_v1

prints ``{"base_model": "v1/<sha>", "adapters": {"manga_domain_v3": "v4/<sha>", ...}}``, the
value for ``image.build.canary`` (a new candidate) or ``image.build.primary`` (a promotion)
in cdk.json's stage overlay. Key layout: serving_contract/model_artifacts.py.

Each pin must be a model package the release pipeline registered and that is Approved, in the
stage's model package groups (``--stage``, ``--project-name``; ops/model_packages.py): otherwise it
prints one line per refused pin, naming it and its status, prints no block and exits 8. Only
``--no-approval-check`` (a stage without the ModelRelease stack) skips the check.
"""

import argparse
import json
import sys
from typing import Any

import boto3

from app_config.release import model_package_group_name
from ops.exit_codes import ExitCode
from ops.model_packages import pin_problem
from serving_contract.model_artifacts import parse_pointer, pointer_key


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


def unapproved(sagemaker: Any, pins: dict[str, Any], *, base_model: str, project_name: str, stage: str) -> list[str]:
    """One line per pin of ``current_pins``' block that is not an Approved model package."""
    checks = [("base_model", "base_model", base_model, pins["base_model"])]
    checks += [("adapter", f"adapters.{name}", name, pin) for name, pin in pins["adapters"].items()]
    lines = []
    for kind, key, artifact, pin in checks:
        group = model_package_group_name(project_name, stage, kind)
        problem = pin_problem(sagemaker, group=group, artifact=artifact, key=key, pin=pin)
        if problem is not None:
            lines.append(problem)
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ops.pin_artifacts", description=__doc__.splitlines()[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--base-model", required=True, help="model.name, e.g. llama-3-8b-instruct-awq")
    parser.add_argument("--adapters", required=True, help="comma-separated adapter names (model.adapters)")
    parser.add_argument("--base-models-prefix", default="base-models")
    parser.add_argument("--adapters-prefix", default="adapters")
    parser.add_argument("--stage", help="Stage whose model package groups hold the releases (required unless skipped).")
    parser.add_argument("--project-name", default="MangaAssist", help="project_name (default MangaAssist).")
    parser.add_argument(
        "--no-approval-check", action="store_true", help="Print the pins without checking their model packages."
    )
    args = parser.parse_args(argv)
    if not args.no_approval_check and not args.stage:
        parser.error("--stage is required to check the pins' model packages (or pass --no-approval-check)")
    pins = current_pins(
        boto3.client("s3"),
        bucket=args.bucket,
        base_model=args.base_model,
        adapters=[a for a in args.adapters.split(",") if a],
        base_models_prefix=args.base_models_prefix,
        adapters_prefix=args.adapters_prefix,
    )
    if not args.no_approval_check:
        problems = unapproved(
            boto3.client("sagemaker"),
            pins,
            base_model=args.base_model,
            project_name=args.project_name,
            stage=args.stage,
        )
        if problems:
            print("\n".join(problems), file=sys.stderr)
            raise SystemExit(ExitCode.PREFLIGHT_ARTIFACTS)
    json.dump(pins, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
