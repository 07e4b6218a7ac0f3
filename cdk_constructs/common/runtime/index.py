"""Custom resource ``Custom::LogGroupKey``: encrypt a log group whose name AWS fixes with a KMS key.

Why: ``/aws/sagemaker/Endpoints/<endpoint>`` (and an inference component's group) are made or
adopted by CDK's ``LogRetention`` custom resource (a retained group outlives its stack, and a
fixed name cannot be created twice), which has no KMS option, so the endpoint's logs, every line
the container writes (prompts in its error traces, EMF), were encrypted with CloudWatch Logs'
default key while every other log group of the app used the stack's key (issue 49, finding 8).

Resource properties: ``LogGroupName``, ``KmsKeyArn``. Create and Update associate the key
(``logs:AssociateKmsKey``; CloudWatch Logs then encrypts new events with it, and reads older ones
with the key that wrote them). Delete leaves the key in place: a retained group keeps its
encryption, and the key follows the same removal policy as the logs it encrypts
(``observability.retain_logs_on_delete``). ``PhysicalResourceId`` is the group's name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

LOGS = boto3.client("logs")


def on_event(event: Mapping[str, Any], _context: Any = None) -> dict[str, Any]:
    """Create/Update: associate ``KmsKeyArn`` with ``LogGroupName``. Delete: nothing."""
    props = event["ResourceProperties"]
    name = str(props["LogGroupName"])
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", name)}
    key = str(props["KmsKeyArn"])
    LOGS.associate_kms_key(logGroupName=name, kmsKeyId=key)
    LOG.info("log group %s encrypted with %s", name, key)
    return {"PhysicalResourceId": name}
