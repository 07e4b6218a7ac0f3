"""The capacity job's entrypoint (issue 46) as the job runs it, against vLLM's CPU build: a smoke sweep of
the tiny model whose ``capacity.json`` the config accepts as ``throughput.measured`` and the planner reads
back, labelled measured with its job.

As in the processing job: the serving image's interpreter (here .venv-vllm's), the code asset first on
``PYTHONPATH`` (a zip of ``runtime/`` and the modules it names, built as the construct bundles it), then the
image's own ``/opt/app`` (``serving_app`` and ``serving_contract`` only, so the zip must carry the rest).
The sweep drives the shared gateway's engine (``--engine-url``): no engine start of its own; the server's
start and stop are tests/unit/capacity_job/test_measure.py's, with a stand-in server.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from app_config import load_config
from cdk_constructs.capacity_job import runtime
from planning.planner import Planner
from serving_contract import capacity_job
from tests.engine.real_engine import ENGINE_ENV, REPO, SHIM, VLLM_PYTHON, RealGateway
from tests.synth_helpers import cdk_json_context

pytestmark = pytest.mark.real_engine

SMOKE_SWEEP = {
    "rates_per_minute": [30, 60],
    "step_s": 8,
    "think_s": 0.5,
    "slo_ms": {"cold": 500, "warm": 500},
    "warm_min_cached_fraction": 0.5,
    "drain_s": 60,
    # The tiny model's context is 256 tokens: a conversation of 4-5 turns fits in it.
    "shape": {"shared_prefix_tokens": 32, "conversation_tokens": 48, "turn_tokens": 8, "output_tokens": 8},
}
JOB = "capacity-mangaassist-vllm-prod-g6e-xlarge-20261127-120000"


def code_zip(dest: Path) -> Path:
    """The job's code asset: ``runtime/*.py`` and each of ``runtime.SHARED_MODULES`` at its package path."""
    with zipfile.ZipFile(dest, "w") as archive:
        for path in sorted(Path(runtime.__file__).parent.glob("*.py")):
            archive.writestr(f"runtime/{path.name}", path.read_bytes())
        for name in runtime.SHARED_MODULES:
            archive.write(REPO.joinpath(*name.split(".")).with_suffix(".py"), name.replace(".", "/") + ".py")
    return dest


def image_app_dir(root: Path) -> Path:
    """What the serving image holds at /opt/app: serving_app and serving_contract, nothing else of the repo."""
    root.mkdir()
    (root / "serving_app").symlink_to(REPO / "container" / "serving_app")
    (root / "serving_contract").symlink_to(REPO / "serving_contract")
    return root


def test_a_smoke_sweep_writes_a_curve_the_config_accepts_as_measured(
    shared_gateway: RealGateway, tmp_path: Path
) -> None:
    (tmp_path / "environment.json").write_text(json.dumps(dict(ENGINE_ENV)))
    (tmp_path / "sweep.json").write_text(json.dumps(SMOKE_SWEEP))
    path = [str(code_zip(tmp_path / "code.zip")), str(image_app_dir(tmp_path / "opt-app")), str(SHIM)]
    result = subprocess.run(
        [
            str(VLLM_PYTHON),
            "-m",
            capacity_job.ENTRY_MODULE,
            "--environment-file",
            str(tmp_path / "environment.json"),
            "--sweep-file",
            str(tmp_path / "sweep.json"),
            "--output-dir",
            str(tmp_path / "output"),
            "--instance-type",
            "ml.g6e.xlarge",
            "--job-name",
            JOB,
            "--engine-url",
            shared_gateway.engine_url,
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        cwd=tmp_path,  # not the repo: nothing imported from it but through PYTHONPATH
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    curve = json.loads((tmp_path / "output" / capacity_job.RESULT_FILE).read_text())
    assert [step["requests_per_minute"] for step in curve["steps"]] == [30, 60]
    assert all(step["cold"]["requests"] + step["warm"]["requests"] > 0 for step in curve["steps"])
    assert all(step["kv_cache_usage_mean"] is not None for step in curve["steps"])  # vLLM's gauge, read each second
    assert json.loads((tmp_path / "output" / "raw.json").read_text())["steps_run"] == 2
    # What `ops throughput measure --write prod` puts in the stage overlay, loaded as cdk.json's context is.
    # A curve holds at the pause it was measured at (the smoke's): the config must say the same.
    overrides = {"throughput.measured": json.dumps({"ml.g6e.xlarge": curve}), "traffic.think_s": str(curve["think_s"])}
    config = load_config({**cdk_json_context(), **overrides})
    throughput = Planner.of(config).throughput("ml.g6e.xlarge")
    assert throughput.label == "measured"
    assert throughput.source == f"measured {curve['date']} ({JOB})"
