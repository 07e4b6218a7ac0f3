"""S3 read and write access narrower than ``bucket.grant_*``: objects under one folder, or one asset object.

``bucket.grant_read`` / ``grant_put`` give ``s3:GetObject*``, ``s3:List*`` and ``s3:Abort*`` on the bucket,
and ``Asset.grant_read`` the same on the CDK bootstrap's assets bucket, which holds the deploy assets of every
CDK app in the account and region (issue 49, finding 6). These grant the actions a SageMaker job, a handler
or an operator uses, on the objects it uses.
"""

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from cdk_constructs.common.nag import acknowledge, bucket_arn_placeholder


def object_statements(
    bucket: s3.IBucket, *, read: str = "", write: str = "", objects: str = "*"
) -> list[iam.PolicyStatement]:
    """``s3:GetObject`` on ``<read>/<objects>`` with ``s3:ListBucket`` limited to ``<read>/*`` by ``s3:prefix``,
    and ``s3:PutObject`` on ``<write>/<objects>`` (``objects`` defaults to ``*``, everything under the folder).

    Listing is what SageMaker's download of an ``S3Prefix`` input and a caller's existence check need (S3
    answers a missing key with 404 only to a caller allowed ``s3:ListBucket``, else 403; S3 API reference,
    GetObject).
    """
    statements = []
    if read:
        statements += [
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{read}/{objects}")]),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{read}/*"]}},
            ),
        ]
    if write:
        statements.append(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{write}/{objects}")])
        )
    return statements


def grant_objects(
    bucket: s3.IBucket,
    grantee: iam.IRole | iam.ManagedPolicy,
    *,
    read: str = "",
    write: str = "",
    objects: str = "*",
    why: str,
) -> None:
    """:func:`object_statements` in ``grantee``'s policy (a role's default policy, or a managed policy), and
    their ``AwsSolutions-IAM5`` finding (the object wildcard) acknowledged on it.

    Args:
        why: why the objects are only known by pattern at synth (the acknowledgement's reason, after
            ``Objects <objects> under <folder>/ only:``).
    """
    for statement in object_statements(bucket, read=read, write=write, objects=objects):
        if isinstance(grantee, iam.ManagedPolicy):
            grantee.add_statements(statement)
        else:
            grantee.add_to_principal_policy(statement)
    arn = bucket_arn_placeholder(grantee, bucket)
    for folder in dict.fromkeys(f for f in (read, write) if f):
        acknowledge(
            grantee,
            f"AwsSolutions-IAM5[Resource::{arn}/{folder}/{objects}]",
            f"Objects {objects} under {folder}/ only: {why}",
        )


def grant_asset_read(asset: s3_assets.Asset, grantee: iam.IRole) -> None:
    """The asset's object, and nothing else, from the CDK bootstrap's file-assets bucket.

    A SageMaker processing input names the zip as an S3 prefix, so SageMaker lists that prefix before it
    downloads: ``s3:ListBucket`` with ``s3:prefix`` equal to the zip's key, ``s3:GetObject`` on the zip.
    """
    grantee.add_to_principal_policy(
        iam.PolicyStatement(
            sid="ReadRuntimeCode",
            actions=["s3:GetObject"],
            resources=[asset.bucket.arn_for_objects(asset.s3_object_key)],
        )
    )
    grantee.add_to_principal_policy(
        iam.PolicyStatement(
            sid="ListRuntimeCode",
            actions=["s3:ListBucket"],
            resources=[asset.bucket.bucket_arn],
            conditions={"StringEquals": {"s3:prefix": [asset.s3_object_key]}},
        )
    )
