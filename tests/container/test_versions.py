"""Which versions answered: the Custom-Attributes response header and the EMF ModelVersion dimension (issue 36)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serving_app.versions import ModelVersions
from serving_contract.metrics import Dimension
from tests.container.conftest import Serve

BASE_PIN = "v1/" + "a" * 64
ADAPTER_PIN = "v4/" + "b" * 64
VERSIONS = {"base": BASE_PIN, "manga_domain_v3": ADAPTER_PIN}


@pytest.fixture(scope="module")
def versioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("versions"), env={"MODEL_VERSIONS": json.dumps(VERSIONS)})
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _chat(serve: Serve, model: str, stream: bool = False) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": stream}
    return httpx.post(serve.url + "/invocations", json=body, timeout=10)


def test_every_answer_names_the_base_and_adapter_versions(versioned: Serve) -> None:
    adapter = _chat(versioned, "manga_domain_v3")
    assert adapter.status_code == 200
    assert adapter.headers["x-amzn-sagemaker-custom-attributes"] == (
        f"base_model=base/{BASE_PIN};adapter=manga_domain_v3/{ADAPTER_PIN}"
    )
    base = _chat(versioned, "base", stream=True)
    assert base.status_code == 200 and base.headers["content-type"].startswith("text/event-stream")
    assert base.headers["x-amzn-sagemaker-custom-attributes"] == f"base_model=base/{BASE_PIN}"
    unpinned = _chat(versioned, "jp_style_v1")
    assert (
        unpinned.headers["x-amzn-sagemaker-custom-attributes"]
        == f"base_model=base/{BASE_PIN};adapter=jp_style_v1/unknown"
    )


def test_a_refused_request_names_no_version(versioned: Serve) -> None:
    response = _chat(versioned, "no_such_adapter")
    assert response.status_code == 400
    assert "x-amzn-sagemaker-custom-attributes" not in response.headers


def test_the_emf_line_carries_the_version_dimension(versioned: Serve) -> None:
    assert _chat(versioned, "manga_domain_v3").status_code == 200
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [line for line in versioned.emf_lines() if line.get(Dimension.MODEL_VERSION)]
        if any(line[Dimension.ADAPTER] == "manga_domain_v3" for line in lines):
            break
        time.sleep(0.05)
    line = next(line for line in lines if line[Dimension.ADAPTER] == "manga_domain_v3")
    assert line[Dimension.MODEL_VERSION] == "v1-aaaaaaaa+v4-bbbbbbbb"
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Dimensions"][-1] == ["EndpointName", "VariantName", "Adapter", "ModelVersion"]
    # The sets alarms and dashboards read are still there, unchanged.
    assert directive["Dimensions"][:2] == [["EndpointName", "VariantName"], ["EndpointName", "VariantName", "Adapter"]]


def test_a_bad_model_versions_variable_stops_the_container_with_one_line(tmp_path: Path) -> None:
    server = Serve(tmp_path, env={"MODEL_VERSIONS": "v1/abc"})
    try:
        assert server.proc.wait(timeout=15) != 0
        assert any(
            line.startswith("serve: configuration error: MODEL_VERSIONS='v1/abc' is not JSON (")
            for line in server.stderr_lines
        )
    finally:
        server.stop()


def test_without_pins_every_version_reads_unknown() -> None:
    versions = ModelVersions.from_env({}, "base")
    assert versions.attributes("a") == "base_model=base/unknown;adapter=a/unknown"
    assert versions.dimension("base") == "unknown"
