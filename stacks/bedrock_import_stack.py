"""Deployment unit (optional): Bedrock Custom Model Import, the managed alternative to the endpoint.

Added only when ``bedrock.enabled`` (seed 003 §11-12); see docs/bedrock.md.
"""

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from app_config.bedrock import BedrockConfig
from app_config.cloudformation_limits import PROVIDER_HEADROOM_S
from app_config.observability import ObservabilityConfig
from cdk_constructs.bedrock.bedrock_import import BedrockImportedModel, ModelImportHandlers, ModelImportStore
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from serving_contract import outputs


class BedrockImportStack(cdk.Stack):
    """Artifact bucket, model KMS key, import role, provider and one import per configured model.

    Attributes:
        store: bucket, key and import role.
        imported_models: configured model name -> its :class:`BedrockImportedModel`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bedrock: BedrockConfig,
        observability: ObservabilityConfig,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        prefixes = sorted({model.s3_prefix for model in bedrock.models})
        self.store = ModelImportStore(self, "ModelImportStore", bucket_name=bedrock.bucket_name, prefixes=prefixes)
        importer = ModelImportHandlers(
            self,
            "ModelImportProvider",  # the id its resources' logical ids were made from
            store=self.store,
            prefixes=prefixes,
            max_model_size_bytes=bedrock.max_model_size_gb * 10**9,
            total_timeout=cdk.Duration.minutes(bedrock.import_timeout_min),
            poll_interval=cdk.Duration.seconds(bedrock.poll_interval_s),
            handler_timeout=cdk.Duration.seconds(bedrock.handler_timeout_s),
            handler_memory_mib=bedrock.handler_memory_mib,
            log_retention=retention_days(observability.log_retention_days),
            log_removal_policy=log_removal_policy(observability.retain_logs_on_delete),
        )
        self.imported_models: dict[str, BedrockImportedModel] = {}
        for model in bedrock.models:
            imported = BedrockImportedModel(
                self,
                f"Import{outputs.pascal_case(model.name)}",
                service_token=importer.handlers.service_token,
                bucket=self.store.bucket,
                model_name=model.name,
                prefix=model.s3_prefix,
                revision=model.revision,
                retain_on_delete=bedrock.retain_imported_models,
                # The provider's total_timeout plus head room, so the provider times out first.
                service_timeout=cdk.Duration.seconds(bedrock.import_timeout_min * 60 + PROVIDER_HEADROOM_S),
            )
            self.imported_models[model.name] = imported
            cdk.CfnOutput(
                self,
                outputs.imported_model_output(model.name),
                value=imported.imported_model_arn,
                description=f"Bedrock imported model ARN of {model.name} (s3 prefix {model.s3_prefix})",
            )
            if model.adapter is not None:  # the client library's fallback for that adapter (docs/client.md)
                cdk.CfnOutput(
                    self,
                    outputs.imported_model_adapter_output(model.name),
                    value=model.adapter,
                    description=f"The adapter (or base model) {model.name} answers for",
                )
        cdk.CfnOutput(self, outputs.BEDROCK_ARTIFACT_BUCKET, value=self.store.bucket.bucket_name)
        cdk.CfnOutput(self, outputs.BEDROCK_IMPORT_ROLE_ARN, value=self.store.import_role.role_arn)
        cdk.CfnOutput(self, outputs.BEDROCK_MODEL_KEY_ARN, value=self.store.model_key.key_arn)
