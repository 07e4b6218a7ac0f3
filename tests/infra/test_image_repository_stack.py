"""Template assertions for the ECR repository."""

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
            "DeletionPolicy": "Retain",
        },
    )


def test_lifecycle_keeps_the_last_n_images(default_synth: Synth) -> None:
    import json

    repo = next(iter(default_synth.template("ImageRepository").find_resources("AWS::ECR::Repository").values()))
    policy = json.loads(repo["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])
    (rule,) = policy["rules"]
    assert rule["selection"]["countType"] == "imageCountMoreThan"
    assert rule["selection"]["countNumber"] == 10
    assert rule["action"] == {"type": "expire"}
