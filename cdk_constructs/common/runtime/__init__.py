"""Handler of ``Custom::LogGroupKey`` (``cdk_constructs.common.fixed_name_log_group``), deployed as a Lambda asset."""
