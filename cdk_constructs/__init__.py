"""L3 constructs of the serving app, grouped by capability, one sub-package each:

- ``endpoint``: the SageMaker endpoint in either serving mode, its models, execution role, container
  environment and deployment guardrails;
- ``scaling``: Application Auto Scaling of variants and inference components, scheduled capacity;
- ``observability``: the endpoint's metrics, alarms, alarm topic and dashboard;
- ``image``: the ECR repository, the in-account image build and its inputs;
- ``artifacts``: the model-artifacts bucket;
- ``bedrock``: Bedrock Custom Model Import;
- ``common``: what every capability uses: the custom-resource provider, fixed-name log groups, log
  retention and removal, cdk-nag and checkov acknowledgements.

A custom resource's Lambda handler lives in the top-level ``lambdas/`` folder, under its
capability's name (lambdas/README.md).

Named ``cdk_constructs`` rather than ``constructs``: a top-level ``constructs`` package
would shadow the ``constructs`` library that aws-cdk-lib imports (docs/sources.md, "Packaging and CDK").
"""
