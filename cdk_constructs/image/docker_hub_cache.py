"""An ECR pull-through cache of Docker Hub, so the image build pulls its base image from the account's
own registry rather than anonymously from Docker Hub."""

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs.common.nag import acknowledge, resource_arn_placeholder

# References Docker Hub serves: no registry host, or docker.io / registry-1.docker.io.
_DOCKER_HUB_HOSTS = ("docker.io/", "registry-1.docker.io/", "index.docker.io/")


def is_docker_hub(ref: str) -> bool:
    """Whether ``ref`` (``[host/]name:tag@sha256:...``) is pulled from Docker Hub."""
    first = ref.split("/", 1)[0]
    has_host = "/" in ref and ("." in first or ":" in first or first == "localhost")
    return not has_host or ref.startswith(_DOCKER_HUB_HOSTS)


class DockerHubCache(Construct):
    """``AWS::ECR::PullThroughCacheRule`` for Docker Hub under one repository prefix.

    Why: CodeBuild's shared addresses pull from Docker Hub anonymously, and Docker Hub rate-limits
    anonymous pulls per address; the build then fails on ``toomanyrequests``. Through the cache,
    the first pull of a digest copies it into ``<prefix>/<namespace>/<name>`` in this account's
    registry with the credentials of the rule, and later pulls are ECR pulls (Amazon ECR user
    guide, "Sync an upstream registry with an Amazon ECR private registry"). Docker Hub as an
    upstream needs credentials: a Secrets Manager secret whose name starts with
    ``ecr-pullthroughcache/`` holding ``username`` and ``accessToken``
    (``image.build.docker_hub_credentials_secret_arn``). A digest names the same image in
    either registry, so the pin and the image tag are unchanged.

    Attributes:
        prefix: the repository prefix of cached images.
    """

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str, credential_arn: str) -> None:
        super().__init__(scope, construct_id)
        self.prefix = prefix
        ecr.CfnPullThroughCacheRule(
            self,
            "Rule",
            ecr_repository_prefix=prefix,
            upstream_registry="docker-hub",
            upstream_registry_url="registry-1.docker.io",
            credential_arn=credential_arn,
        )

    def cached(self, ref: str) -> str:
        """``ref`` through the cache when Docker Hub serves it, else unchanged.

        Docker Hub's official images live under ``library/`` (``python`` is ``library/python``).
        """
        if not is_docker_hub(ref):
            return ref
        path = next((ref.removeprefix(host) for host in _DOCKER_HUB_HOSTS if ref.startswith(host)), ref)
        if "/" not in path.split(":", 1)[0].split("@", 1)[0]:
            path = f"library/{path}"
        stack = cdk.Stack.of(self)
        return f"{stack.account}.dkr.ecr.{stack.region}.{stack.url_suffix}/{self.prefix}/{path}"

    def grant_pull_through(self, role: iam.IRole) -> None:
        """Pull cached images, and let the first pull of each create its repository and import it
        (``ecr:CreateRepository`` and ``ecr:BatchImportUpstreamImage``, scoped to the prefix)."""
        stack = cdk.Stack.of(self)
        repositories = stack.format_arn(service="ecr", resource="repository", resource_name=f"{self.prefix}/*")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:BatchImportUpstreamImage",
                    "ecr:CreateRepository",
                    "ecr:GetDownloadUrlForLayer",
                ],
                resources=[repositories],
            )
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{resource_arn_placeholder(self, 'ecr', f'repository/{self.prefix}/*')}]",
            "The pull-through cache creates one repository per cached Docker Hub image under this prefix on its "
            "first pull; their names are not known before then.",
        )
