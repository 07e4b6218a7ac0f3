"""The app's one custom-resource provider: handler Lambdas behind CDK's ``custom_resources.Provider``.

Every custom resource of the app (the serving image, the Bedrock imports, the scheduled capacity)
runs through :class:`CustomResourceHandlers`, so what a provider needs is decided here once: the
runtime, a role and a log group per function, the framework's roles and logs, the DependsOn fix
and the acknowledgements of the cdk-nag, checkov and Control Tower findings that do not apply to one.
:func:`acknowledge_provider_findings` and :func:`drop_role_depends_on` also finish CDK's
own LogRetention provider (``fixed_name_log_group``).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from cdk_constructs.common.handler_code import HANDLER_RUNTIME, handler_code
from cdk_constructs.common.kms_keys import stack_logs_key
from cdk_constructs.common.log_retention import reason_short_retention
from cdk_constructs.common.nag import acknowledge, arn_placeholder, checkov_skip, guard_suppress

LAMBDA_PRINCIPAL = "lambda.amazonaws.com"


@dataclass(frozen=True)
class Handler:
    """One handler function of a provider.

    Attributes:
        construct_id: the function's construct id; its log group is ``<id>Logs``, its role ``<id>Role``.
        entry: the function in the folder's ``index.py``, e.g. ``on_event``.
        description: the Lambda function's description, or None for none.
    """

    construct_id: str
    entry: str
    description: str | None = None


class CustomResourceHandlers(Construct):
    """Handler functions (onEvent, optionally isComplete) and CDK's provider framework in front of them.

    Each function gets its own role, allowed to write its own log group only (no
    AWSLambdaBasicExecutionRole, AwsSolutions-IAM4); the framework's functions get two more roles, as
    CDK advises, so the waiter and the onEvent function do not form a cycle, writing one framework log
    group. With an ``is_complete`` handler the provider is asynchronous: CDK's waiter state machine
    polls it every ``query_interval``, logs ALL its events to a log group of its own and is traced
    with X-Ray (AWS Control Tower's CT.STEPFUNCTIONS.PR.2; CDK's Provider has no option for it).
    Every log group is kept ``log_retention`` and encrypted with a customer-managed key (Control
    Tower's CT.CLOUDWATCH.PR.2 and PR.3).

    Callers usually add it under the id ``Default``, which CDK leaves out of logical ids: the
    functions, roles and log groups then keep the ids they had as the caller's own children, so
    moving them here replaced nothing on deploy.

    Attributes:
        on_event: the onEvent handler function.
        is_complete: the isComplete handler function, or None.
        on_event_role / is_complete_role: their roles; add the API permissions each handler needs.
        provider: CDK's ``custom_resources.Provider``.
        service_token: what each ``cdk.CustomResource`` of this provider takes.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler_dir: Path,
        shared_modules: Sequence[ModuleType] = (),
        on_event: Handler,
        is_complete: Handler | None = None,
        environment: Mapping[str, str] | None = None,
        timeout: cdk.Duration,
        memory_mib: int | None = None,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
        encryption_key: kms.IKey | None = None,
        query_interval: cdk.Duration | None = None,
        total_timeout: cdk.Duration | None = None,
    ) -> None:
        """
        Args:
            handler_dir: the handlers' folder (its ``index.py``): ``runtime/`` beside the capability's construct.
            shared_modules: repository modules the handlers import besides their folder, bundled with them
                (:func:`~cdk_constructs.common.handler_code.handler_code`).
            on_event / is_complete: the handler functions; without ``is_complete`` the provider is synchronous.
            environment: environment variables of both handlers.
            timeout: Lambda timeout of each handler (one call, not the whole operation).
            memory_mib: Lambda memory of each handler, MiB; None leaves Lambda's default (128).
            log_retention / log_removal_policy: of every log group made here
                (``observability.log_retention_days`` / ``retain_logs_on_delete``).
            encryption_key: a KMS key for the log groups and the functions' environments; None
                takes the stack's logs key (:func:`cdk_constructs.common.kms_keys.stack_logs_key`).
            query_interval / total_timeout: how often and how long the waiter polls ``is_complete``
                (CDK's defaults, 5 s and 30 min, when None; CDK allows at most 2 hours).
        """
        super().__init__(scope, construct_id)
        encryption_key = encryption_key or stack_logs_key(self, removal_policy=log_removal_policy)
        self._encryption_key = encryption_key
        self._log_retention = log_retention
        self._log_removal_policy = log_removal_policy
        code = handler_code(handler_dir, shared_modules=shared_modules)

        def function(handler: Handler) -> lambda_.Function:
            function_logs = self._log_group(f"{handler.construct_id}Logs")
            return lambda_.Function(
                self,
                handler.construct_id,
                runtime=HANDLER_RUNTIME,
                handler=f"index.{handler.entry}",
                code=code,
                description=handler.description,
                environment=dict(environment) if environment else None,
                environment_encryption=encryption_key,
                timeout=timeout,
                memory_size=memory_mib,
                log_group=function_logs,
                role=self._role(f"{handler.construct_id}Role", function_logs),
            )

        self.on_event = function(on_event)
        self.is_complete = function(is_complete) if is_complete is not None else None
        self.on_event_role = _role_of(self.on_event)
        self.is_complete_role = _role_of(self.is_complete) if self.is_complete is not None else None

        framework_logs = self._log_group("FrameworkLogs")
        framework_on_event_role = self._role("FrameworkOnEventRole", framework_logs)
        framework_waiter_role = self._role("FrameworkWaiterRole", framework_logs) if self.is_complete else None
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            is_complete_handler=self.is_complete,
            query_interval=query_interval,
            total_timeout=total_timeout,
            log_group=framework_logs,
            framework_on_event_role=framework_on_event_role,
            framework_complete_and_timeout_role=framework_waiter_role,
            disable_waiter_state_machine_logging=False if self.is_complete else None,
            waiter_state_machine_log_options=(
                cr.LogOptions(destination=self._log_group("WaiterLogs"), level=sfn.LogLevel.ALL)
                if self.is_complete
                else None
            ),
            provider_function_env_encryption=encryption_key,
        )
        self.service_token = self.provider.service_token
        self._trace_waiter()
        self._stable_framework_descriptions()
        framework_roles = [framework_on_event_role] + ([framework_waiter_role] if framework_waiter_role else [])
        self._acknowledge_framework(framework_roles)
        acknowledge_provider_findings(self)
        drop_role_depends_on(self)

    def _trace_waiter(self) -> None:
        """X-Ray tracing of CDK's waiter state machine, with the permissions Step Functions needs for it
        (Step Functions developer guide, "AWS X-Ray and Step Functions": the four actions below on "*")."""
        waiter = self.provider.node.try_find_child("waiter-state-machine")
        if waiter is None:
            return
        state_machine = waiter.node.default_child
        assert isinstance(state_machine, sfn.CfnStateMachine), f"{waiter.node.path}: CDK's waiter changed shape"
        state_machine.tracing_configuration = sfn.CfnStateMachine.TracingConfigurationProperty(enabled=True)
        role = waiter.node.find_child("Role")
        assert isinstance(role, iam.Role), f"{waiter.node.path}: CDK's waiter has no role of its own"
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "xray:GetSamplingRules",
                    "xray:GetSamplingTargets",
                ],
                resources=["*"],
            )
        )

    def _stable_framework_descriptions(self) -> None:
        """Leave the ``Default`` ids out of the construct path CDK writes into each framework function's
        description, as logical ids leave them out: moving a provider under ``Default`` changes nothing."""
        path = self.provider.node.path
        stable = "/".join(part for part in path.split("/") if part != "Default")
        for name in ("framework-onEvent", "framework-isComplete", "framework-onTimeout"):
            function = self.provider.node.try_find_child(name)
            if function is None:
                continue
            resource = function.node.default_child
            assert isinstance(resource, lambda_.CfnFunction) and resource.description is not None
            resource.description = resource.description.replace(f"({path})", f"({stable})")

    def _log_group(self, construct_id: str) -> logs.LogGroup:
        log_group = logs.LogGroup(
            self,
            construct_id,
            encryption_key=self._encryption_key,
            retention=self._log_retention,
            removal_policy=self._log_removal_policy,
        )
        reason_short_retention(log_group)
        return log_group

    def _role(self, construct_id: str, writes_to: logs.LogGroup) -> iam.Role:
        """A Lambda role allowed to write ``writes_to`` only."""
        role = iam.Role(self, construct_id, assumed_by=iam.ServicePrincipal(LAMBDA_PRINCIPAL))
        writes_to.grant_write(role)
        return role

    def _acknowledge_framework(self, framework_roles: list[iam.Role]) -> None:
        """The provider framework's own findings: CDK writes these policies, not this app."""
        handlers = [self.on_event] + ([self.is_complete] if self.is_complete else [])
        for role in framework_roles:
            for function in handlers:
                acknowledge(
                    role,
                    f"AwsSolutions-IAM5[Resource::{arn_placeholder(function)}:*]",
                    "CDK's provider framework invokes the handler by any version/alias (<function ARN>:*) of this "
                    "one function.",
                )
        for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
            acknowledge(
                self,
                f"AwsSolutions-IAM5[Action::{action}]",
                "KMS data-key actions on the one key of the functions' environments and log groups.",
            )
        waiter = self.provider.node.try_find_child("waiter-state-machine")
        if waiter is None:
            return
        for child in ("framework-isComplete", "framework-onTimeout"):
            acknowledge(
                waiter,
                f"AwsSolutions-IAM5[Resource::{arn_placeholder(self.provider.node.find_child(child))}:*]",
                "CDK's waiter state machine invokes its own framework function by any version (<function ARN>:*).",
            )
        acknowledge(waiter, "AwsSolutions-IAM5[Resource::*]", _WAITER_WILDCARDS)


def _role_of(function: lambda_.Function) -> iam.Role:
    role = function.role
    assert isinstance(role, iam.Role)  # CustomResourceHandlers._role made it
    return role


_OUTSIDE_A_VPC = (
    "Custom-resource handler: calls only AWS control-plane APIs over their public endpoints, during this stack's "
    "CloudFormation operations; the app has no VPC of its own for them (serving.vpc places the endpoint only), and "
    "a VPC would need NAT or interface endpoints while protecting nothing here."
)

# Why checkov's Lambda and log checks do not apply to a custom-resource provider's functions
# (its own handlers and CDK's framework functions alike); check id -> reason.
_PROVIDER_FUNCTION_FINDINGS = {
    "CKV_AWS_115": "Custom-resource handler: runs only during this stack's CloudFormation operations, a few "
    "invocations each; reserved concurrency would take capacity from the account's pool for nothing.",
    "CKV_AWS_116": "Custom-resource handler: a failure is reported to CloudFormation by the provider framework "
    "(stack event, rollback); a DLQ would hold a request nothing replays.",
    "CKV_AWS_117": _OUTSIDE_A_VPC,
}
_UNENCRYPTED_ENV = (
    "CKV_AWS_173",
    "The environment holds resource names and ARNs, no secrets; Lambda encrypts it at rest with its AWS-owned key.",
)
_UNENCRYPTED_LOGS = (
    "CKV_AWS_158",
    "Handler logs hold request ids, resource names and API errors, no customer data; CloudWatch Logs encrypts "
    "them at rest with service-managed keys.",
)
_WAITER_WILDCARDS = (
    "CDK's waiter state machine role: Step Functions log delivery (logs:CreateLogDelivery, PutResourcePolicy, ...) "
    "and X-Ray tracing (xray:PutTraceSegments, PutTelemetryRecords, GetSamplingRules, GetSamplingTargets) support "
    "no resource-level permissions (Step Functions developer guide, 'IAM policies for logging to CloudWatch Logs' "
    "and 'AWS X-Ray and Step Functions')."
)
_WAITER_LOG_DELIVERY = ("CKV_AWS_111", _WAITER_WILDCARDS)


def acknowledge_provider_findings(scope: IConstruct) -> None:
    """Acknowledge checkov's and AWS Control Tower's findings that do not apply to a custom-resource
    provider under ``scope``.

    Walks ``scope``'s resources once they exist (call it after the ``cr.Provider``): every Lambda
    function gets the checkov reasons above and Control Tower's CT.LAMBDA.PR.3 (outside a VPC); one
    without ``KmsKeyArn`` also CKV_AWS_173, a log group without ``KmsKeyId`` CKV_AWS_158, and the
    waiter state machine's role policy CKV_AWS_111. Each entry lands in that resource's own
    ``Metadata`` (:func:`cdk_constructs.common.nag.checkov_skip`, :func:`~cdk_constructs.common.nag.guard_suppress`).
    """
    for node in scope.node.find_all():
        # By type name: CDK's LogRetention provider writes its function as a plain CfnResource.
        if isinstance(node, cdk.CfnResource) and node.cfn_resource_type == lambda_.CfnFunction.CFN_RESOURCE_TYPE_NAME:
            for check, reason in _PROVIDER_FUNCTION_FINDINGS.items():
                checkov_skip(node, check, reason)
            guard_suppress(node, "CT.LAMBDA.PR.3", _OUTSIDE_A_VPC)
            if not isinstance(node, lambda_.CfnFunction) or node.kms_key_arn is None:
                checkov_skip(node, *_UNENCRYPTED_ENV)
        elif isinstance(node, logs.CfnLogGroup) and node.kms_key_id is None:
            checkov_skip(node, *_UNENCRYPTED_LOGS)
        elif isinstance(node, iam.CfnPolicy) and "/waiter-state-machine/" in node.node.path:
            checkov_skip(node, *_WAITER_LOG_DELIVERY)


_ROLE_USERS = {lambda_.CfnFunction.CFN_RESOURCE_TYPE_NAME, sfn.CfnStateMachine.CFN_RESOURCE_TYPE_NAME}


def drop_role_depends_on(scope: IConstruct) -> None:
    """Remove each Lambda function's and state machine's DependsOn on its own role.

    CDK adds DependsOn for both the role and its policy, but the role is already referenced
    by GetAtt, so cfn-lint reports the role entry (W3005). The policy entry stays: it is
    what makes the function wait for its permissions.
    """
    for node in scope.node.find_all():
        # By type name, not class: CDK's LogRetention provider writes its function as a plain CfnResource.
        if isinstance(node, cdk.CfnResource) and node.cfn_resource_type in _ROLE_USERS:
            node.add_override("DependsOn", _DependsOnWithoutRole(node))


@jsii.implements(cdk.IResolvable)
class _DependsOnWithoutRole:
    """Resolves to a resource's DependsOn less roles, after CDK has turned construct dependencies into them."""

    def __init__(self, resource: cdk.CfnResource) -> None:
        self._resource = resource

    @property
    def creation_stack(self) -> list[str]:
        return []

    def resolve(self, _context: cdk.IResolveContext) -> list[str]:
        stack = cdk.Stack.of(self._resource)
        dependencies = self._resource.obtain_dependencies()
        return sorted(
            stack.get_logical_id(dep)
            for dep in dependencies
            if isinstance(dep, cdk.CfnResource) and not isinstance(dep, iam.CfnRole)
        )

    def to_string(self) -> str:
        return "DependsOnWithoutRole"
