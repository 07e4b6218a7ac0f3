"""L3 constructs of the serving app, grouped by capability, one sub-package each:

- ``endpoint``: the SageMaker endpoint in either serving mode, its models, execution role, container
  environment and deployment guardrails;
- ``scaling``: Application Auto Scaling of variants and inference components, scheduled capacity;
- ``observability``: the endpoint's metrics, alarms, alarm topic and dashboard;
- ``image``: the ECR repository, the in-account image build and its inputs;
- ``artifacts``: the model-artifacts bucket;
- ``bedrock``: Bedrock Custom Model Import;
- ``compile_cache``: the torch.compile cache each model starts from, with its custom resource's
  handler in ``runtime/``;
- ``release``: the model release pipelines, with the scripts their steps run in ``runtime/``;
- ``common``: what every capability uses: the custom-resource provider, fixed-name log groups, log
  retention and removal, cdk-nag and checkov acknowledgements.

A capability's runtime code sits beside its construct, in ``<capability>/runtime/``
(aws-samples/aws-cdk-project-structure-python): every custom resource's Lambda handler (``runtime/index.py``,
tested in ``tests/lambdas/`` against botocore's Stubber) and the release steps' scripts.

Named ``cdk_constructs`` rather than ``constructs``: a top-level ``constructs`` package
would shadow the ``constructs`` library that aws-cdk-lib imports (docs/sources.md, "Packaging and CDK").
"""
