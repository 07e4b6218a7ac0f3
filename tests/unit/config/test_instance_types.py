"""Which hosting instance types a production variant may use, and the GPUs the plan sees."""

import pytest

from app_config import ConfigError, load_config
from app_config.base import instance_family
from planning.gpu_instances import INSTANCE_GPUS, instance_gpus
from tests.synth_helpers import cdk_json_context


@pytest.mark.parametrize(
    ("instance_type", "gpu", "count"),
    [
        ("ml.g5.xlarge", "A10G", 1),
        ("ml.g5.12xlarge", "A10G", 4),
        ("ml.g6.48xlarge", "L4", 8),
        ("ml.g6e.2xlarge", "L40S", 1),
        ("ml.p4d.24xlarge", "A100-SXM4-40GB", 8),
        ("ml.p5.48xlarge", "H100 80GB HBM3", 8),
    ],
)
def test_gpu_table(instance_type: str, gpu: str, count: int) -> None:
    found = instance_gpus(instance_type)
    assert (found.gpu.name, found.count) == (gpu, count)


def test_every_table_entry_is_a_valid_variant_instance_type() -> None:
    # Valid as a type: whether it holds the TTFT SLOs is planning/slo_holds.py's question (the
    # T4s and A10Gs do not at 500 ms, and slo.require_holdable would stop synth on them).
    for instance_type in INSTANCE_GPUS:
        config = load_config(
            {
                **cdk_json_context(),
                "serving.primary.instance_type": instance_type,
                "image.source": "build",
                "slo.require_holdable": "false",
            }
        )
        assert config.serving.primary.instance_type == instance_type


@pytest.mark.parametrize("instance_type", ["ml.m5.xlarge", "ml.inf2.xlarge", "ml.g5.3xlarge"])
def test_instance_types_without_a_gpu_entry_stop_synth(instance_type: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({**cdk_json_context(), "serving.canary.instance_type": instance_type})
    assert str(caught.value) == (
        f"config error: serving.canary.instance_type = '{instance_type}': no GPU table entry for {instance_type}; "
        "supported GPU families: g4dn, g5, g6, g6e, p4d, p4de, p5, p5e, p5en (planning/gpu_instances.py)"
    )


def test_instance_family() -> None:
    assert instance_family("ml.g5.12xlarge") == "g5"
