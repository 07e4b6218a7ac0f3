"""What the serving stack needs from the endpoint, whichever ``serving.mode`` built it.

One construct per mode implements :class:`ServingModeConstruct`:
:class:`~cdk_constructs.endpoint.variants_serving.VariantsServing` (a SageMaker model per production
variant, instance scaling, scheduled capacity, blue/green deployments) and
:class:`~cdk_constructs.endpoint.components_serving.ComponentsServing` (a base inference component
and one per adapter, copy scaling, rolling updates). Both take the same keyword arguments; the
serving stack makes the one ``serving.hosts_inference_components`` names and wires the rest (role
grants, guardrail alarms, outputs) through this interface. Monitoring reads the same differences
from :class:`planning.topology.ServingTopology`, which needs no construct.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from app_config.image_build import pin_version
from app_config.variants import VariantKey
from serving_contract.model_artifacts import ADAPTER_ARCHIVE  # the file an adapter component loads


@dataclass(frozen=True)
class VariantImages:
    """The image each variant runs, however it was produced (composition decides).

    Attributes:
        primary: image URI of the primary variant (and of the base component).
        canary: image URI of the canary variant (the primary's when it runs the same image).
        repositories: ECR repositories the execution role must pull from.
        shadow: image URI of the shadow variant (the primary's when it runs the same image).
    """

    primary: str
    canary: str
    repositories: Sequence[ecr.IRepository]
    shadow: str | None = None

    def uri(self, key: VariantKey | Literal["shadow"]) -> str:
        """The image URI of the variant ``key``."""
        if key == "shadow":
            return self.shadow or self.primary
        return self.primary if key == "primary" else self.canary


@dataclass(frozen=True)
class AdapterArtifacts:
    """Where the adapter components' artifacts live (inference_components mode).

    Attributes:
        bucket: the model-artifacts bucket.
        prefix: key prefix of adapters (``image.build.adapters_prefix``).
    """

    bucket: s3.IBucket
    prefix: str

    def key(self, adapter: str, pin: str) -> str:
        """``<prefix>/<adapter>/<version>/adapter.tar.gz`` of a pinned version."""
        return f"{self.prefix}/{adapter}/{pin_version(pin)}/{ADAPTER_ARCHIVE}"

    def url(self, adapter: str, pin: str) -> str:
        """``s3://<bucket>/<key>``: the adapter component's ArtifactUrl."""
        return f"s3://{self.bucket.bucket_name}/{self.key(adapter, pin)}"


class ServingModeConstruct(Protocol):
    """The endpoint of one serving mode with its scaling, as the serving stack wires it.

    The stack adds it under the construct id ``Default``, which CDK leaves out of logical ids: the
    endpoint, its models and its scaling keep the ids they had as the stack's own children (a
    SageMaker endpoint of a fixed name cannot be replaced under a new logical id).
    """

    @property
    def endpoint(self) -> sagemaker.CfnEndpoint:
        """The ``AWS::SageMaker::Endpoint``."""

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name (known at synth)."""

    @property
    def variant_names(self) -> Sequence[str]:
        """The production variants, primary first."""

    @property
    def log_groups(self) -> Sequence[logs.ILogGroup]:
        """Where the container's output lands; the execution role must write to each."""

    @property
    def rollout_target(self) -> cdk.CfnResource:
        """What a deployment updates and rolls back on the guardrail alarms (which must exist first):
        the endpoint (blue/green) or the base component (rolling update)."""

    @property
    def pinned_resources(self) -> Sequence[cdk.CfnResource]:
        """What deploys the pinned versions: the endpoint config (its models run images that bake the pins) or
        the base and adapter components. The deploy's approval check (cdk_constructs/approval/) runs before them."""

    @property
    def scalable_targets(self) -> Mapping[str, appscaling.ScalableTarget]:
        """Each scaled unit's target, by variant or component name (none when scaling is off)."""

    @property
    def outputs(self) -> Mapping[str, str]:
        """The stack outputs only this mode has (``serving_contract.outputs`` key to value)."""

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` call the endpoint, sync and streaming (and its inference components, in that mode)."""
