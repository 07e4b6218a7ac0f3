"""Instance-type rules that decide which endpoint-config fields SageMaker accepts."""

import pytest

from app_config.base import has_local_nvme, instance_family


@pytest.mark.parametrize(
    ("instance_type", "nvme"),
    [
        ("ml.g5.xlarge", True),
        ("ml.g6.2xlarge", True),
        ("ml.g4dn.xlarge", True),
        ("ml.p4d.24xlarge", True),
        ("ml.p4de.24xlarge", True),
        ("ml.m5d.large", True),
        ("ml.m5.large", False),
        ("ml.c6i.xlarge", False),
        ("ml.inf2.xlarge", False),
    ],
)
def test_local_nvme_families(instance_type: str, nvme: bool) -> None:
    assert has_local_nvme(instance_type) is nvme


def test_instance_family() -> None:
    assert instance_family("ml.g5.12xlarge") == "g5"


def test_volume_size_is_accepted_on_ebs_families() -> None:
    from app_config import load_config
    from tests.synth_helpers import cdk_json_context

    config = load_config(
        {
            **cdk_json_context(),
            "serving.volume_size_gb": "64",
            "serving.primary.instance_type": "ml.m5.xlarge",
            "serving.canary.instance_type": "ml.m5.xlarge",
        }
    )
    assert config.serving.volume_size_gb == 64
