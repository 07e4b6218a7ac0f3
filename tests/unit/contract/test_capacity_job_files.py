"""The capacity job's files are one typed contract each (issue 55): ``ops throughput measure`` writes the sweep the job
reads, and reads the curve the job writes, through the dataclasses in serving_contract/capacity_job.py."""

import datetime as dt
import json

import pytest

from app_config.loader import load_cli_config
from app_config.throughput_config import MeasuredCurve
from ops.measure.job import sweep_file
from serving_contract.capacity_job import (
    RESULT_FORMAT,
    CapacityResult,
    ClassResult,
    StepResult,
    SweepFile,
)


def test_the_sweep_ops_writes_is_the_sweep_the_job_reads() -> None:
    written = sweep_file(load_cli_config([]))
    read = SweepFile.from_json(json.loads(json.dumps(written.to_json())))
    assert read == written
    assert read.slo_ms == {"cold": 500.0, "warm": 500.0}
    assert read.shape.shared_prefix_tokens == 600  # traffic.request_shape.system_prefix_tokens


def test_the_curve_the_job_writes_is_what_capacity_measured_validates() -> None:
    written = CapacityResult(
        instance_type="ml.g6e.xlarge",
        date=dt.date(2026, 11, 27),
        job="capacity-x",
        gpu="NVIDIA L40S",
        think_s=30,
        engines=1,
        steps=(StepResult(120, 120, 118, 900, 0, ClassResult(300, 210, 320), ClassResult(600, 90, 140), 4.1, 0.12),),
        cliff_per_minute=None,
    )
    text = json.dumps(written.to_json())
    assert CapacityResult.from_json(json.loads(text)) == written
    curve = MeasuredCurve.model_validate(json.loads(text))
    assert (curve.format, curve.steps[0].warm.ttft_p95_ms, curve.steps[0].kv_cache_usage_mean) == (
        RESULT_FORMAT,
        140,
        0.12,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"format": "other/1"}, "capacity result: format = 'other/1': this version reads 'mangaassist-capacity/1'"),
        ({"format": RESULT_FORMAT, "instance_type": "ml.g6e.xlarge"}, "capacity result: date: missing"),
        ([], "capacity result: must be a JSON object"),
    ],
)
def test_a_result_of_another_shape_is_refused_in_one_line(data: object, message: str) -> None:
    with pytest.raises(ValueError) as error:
        CapacityResult.from_json(data)
    assert str(error.value) == message
