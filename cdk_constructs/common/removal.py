"""Removal policies shared by every construct that keeps data after its stack is gone."""

import aws_cdk as cdk

RETAIN_EXCEPT_ON_CREATE = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
"""CloudFormation's ``RetainExceptOnCreate``: retained on stack delete and on replacement, deleted
when the stack's first create rolls back (CloudFormation user guide, "DeletionPolicy attribute").

Plain ``Retain`` kept a failed first create's buckets, keys and fixed-name log groups, and the
retry failed on them ("already exists"; issue 20)."""
