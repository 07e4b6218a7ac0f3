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
