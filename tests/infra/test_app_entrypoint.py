"""``app.py`` as the CDK CLI runs it: a bad value stops synth with one line and no output."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.synth_helpers import REPO, cdk_json_context


def _run_app(tmp_path: Path, overrides: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The CLI hands context and the output directory to the app through these variables.
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({**cdk_json_context(), **overrides}),
        "CDK_OUTDIR": str(tmp_path / "out"),
    }
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # liveness only: a whole synth on a loaded 2-core runner
        check=False,
    )


def test_bad_value_stops_synth_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    result = _run_app(tmp_path, {"serving.primary.max_capacity": "abc"})
    assert result.returncode == 2
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("config error")]
    assert error_lines == ["config error: serving.primary.max_capacity = 'abc': must be a whole number"]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_inference_components_mode_synthesizes_and_refuses_placeholder_adapter_pins_at_deploy(tmp_path: Path) -> None:
    # Issue 40 item 1: one rule for both modes. The adapters' pins reach the container, which serves
    # only matching files, so a placeholder must not deploy; but synth works offline on every default,
    # and the Serving stack carries the CloudFormation rule that refuses the deploy, naming the key.
    pins = {
        "manga_domain_v3": "v3/" + "5" * 64,
        "general_support_v2": "v2/" + "0" * 64,
        "jp_style_v1": "v1/" + "7" * 64,
    }
    result = _run_app(
        tmp_path,
        {"serving.mode": "inference_components", "serving.inference_components.adapter_artifacts": json.dumps(pins)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    serving = json.loads((tmp_path / "out" / "MangaAssist-prod-Serving.template.json").read_text())
    (assertion,) = serving["Rules"]["ArtifactPinsSet"]["Assertions"]
    assert assertion["AssertDescription"] == (
        "placeholder pin(s) serving.inference_components.adapter_artifacts.general_support_v2: set these keys in "
        "cdk.json before deploying (artifacts: upload them and pin them with `python -m ops.pin_artifacts`; base "
        "images: their registry digest) (docs/deploy.md)"
    )
