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
ALARM_TOPIC_ARN: Final = "AlarmTopicArn"
DASHBOARD_NAME: Final = "DashboardName"
