"""The SNS topic that alarm notifications go to: KMS-encrypted, TLS-only, optional subscribers."""

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from cdk_constructs.common.kms_keys import deny_grants_except_for_aws_services
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE

_CLOUDWATCH = "cloudwatch.amazonaws.com"


class AlarmTopic(Construct):
    """An SNS topic encrypted with its own customer-managed KMS key.

    CloudWatch alarms publish to an encrypted topic only when the key policy lets the
    CloudWatch service principal use the key, and (because ``enforce_ssl`` gives the
    topic an explicit policy) when the topic policy lets it publish. Both statements are
    limited to this account and to alarms whose names start with ``alarm_name_prefix``.

    Attributes:
        topic: the SNS topic.
        key: the KMS key that encrypts it (rotation on).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alarm_name_prefix: str,
        emails: Sequence[str],
        https_endpoints: Sequence[str],
    ) -> None:
        """
        Args:
            alarm_name_prefix: prefix of every alarm allowed to publish (``<endpoint>-``).
            emails: email subscribers (each confirms by mail before receiving anything).
            https_endpoints: HTTPS subscribers (``https://`` URLs; they confirm by HTTP).
        """
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        alarm_arns = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{alarm_name_prefix}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        source_conditions = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": alarm_arns},
        }
        self.key = kms.Key(
            self,
            "Key",
            description=f"Encrypts the alarm notifications of {alarm_name_prefix}* alarms",
            enable_key_rotation=True,
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToUseTheKey",
                principals=[iam.ServicePrincipal(_CLOUDWATCH)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                # In a key policy "*" means this key.
                resources=["*"],
                conditions=source_conditions,
            )
        )
        deny_grants_except_for_aws_services(self.key)
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True)
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal(_CLOUDWATCH)],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=source_conditions,
            )
        )
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        for url in https_endpoints:
            self.topic.add_subscription(subscriptions.UrlSubscription(url, protocol=sns.SubscriptionProtocol.HTTPS))
