"""CloudFormation output keys of the serving stack that operations tooling reads.

The ops commands find the endpoint through these outputs, never through hard-coded names.
"""

from typing import Final

ENDPOINT_NAME: Final = "EndpointName"
PRIMARY_VARIANT_NAME: Final = "PrimaryVariantName"
CANARY_VARIANT_NAME: Final = "CanaryVariantName"
EXECUTION_ROLE_ARN: Final = "ExecutionRoleArn"
LOG_GROUP_NAME: Final = "LogGroupName"
IMAGE_REPOSITORY_URI: Final = "ImageRepositoryUri"
IMAGE_BUILD_PROJECT_NAME: Final = "ImageBuildProjectName"
MODEL_ARTIFACTS_BUCKET_NAME: Final = "ModelArtifactsBucketName"
PRIMARY_IMAGE_TAG: Final = "PrimaryImageTag"
CANARY_IMAGE_TAG: Final = "CanaryImageTag"
SHADOW_IMAGE_TAG: Final = "ShadowImageTag"
SHADOW_VARIANT_NAME: Final = "ShadowVariantName"
"""``serving.shadow.enabled``: the shadow variant's name."""
DATA_CAPTURE_PREFIX: Final = "DataCapturePrefix"
"""``serving.shadow.enabled``: ``data-capture/<endpoint>/`` in the model-artifacts bucket (the ModelArtifacts
stack's ``ModelArtifactsBucketName``), where SageMaker writes each variant's captured requests and answers
(``<variant>/yyyy/mm/dd/hh/*.jsonl``; ``ops shadow report`` reads them). The bucket is not in this output: an
output may not re-export another stack's export (cfn-lint W6001)."""
ALARM_TOPIC_ARN: Final = "AlarmTopicArn"
SERVING_MODE: Final = "ServingMode"
"""``variants`` or ``inference_components`` (``serving.mode``)."""
BASE_COMPONENT_NAME: Final = "BaseInferenceComponentName"
"""inference_components mode: the base model's component."""
ADAPTER_COMPONENT_PREFIX: Final = "AdapterInferenceComponent"
"""inference_components mode: one output per adapter, ``AdapterInferenceComponent<PascalCaseAdapter>``
whose value is the component name (see :func:`adapter_component_output`)."""
DASHBOARD_NAME: Final = "DashboardName"
METRICS_NAMESPACE: Final = "MetricsNamespace"
"""Observability stack: the namespace of the container's and the client library's metrics
(``observability.metrics_namespace``), which the client reads (client/mangaassist_client/config.py)."""

# Bedrock Custom Model Import stack (optional, bedrock.enabled).
BEDROCK_ARTIFACT_BUCKET: Final = "BedrockArtifactBucketName"
BEDROCK_IMPORT_ROLE_ARN: Final = "BedrockImportRoleArn"
BEDROCK_MODEL_KEY_ARN: Final = "BedrockModelKeyArn"
IMPORTED_MODEL_ARN_PREFIX: Final = "ImportedModelArn"
"""One output per imported model, ``ImportedModelArn<PascalCaseName>`` (see :func:`imported_model_output`)."""
IMPORTED_MODEL_ADAPTER_PREFIX: Final = "ImportedModelAdapter"
"""One output per imported model with ``bedrock.models[].adapter`` set, ``ImportedModelAdapter<PascalCaseName>``:
the adapter (or base model) it answers for, from which the client library builds its Bedrock fallback
(client/mangaassist_client/config.py; see :func:`imported_model_adapter_output`)."""


# ModelRelease stack: per release kind (base_model, adapter), its pipeline and model package group.
RELEASE_PIPELINE_PREFIX: Final = "ReleasePipeline"
MODEL_PACKAGE_GROUP_PREFIX: Final = "ModelPackageGroup"


def release_pipeline_output(kind: str) -> str:
    """Output key of one release kind's pipeline name, e.g. ``ReleasePipelineBaseModel``."""
    return RELEASE_PIPELINE_PREFIX + pascal_case(kind)


def model_package_group_output(kind: str) -> str:
    """Output key of one release kind's model package group name, e.g. ``ModelPackageGroupAdapter``."""
    return MODEL_PACKAGE_GROUP_PREFIX + pascal_case(kind)


def adapter_component_output(adapter: str) -> str:
    """Output key of an adapter's component (``manga_domain_v3`` -> ``AdapterInferenceComponentMangaDomainV3``)."""
    return ADAPTER_COMPONENT_PREFIX + pascal_case(adapter)


def imported_model_output(model_name: str) -> str:
    """Output key of the imported model configured as ``model_name`` (``a-b_c1`` -> ``ImportedModelArnABC1``)."""
    return IMPORTED_MODEL_ARN_PREFIX + pascal_case(model_name)


def imported_model_adapter_output(model_name: str) -> str:
    """Output key naming the adapter the imported model ``model_name`` answers for
    (``a-b_c1`` -> ``ImportedModelAdapterABC1``)."""
    return IMPORTED_MODEL_ADAPTER_PREFIX + pascal_case(model_name)


def pascal_case(name: str) -> str:
    """``mangaassist-llama3_domain-v1`` -> ``MangaassistLlama3DomainV1`` (stable construct ids, output keys)."""
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-") if part)


# Migration stack (optional, migration.enabled; docs/migration.md): the comparison store and the ramp.
MIGRATION_STORE_BUCKET_NAME: Final = "MigrationStoreBucketName"
"""The comparison store: the client's pairs, their scores, the human samples and the gate reports."""
MIGRATION_STORE_KEY_ARN: Final = "MigrationStoreKeyArn"
"""The store's KMS key: every put must name it (the bucket policy refuses any other)."""
MIGRATION_STATE_PARAMETER_NAME: Final = "MigrationStateParameterName"
"""The SSM parameter holding the ramp's state (serving_contract.migration.RAMP_STATE_FIELDS); clients read it."""
MIGRATION_RAMP_STATE_MACHINE_ARN: Final = "MigrationRampStateMachineArn"
"""The ramp's Step Functions state machine (start an execution to walk the steps)."""
MIGRATION_PAIR_WRITER_POLICY_ARN: Final = "MigrationPairWriterPolicyArn"
"""Managed policy for the callers' roles: write pairs, read the ramp's state."""
MIGRATION_REPORTER_POLICY_ARN: Final = "MigrationReporterPolicyArn"
"""Managed policy for whoever runs ``ops migrate score|report --publish|status``."""
