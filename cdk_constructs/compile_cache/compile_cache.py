"""The compile cache each SageMaker model starts from: a job per model that makes it, and what the
model needs to read it (issue 25; docs/performance.md, "The compile-cache pipeline").

:class:`CompileCacheMaker` is made once per serving stack: the custom-resource handlers
(``runtime/index.py`` beside this module), the processing job's role and their permissions. Each model then
asks it for a :class:`CompileCache`: a ``Custom::CompileCache`` resource that runs the serving
image on the model's instance type with the model's environment (``make-compile-cache``) and
returns the S3 prefix and key the model reads.
"""

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from app_config.cloudformation_limits import CUSTOM_RESOURCE_SERVICE_TIMEOUT_S
from app_config.compile_cache import JOB_PROVISIONING_S, POLL_INTERVAL_S, CompileCacheConfig
from cdk_constructs.common.custom_resource_handlers import CustomResourceHandlers, Handler
from cdk_constructs.common.fixed_name_log_group import grant_processing_job_logs, processing_job_logs
from cdk_constructs.common.nag import acknowledge, resource_arn_placeholder
from cdk_constructs.common.s3_grants import grant_objects
from cdk_constructs.common.trust import account_service_principal, grant_pass_role_to
from serving_contract import compile_cache as contract
from serving_contract.outputs import pascal_case

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
RESOURCE_TYPE = "Custom::CompileCache"
MANIFEST_OBJECTS = f"*/{contract.MANIFEST_NAME}"
"""The handlers' objects under ``compile-cache/``: each key's manifest, nothing the engine loads."""
RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The handlers' folder: the Lambda asset is it plus ``serving_contract/compile_cache.py``."""
PREFIX_HASH_CHARS = 8
_PER_KEY = "one folder per cache key, named at deploy time (serving_contract/compile_cache.py)."
"""Why the cache's objects are granted by pattern (the acknowledgement's reason)."""
"""Hex characters of SHA-256 that keep a shortened job-name prefix unique per model."""


def job_name_prefix(endpoint_name: str, variant_name: str) -> str:
    """``<endpoint>-<variant>``, or, when longer than :data:`serving_contract.compile_cache.JOB_NAME_PREFIX_MAX`
    (32), its first 23 characters, ``-`` and 8 hex characters of its SHA-256.

    Unique per model (an endpoint name is unique per account and region), so a resource stopping
    its own superseded jobs never stops another model's.
    """
    full = re.sub(r"-+", "-", f"{endpoint_name}-{variant_name}").strip("-")
    if len(full) <= contract.JOB_NAME_PREFIX_MAX:
        return full
    head = contract.JOB_NAME_PREFIX_MAX - 1 - PREFIX_HASH_CHARS
    return f"{full[:head].rstrip('-')}-{hashlib.sha256(full.encode()).hexdigest()[:PREFIX_HASH_CHARS]}"


@dataclass(frozen=True)
class CompileCache:
    """What a model needs to read its cache.

    Attributes:
        resource: the ``Custom::CompileCache`` resource (the model depends on it through these).
        model_data_source: the model's ``ModelDataSource``: the cache's S3 prefix, uncompressed,
            which SageMaker downloads to ``/opt/ml/model`` before the container starts.
        environment: ``COMPILE_CACHE_DIR`` and ``COMPILE_CACHE_KEY`` for the container.
    """

    resource: cdk.CustomResource
    model_data_source: sagemaker.CfnModel.ModelDataSourceProperty
    environment: dict[str, str]


class CompileCacheMaker(Construct):
    """The handlers and the job role every model's :class:`CompileCache` shares.

    Attributes:
        handlers: the custom-resource provider (onEvent starts the job, isComplete polls it).
        job_role: the processing job's role: pulls the image, reads its environment file, writes the
            cache, writes its logs. The only principal of the app that may write a cache file.
        wait_s: how long a deploy waits for a job, seconds (``max_runtime_s`` + provisioning); a job
            still running then leaves the models to start cold, never fails the deploy.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        repositories: list[ecr.IRepository],
        endpoint_name: str,
        config: CompileCacheConfig,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
        job_log_retention: logs.RetentionDays,
    ) -> None:
        """
        Args:
            bucket: the model-artifacts bucket; caches go under ``compile-cache/``, job inputs under
                ``compile-cache-jobs/``.
            job_log_retention: of /aws/sagemaker/ProcessingJobs, where the jobs log
                (``observability.processing_job_log_retention_days``).
            repositories: where the serving images are (the job pulls them).
            endpoint_name: the endpoint the models serve (names the jobs).
            config: ``serving.compile_cache``.
            log_retention / log_removal_policy: of the handlers' log groups.
        """
        super().__init__(scope, construct_id)
        self._bucket = bucket
        self._config = config
        self._endpoint_name = endpoint_name
        self.wait_s = config.max_runtime_s + JOB_PROVISIONING_S
        self.job_role = iam.Role(self, "JobRole", assumed_by=account_service_principal(SAGEMAKER_PRINCIPAL))
        for repository in repositories:
            repository.grant_pull(self.job_role)
        acknowledge(
            self.job_role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (grant_pull).",
        )
        # The job downloads its input folder and uploads the cache: nothing else in the bucket.
        grant_objects(bucket, self.job_role, read=contract.JOB_INPUT_ROOT, write=contract.S3_ROOT, why=_PER_KEY)
        processing_job_logs(self, "JobLogs", retention=job_log_retention)
        grant_processing_job_logs(self.job_role)
        self.handlers = CustomResourceHandlers(
            self,
            "Handlers",
            handler_dir=RUNTIME,
            # The handler imports the contract the container and this construct import; bundled beside it.
            shared_modules=[contract],
            on_event=Handler("OnEvent", "on_event", "Starts, adopts or stops the compile-cache job of one model"),
            is_complete=Handler("IsComplete", "is_complete", "Waits for the compile-cache job of one model"),
            # A few S3 and SageMaker calls per invocation.
            timeout=cdk.Duration.seconds(60),
            memory_mib=128,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
            query_interval=cdk.Duration.seconds(POLL_INTERVAL_S),
            # The handler stops waiting at the job's limit + provisioning (WaitSeconds) and lets the
            # deploy go on; two polls later the provider would give up itself. Inside CloudFormation's
            # ServiceTimeout by the bound of max_runtime_s (app_config.compile_cache.MAX_JOB_RUNTIME_S).
            total_timeout=cdk.Duration.seconds(self.wait_s + 2 * POLL_INTERVAL_S),
        )
        self._handler_roles = [self.handlers.on_event_role, self.handlers.is_complete_role]
        for role in self._handler_roles:
            assert role is not None
            # Manifests only (read, and written while no job made one) and the jobs' environment files: the
            # handlers never write a cache file, so only the job's role may (issue 49, finding 2).
            grant_objects(
                bucket, role, read=contract.S3_ROOT, write=contract.S3_ROOT, objects=MANIFEST_OBJECTS, why=_PER_KEY
            )
            grant_objects(bucket, role, write=contract.JOB_INPUT_ROOT, why=_PER_KEY)
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ListCompileCacheJobs", actions=["sagemaker:ListProcessingJobs"], resources=["*"]
                )
            )
            grant_pass_role_to(self.job_role, role, SAGEMAKER_PRINCIPAL)  # to the processing job only
            acknowledge(
                role,
                "AwsSolutions-IAM5[Resource::*]",
                "ListProcessingJobs supports no resource-level permissions (Service Authorization Reference, "
                "Amazon SageMaker); the handler lists its own jobs by name to adopt or stop them.",
            )

    def cache_for(
        self,
        scope: Construct,
        *,
        variant_name: str,
        image_uri: str,
        instance_type: str,
        environment: Mapping[str, str],
        execution_role: iam.IRole,
    ) -> CompileCache:
        """The cache of one model: its ``Custom::CompileCache`` resource under ``scope`` and what the
        model sets to read it. Grants ``execution_role`` read access to the caches."""
        resource = cdk.CustomResource(
            scope,
            f"{pascal_case(variant_name)}CompileCache",
            service_token=self.handlers.service_token,
            resource_type=RESOURCE_TYPE,
            # CloudFormation's own wait, stated (the default is the same 3600 s): the provider's is inside it.
            service_timeout=cdk.Duration.seconds(CUSTOM_RESOURCE_SERVICE_TIMEOUT_S),
            properties={
                "WaitSeconds": str(self.wait_s),
                "ImageUri": image_uri,
                "InstanceType": instance_type,
                "Environment": dict(environment),
                "Bucket": self._bucket.bucket_name,
                "RoleArn": self.job_role.role_arn,
                "JobNamePrefix": job_name_prefix(self._endpoint_name, variant_name),
                "VolumeSizeInGB": str(self._config.volume_size_gb),
                "MaxRuntimeInSeconds": str(self._config.max_runtime_s),
                # 0: no LoRA tuning step (serving.compile_cache.lora_tuning off).
                "LoraTuningBudgetS": str(self._config.job_lora_tuning_budget_s),
            },
        )
        # SageMaker downloads the model data with the model's execution role.
        grant_objects(self._bucket, execution_role, read=contract.S3_ROOT, why=_PER_KEY)
        prefix = job_name_prefix(self._endpoint_name, variant_name)
        # SageMaker writes names lower-case in ARNs; the handler names jobs <prefix>-<key>-<epoch s>.
        job_resource = f"processing-job/{prefix.lower()}-*"
        jobs = cdk.Stack.of(self).format_arn(
            service="sagemaker", resource="processing-job", resource_name=f"{prefix.lower()}-*"
        )
        for role in self._handler_roles:
            assert role is not None
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=[
                        "sagemaker:CreateProcessingJob",
                        "sagemaker:DescribeProcessingJob",
                        "sagemaker:StopProcessingJob",
                    ],
                    resources=[jobs],
                )
            )
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{resource_arn_placeholder(self, 'sagemaker', job_resource)}]",
                "This model's cache-making jobs: the handler names each <prefix>-<cache key>-<start time> at deploy "
                "time, so only the model's prefix is known at synth.",
            )
        return CompileCache(
            resource=resource,
            model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                    s3_uri=resource.get_att_string("CacheUri"), s3_data_type="S3Prefix", compression_type="None"
                )
            ),
            environment={
                contract.COMPILE_CACHE_DIR: contract.MODEL_DATA_DIR,
                contract.COMPILE_CACHE_KEY: resource.get_att_string("Key"),
                # The manifest the deploy found: the container loads nothing else (issue 49, finding 2).
                contract.COMPILE_CACHE_MANIFEST_SHA256: resource.get_att_string("ManifestSha256"),
            },
        )
