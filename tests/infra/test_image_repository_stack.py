"""Template assertions for the ECR repository."""

import json

from aws_cdk.assertions import Match

from tests.synth_helpers import Synth


def test_repository_is_immutable_scanned_encrypted(default_synth: Synth) -> None:
    default_synth.template("ImageRepository").has_resource(
        "AWS::ECR::Repository",
        {
            "Properties": Match.object_like(
                {
                    "ImageTagMutability": "IMMUTABLE",
                    "ImageScanningConfiguration": {"ScanOnPush": True},
                    "EncryptionConfiguration": {"EncryptionType": "KMS"},
                }
            ),
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )


def test_lifecycle_expires_only_untagged_images(default_synth: Synth) -> None:
    """Tagged images may be what a variant runs or a rollback returns to: no rule may select them
    (issue 20). Untagged ones go after image.untagged_image_expiry_days."""
    repo = next(iter(default_synth.template("ImageRepository").find_resources("AWS::ECR::Repository").values()))
    policy = json.loads(repo["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])
    assert [rule["selection"]["tagStatus"] for rule in policy["rules"]] == ["untagged"]
    (rule,) = policy["rules"]
    assert rule["selection"]["countType"] == "sinceImagePushed"
    assert (rule["selection"]["countNumber"], rule["selection"]["countUnit"]) == (7, "days")
    assert rule["action"] == {"type": "expire"}
