"""Custom::LogGroupKey's handler against botocore's Stubber (CloudWatch Logs' real model): it associates the
stack's key with a fixed-name log group, and leaves it on delete (issue 49, finding 8)."""

from types import ModuleType
from typing import Any

from botocore.stub import Stubber

HANDLER_MODULE = "cdk_constructs.common.runtime.index"
STUBBED_CLIENTS = ("LOGS",)
GROUP = "/aws/sagemaker/Endpoints/mangaassist-vllm-prod"
KEY = "arn:aws:kms:ap-northeast-1:123456789012:key/0b5d6a4e-0000-4000-8000-000000000000"


def _event(request_type: str, **props: Any) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "PhysicalResourceId": GROUP,
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:...", "LogGroupName": GROUP, "KmsKeyArn": KEY, **props},
    }


def test_create_and_update_associate_the_key(handler: ModuleType, stubs: tuple[Stubber]) -> None:
    (logs,) = stubs
    for request_type in ("Create", "Update"):
        logs.add_response("associate_kms_key", {}, {"logGroupName": GROUP, "kmsKeyId": KEY})
        assert handler.on_event(_event(request_type)) == {"PhysicalResourceId": GROUP}


def test_delete_leaves_a_retained_group_encrypted(handler: ModuleType, stubs: tuple[Stubber]) -> None:
    assert handler.on_event(_event("Delete")) == {"PhysicalResourceId": GROUP}  # no call: Stubber would fail it
