"""L3 constructs of the serving app, one per capability.

Named ``cdk_constructs`` rather than ``constructs``: a top-level ``constructs`` package
would shadow the ``constructs`` library that aws-cdk-lib imports (CONVENTIONS.md).
"""
