"""The CloudFormation rule that refuses a deploy while a pin still holds the placeholder."""

import aws_cdk as cdk
from constructs import Construct

from app_config import pins


def refuse_placeholder_pins(scope: Construct, problem: str | None) -> None:
    """Add to ``scope``'s stack a rule that fails with ``problem``; nothing when ``problem`` is None.

    CloudFormation evaluates a template's rules before it creates or updates anything and stops
    with the assertion's description (CloudFormation user guide, "Rules"): `cdk deploy` ends in one
    line naming the keys, nothing is created, and the synth itself, which has to work offline on the
    defaults, still succeeds. The assertion is constant on purpose: the decision was taken at synth
    (``app_config.pins``), the rule only carries it to the deploy.
    """
    if problem is None:
        return
    cdk.CfnRule(
        cdk.Stack.of(scope),
        pins.RULE_ID,
        assertions=[
            # Fn::Contains, not Fn::Equals of two constants, which cfn-lint reports (W8003).
            cdk.CfnRuleAssertion(
                assert_=cdk.Fn.condition_contains(["pinned"], "placeholder"), assert_description=problem
            )
        ],
    )
