"""CloudWatch Logs retention and removal: config values to CDK's."""

import aws_cdk as cdk
from aws_cdk import aws_logs as logs

from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE

_RETENTION_BY_DAYS = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


CONTROL_TOWER_MIN_RETENTION_DAYS = 365
"""AWS Control Tower's CT.CLOUDWATCH.PR.2 refuses a log group kept fewer days (its rule file,
``ct-cloudwatch-pr-2.guard``: ``RetentionInDays`` absent or >= 365)."""


def retention_days(days: int) -> logs.RetentionDays:
    """The ``RetentionDays`` for ``days`` (config validates that the value is one CloudWatch offers)."""
    return _RETENTION_BY_DAYS[days]


def log_removal_policy(retain_on_delete: bool) -> cdk.RemovalPolicy:
    """What happens to a log group when its stack or resource goes (``observability.retain_logs_on_delete``).

    Retained means ``RetainExceptOnCreate`` (CDK's ``RETAIN_ON_UPDATE_OR_DELETE``): kept when the
    stack is deleted or the resource replaced, but deleted when the stack's first create fails and
    rolls back, so that a failed first deploy can be retried without cleaning up by hand
    (CloudFormation user guide, "DeletionPolicy attribute"; issue 20).
    """
    return RETAIN_EXCEPT_ON_CREATE if retain_on_delete else cdk.RemovalPolicy.DESTROY


def reason_short_retention(log_group: logs.LogGroup) -> None:
    """Reason Control Tower's CT.CLOUDWATCH.PR.2 on ``log_group`` when a stage keeps it fewer days.

    ``observability.log_retention_days`` defaults to :data:`CONTROL_TOWER_MIN_RETENTION_DAYS`; a
    stage that sets less (the dev overlay: 7) chose it, and the reason names the value.
    """
    resource = log_group.node.default_child
    assert isinstance(resource, logs.CfnLogGroup), f"{log_group.node.path} has no AWS::Logs::LogGroup"
    days = resource.retention_in_days
    if isinstance(days, int) and days < CONTROL_TOWER_MIN_RETENTION_DAYS:
        guard_suppress(
            log_group,
            "CT.CLOUDWATCH.PR.2",
            f"Kept {days} days: this stage sets observability.log_retention_days = {days} (the default, "
            f"{CONTROL_TOWER_MIN_RETENTION_DAYS}, passes); a stage deployed where the control is enforced keeps the "
            "default.",
        )
