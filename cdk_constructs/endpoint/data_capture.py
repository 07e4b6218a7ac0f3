"""Data capture of the shadow phase: SageMaker writes a share of each variant's answers to the artifacts bucket,
encrypted with a key of their own (serving_contract/data_capture.py has the layout)."""

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from cdk_constructs.common.kms_keys import deny_grants_except_for_aws_services
from cdk_constructs.common.nag import acknowledge, bucket_arn_placeholder
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE
from serving_contract import data_capture


class DataCapture(Construct):
    """The endpoint config's ``DataCaptureConfig`` and what SageMaker needs to honour it.

    SageMaker captures with the endpoint's execution role (the role its models run with): it may put objects
    under ``data-capture/<endpoint>/`` of the artifacts bucket and nowhere else, and encrypt them with the
    capture key (``kms:GenerateDataKey`` / ``kms:Encrypt``: SSE-KMS with ``DataCaptureConfig.KmsKeyId``;
    botocore's SageMaker model, ``DataCaptureConfig.KmsKeyId``). It reads nothing back. The key rotates, is kept
    when the stack drops it (captured objects stay readable until the bucket's retention expires them) but not
    when the stack's first create fails (nothing was captured yet), and denies grants except to AWS services
    (Control Tower CT.KMS.PR.3). Readers (``ops shadow report``) need ``kms:Decrypt`` on it and
    ``s3:GetObject`` on the prefix (docs/operations.md).

    Attributes:
        key: the capture key.
        property: the endpoint config's ``DataCaptureConfig``: answers only (``CaptureMode`` Output: the
            comparison reads no prompt, so none is stored), ``capture_percent`` of requests, JSON as JSON.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        endpoint_name: str,
        execution_role: iam.IRole,
        capture_percent: int,
    ) -> None:
        """
        Args:
            bucket: the model-artifacts bucket (its lifecycle expires ``data-capture/``:
                ``serving.shadow.capture_retention_days``).
            endpoint_name: the endpoint whose variants are captured.
            execution_role: the endpoint's execution role, which SageMaker captures with.
            capture_percent: ``InitialSamplingPercentage``, 1-100 (``serving.shadow.capture_share``: the shadowed
                share unless set lower).
        """
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            description=f"Encrypts the requests and answers SageMaker captures from {endpoint_name}'s variants",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        deny_grants_except_for_aws_services(self.key)
        self.key.grant(execution_role, "kms:GenerateDataKey", "kms:Encrypt")
        prefix = data_capture.endpoint_prefix(endpoint_name)
        execution_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteDataCapture", actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{prefix}*")]
            )
        )
        acknowledge(
            execution_role,
            f"AwsSolutions-IAM5[Resource::{bucket_arn_placeholder(execution_role, bucket)}/{prefix}*]",
            "SageMaker names each capture file by variant and hour at run time (data-capture/<endpoint>/<variant>/"
            "yyyy/mm/dd/hh/*.jsonl): only this endpoint's prefix is known at synth, and the role may only put there.",
        )
        self.property = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=capture_percent,
            destination_s3_uri=f"s3://{bucket.bucket_name}/{data_capture.DATA_CAPTURE_PREFIX}",
            kms_key_id=self.key.key_arn,
            # Answers only: `ops shadow report` judges answers (length, invented titles); prompts are user data it
            # never reads (issue 53, finding 12).
            capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output")],
            capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                json_content_types=list(data_capture.JSON_CONTENT_TYPES)
            ),
        )
