"""``POST /adapters`` loads only the files pinned for the adapter (``ADAPTER_SHA256``, issue 22
item 5): the real gateway process against the scripted vLLM. On e706d98 every one of these
registrations reached the engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serving_contract.model_artifacts import artifact_sha256
from tests.container.conftest import Serve, write_safetensors
from tests.container.test_adapter_routes import lora_calls, message, register


def _adapter(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 16}))
    write_safetensors(folder / "adapter_model.safetensors")
    return folder


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    """A gateway with pins for ``good`` and ``tampered``, both taken from the same folder."""
    root = tmp_path_factory.mktemp("pinned")
    folder = _adapter(root / "good")
    digest = artifact_sha256(folder)
    env = {
        "LORA_RUNTIME_ADAPTERS": "true",
        "LORA_ADAPTERS": "",
        "LORA_MAX_LORAS": "2",
        "ADAPTER_SHA256": json.dumps({"good": digest, "tampered": digest}),
    }
    server = Serve(root / "serve", env=env)
    try:
        server.wait_ready()
        yield server, folder
    finally:
        server.stop()


def test_an_adapter_whose_files_match_its_pin_is_loaded(pinned: tuple[Serve, Path]) -> None:
    serve, folder = pinned
    response = register(serve, {"name": "good", "src": str(folder)})
    assert response.status_code == 200, response.text
    loads = [call for call in lora_calls(serve) if call["op"] == "load" and call["lora_name"] == "good"]
    assert [call["lora_path"] for call in loads] == [str(folder)]


def test_changed_files_and_unpinned_names_are_refused_before_the_engine(
    pinned: tuple[Serve, Path], tmp_path: Path
) -> None:
    serve, folder = pinned
    tampered = _adapter(tmp_path / "tampered")
    (tampered / "adapter_config.json").write_text(json.dumps({"r": 16, "lora_alpha": 64}))  # one changed value
    extra = _adapter(tmp_path / "extra")
    (extra / "notes.txt").write_text("a file the pin does not list")
    before = len(lora_calls(serve))
    cases = [
        ({"name": "tampered", "src": str(tampered)}, "adapter 'tampered': the files at src do not match"),
        ({"name": "tampered", "src": str(extra)}, "adapter 'tampered': the files at src do not match"),
        ({"name": "unpinned", "src": str(folder)}, "adapter 'unpinned' has no pinned sha256 (ADAPTER_SHA256)"),
    ]
    for body, expected in cases:
        response = register(serve, body)
        assert response.status_code == 400, response.text
        assert message(response).startswith(expected)
        assert artifact_sha256(folder) not in response.text  # digests go to the log only
    assert len(lora_calls(serve)) == before
    assert "unpinned" not in httpx.get(serve.url + "/ping", timeout=5).json()["adapters"]
