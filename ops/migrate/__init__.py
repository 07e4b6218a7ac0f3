"""``mangaassist-ops migrate score|sample|report|status``: the Bedrock-to-endpoint migration (seed 002 scenario 6,
issue 54; docs/migration.md).

* ``score``: the Bedrock scores of every stored pair not scored yet (guardrail verdicts, semantic similarity),
  stored beside the pairs (needs AWS);
* ``sample``: export a human-preference sample in random A/B order (human.py);
* ``report``: every metric per adapter and language and the verdict against ``migration.gates`` (report.py);
  offline on a folder, with no AWS credentials or region; ``--publish`` stores it as the ramp's gate;
* ``status``: the ramp's phase, its next step and that step's gates (status.py).

``--from`` names the store: a folder (a local copy, or a DirectoryPairStore's) or ``s3://<bucket>[/<prefix>]``
(the Migration stack's ``MigrationStoreBucketName``). Exit codes: docs/operations.md.
"""

import argparse
import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app_config.root import AppConfig
from cdk_constructs.release.runtime.judge import JudgeError
from cdk_constructs.release.runtime.titles import CatalogError, load_catalog
from cli_support.argtypes import int_in
from ops.command import Deps, Subparsers
from ops.exit_codes import ExitCode, OpsError
from ops.migrate.human import export_sample, read_preferences
from ops.migrate.report import build_report, print_report, report_json
from ops.migrate.scoring import Scorer, load_scores
from ops.migrate.store import Bucket, Folder, Source, load_pairs, parse_location, scores_key
from serving_contract import migration

MAX_SAMPLE = 5000


@dataclass(frozen=True)
class MigrateClients:
    """The boto3 clients the migrate commands use (tests pass stubbed ones)."""

    s3: Any
    bedrock: Any
    ssm: Any
    cloudwatch: Any
    stepfunctions: Any = None


def needs_aws(what: str) -> OpsError:
    """The one line a command prints when it needs AWS and has no region: what for, and how to do without."""
    return OpsError(
        f"--region: {what} needs AWS: a region (--region, AWS_REGION or the profile's) and credentials; "
        "the report runs offline on a local copy of the store (aws s3 sync s3://<bucket> DIR; --from DIR)",
        ExitCode.NO_AWS,
    )


def boto3_migrate_clients(region: str | None, profile: str | None, what: str) -> MigrateClients:
    """Real clients; raises :func:`needs_aws`'s error when no region is known (the SDK would raise a traceback
    at the first call). Bedrock's retries as the release's judge's (standard mode, 5 attempts)."""
    import boto3  # noqa: PLC0415 - the offline commands need no AWS SDK session
    from botocore.config import Config  # noqa: PLC0415
    from botocore.exceptions import ProfileNotFound  # noqa: PLC0415

    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except ProfileNotFound as error:
        raise OpsError(f"--profile: {error}", ExitCode.USAGE) from None
    if session.region_name is None:
        raise needs_aws(what)
    retries = Config(retries={"mode": "standard", "max_attempts": 5})
    return MigrateClients(
        s3=session.client("s3"),
        bedrock=session.client("bedrock-runtime", config=retries),
        ssm=session.client("ssm"),
        cloudwatch=session.client("cloudwatch"),
        stepfunctions=session.client("stepfunctions"),
    )


ClientsFactory = Callable[[str | None, str | None, str], MigrateClients]


def register(commands: Subparsers) -> None:
    """``migrate score|sample|report|status``: their flags and their handler."""
    migrate = commands.add_parser("migrate", help="The Bedrock-to-endpoint migration.", description=__doc__)
    actions = migrate.add_subparsers(dest="migrate_command", required=True, metavar="ACTION")
    score = actions.add_parser("score", help="Store the Bedrock scores (guardrail, similarity) of unscored pairs.")
    sample = actions.add_parser("sample", help="Export a human-preference sample in random A/B order.")
    report = actions.add_parser("report", help="Every metric per adapter and language, and the gates' verdict.")
    status = actions.add_parser("status", help="The ramp's phase, its next step and that step's gates.")
    for parser in (score, sample, report, status):
        parser.add_argument("--stage", default=None, help="Stage (default: cdk.json's `stage`).")
        parser.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read.")
        parser.add_argument("--region", help="AWS region (default: the SDK's).")
        parser.add_argument("--profile", help="AWS profile (default: the SDK's).")
    for parser in (score, sample, report):
        parser.add_argument("--from", dest="source", required=True, help="The store: a folder or s3://<bucket>.")
    score.add_argument("--catalog", type=Path, help="The release's title catalog JSONL (the invented-titles check).")
    sample.add_argument("--name", required=True, help="The sample's folder under human/ (e.g. week-2).")
    sample.add_argument("--size", type=int_in(1, MAX_SAMPLE), default=100, help="Pairs (default 100).")
    sample.add_argument("--seed", type=int, default=0, help="Seed of the random draw and the A/B order (default 0).")
    report.add_argument(
        "--publish", action="store_true", help="Store the verdict as reports/latest.json: the ramp's gate."
    )
    status.add_argument("--stack-outputs", type=Path, help="`cdk deploy --outputs-file` JSON (the Migration stack's).")
    status.add_argument("--parameter-name", help="The ramp's state parameter (default: from --stack-outputs).")
    migrate.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    return run_migrate(args, config, deps.migrate_clients or boto3_migrate_clients, now=deps.now, out=deps.out)


def _source(args: argparse.Namespace, clients: ClientsFactory, what: str) -> tuple[Source, MigrateClients | None]:
    location = parse_location(args.source)
    if isinstance(location, Path):
        return Folder(location), None
    made = clients(args.region, args.profile, what)
    return Bucket(made.s3, *location), made


def run_migrate(
    args: argparse.Namespace,
    config: AppConfig,
    clients: ClientsFactory,
    *,
    now: Callable[[], dt.datetime],
    out: Callable[[str], None],
) -> ExitCode:
    """One ``migrate`` action (module docstring); raises OpsError for usage (2), AWS (5, 10) and no data (12)."""
    from botocore.exceptions import NoCredentialsError  # noqa: PLC0415

    action = args.migrate_command
    try:
        if action == "status":
            from ops.migrate.status import run_status  # noqa: PLC0415

            return run_status(args, config, clients, now=now, out=out)
        if action == "score":
            return _score(args, config, clients, out)
        if action == "sample":
            source, _ = _source(args, clients, "`migrate sample --from s3://...`")
            count = export_sample(source, load_pairs(source).rows, name=args.name, size=args.size, seed=args.seed)
            folder = f"{source.name.rstrip('/')}/{migration.HUMAN_PREFIX}{args.name}/"
            out(f"sample {args.name}: {count} pairs in random A/B order: {folder}tasks.jsonl (raters), key.jsonl (not)")
            out(f'put the raters\' labels in {folder}labels.jsonl: one {{"id", "preference": a|b|tie}} a line')
            return ExitCode.OK
        return _report(args, config, clients, now=now, out=out)
    except NoCredentialsError:
        raise needs_aws(f"`migrate {action}`") from None


def _score(
    args: argparse.Namespace, config: AppConfig, clients: ClientsFactory, out: Callable[[str], None]
) -> ExitCode:
    source, made = _source(args, clients, "`migrate score`")
    made = made or clients(args.region, args.profile, "`migrate score` (Bedrock: embeddings, guardrail, judge)")
    catalog = None
    if args.catalog:
        try:
            catalog = load_catalog(args.catalog)
        except (CatalogError, OSError) as error:
            raise OpsError(f"--catalog: {error}", ExitCode.USAGE) from error
    settings = config.migration
    guardrail = (settings.guardrail_id, settings.guardrail_version) if settings.guardrail_id else None
    scorer = Scorer(made.bedrock, settings.embedding_model_id, config.release.judge_model_id, guardrail, catalog)
    pairs, scored = load_pairs(source), load_scores(source)
    pending: dict[str, list[Any]] = {}
    for row in pairs.rows:
        if row.request_id not in scored:
            pending.setdefault(row.key, []).append(row)
    written = 0
    for key, rows in sorted(pending.items()):
        try:
            records = [scorer.score(row) for row in rows]
        except JudgeError as error:
            raise OpsError(f"{source.name.rstrip('/')}/{key}: {error}", ExitCode.AWS_ERROR) from error
        existing = source.read(scores_key(key)).decode() if scores_key(key) in source.keys(scores_key(key)) else ""
        body = existing + "".join(_line(record) for record in records)
        source.write(scores_key(key), body.encode())
        written += len(records)
    if guardrail is None and catalog is None:
        out("guardrail: no check configured (migration.guardrail_id unset, no --catalog): verdicts stored as null")
    out(f"scored {written} pair(s) of {len(pairs.rows)} ({len(pairs.rows) - written} already scored) in {source.name}")
    return ExitCode.OK


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _report(
    args: argparse.Namespace,
    config: AppConfig,
    clients: ClientsFactory,
    *,
    now: Callable[[], dt.datetime],
    out: Callable[[str], None],
) -> ExitCode:
    source, _ = _source(args, clients, "`migrate report --from s3://...`")
    pairs = load_pairs(source)
    if not pairs.rows:
        raise OpsError(
            f"--from {source.name}: no pairs under {migration.PAIRS_PREFIX} ({pairs.skipped} skipped): nothing to "
            "judge; clients in migration mode write them (docs/migration.md)",
            ExitCode.NO_DATA,
        )
    report = build_report(pairs.rows, load_scores(source), read_preferences(source), config)
    first, last = min(r.at for r in pairs.rows), max(r.at for r in pairs.rows)
    copied = sum(1 for r in pairs.rows if r.answered_by == "bedrock")
    header = [
        f"migration report {source.name}: {len(pairs.rows)} pairs from {pairs.files} file(s), "
        f"{first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} UTC",
        f"pairs: Bedrock answered and the endpoint was copied {copied}, the endpoint answered and Bedrock was "
        f"copied {len(pairs.rows) - copied}; skipped (no endpoint side) {pairs.skipped}",
    ]
    print_report(report, header=header, out=out)
    if args.publish:
        source.write(migration.LATEST_REPORT_KEY, report_json(report, source=source.name, at=now()))
        out(f"published: {source.name.rstrip('/')}/{migration.LATEST_REPORT_KEY} (verdict {report.verdict})")
    return report.exit_code
