"""CloudFormation's limits on custom resources, declared once for the config bounds and the constructs.

Every custom resource of the app that waits for a job (the image builds, the Bedrock imports, the
compile caches) must end inside CloudFormation's own wait, or CloudFormation fails the stack
while the job runs on and the rollback's delete stops it (issue 49, finding 3).
"""

from typing import Final

CUSTOM_RESOURCE_SERVICE_TIMEOUT_S: Final = 3600
"""The longest CloudFormation waits for a custom resource's answer: ``ServiceTimeout`` of
``AWS::CloudFormation::CustomResource``, "an integer from 1 to 3600; the default value is 3600
seconds" (CloudFormation user guide, AWS::CloudFormation::CustomResource). CDK's provider framework
itself allows 2 hours (``custom_resources.Provider`` ``totalTimeout``), which CloudFormation never waits for."""

PROVIDER_HEADROOM_S: Final = 300
"""Time kept inside :data:`CUSTOM_RESOURCE_SERVICE_TIMEOUT_S` for what a provider does besides polling:
the onEvent call (a pre-flight of up to a minute), the waiter's start and its final answer. So the
provider's own timeout, a failure that names the resource, always comes before CloudFormation's."""

PROVIDER_MAX_WAIT_S: Final = CUSTOM_RESOURCE_SERVICE_TIMEOUT_S - PROVIDER_HEADROOM_S
"""The longest a provider's waiter may poll (``totalTimeout``): 3,300 s."""
