"""``POST /adapters`` loads only from the model-data root, safetensors only (issue 22 item 3).

On e706d98 ``src`` could point anywhere (symlinks out of the root included), the answer told
whether a path existed, a path component over 255 characters answered 500, bodies had no size
limit and a folder with a pickle ``adapter_model.bin`` was loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.container.conftest import Serve
from tests.container.test_adapter_routes import RUNTIME_ENV, adapter_folder, lora_calls, message, register


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-data").resolve()


@pytest.fixture(scope="module")
def rooted(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("rooted"), env={**RUNTIME_ENV, "ADAPTER_SRC_ROOT": str(root)})
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def refused(serve: Serve, src: str, status: int = 400) -> str:
    before = len(lora_calls(serve))
    response = register(serve, {"name": "manga", "src": src})
    assert response.status_code == status, response.text
    assert len(lora_calls(serve)) == before  # the engine never saw it
    return message(response)


def test_src_outside_the_root_is_refused_alike_whether_it_exists_or_not(
    rooted: Serve, root: Path, tmp_path: Path
) -> None:
    outside = adapter_folder(tmp_path / "outside", config={"r": 16})
    expected = f"adapter 'manga': src is invalid: must be a folder under {root} (ADAPTER_SRC_ROOT)"
    assert refused(rooted, str(outside)) == expected
    assert refused(rooted, str(tmp_path / "absent")) == expected
    assert refused(rooted, "/etc") == expected
    assert refused(rooted, f"{root}/../{outside.parent.name}/outside") == expected
    link = root / "escape"
    link.symlink_to(outside, target_is_directory=True)
    assert refused(rooted, str(link)) == expected


def test_relative_and_overlong_paths_get_400_not_500(rooted: Serve, root: Path) -> None:
    relative = refused(rooted, "adapters/manga")
    assert relative == f"adapter 'manga': src is invalid: must be an absolute path under {root}"
    assert refused(rooted, f"{root}/{'a' * 300}") == (
        "adapter 'manga': src is invalid: a path component is longer than 255 bytes"
    )
    assert "shorter than 4096 bytes" in refused(rooted, "/" + "/".join(["a" * 200] * 30))


def test_a_pickle_checkpoint_is_refused_even_beside_safetensors(rooted: Serve, root: Path) -> None:
    folder = adapter_folder(root / "pickled", config={"r": 16})
    (folder / "adapter_model.bin").write_bytes(b"\x80\x04not really a pickle")
    assert refused(rooted, str(folder)) == (
        f"adapter 'manga': src {folder}: adapter_model.bin is a pickle checkpoint (unpickled by torch.load); "
        "only adapter_model.safetensors is accepted: convert it and remove adapter_model.bin"
    )


def test_an_oversized_body_gets_413(rooted: Serve, root: Path) -> None:
    response = httpx.post(
        rooted.url + "/adapters", json={"name": "manga", "src": str(root), "pad": "x" * 70_000}, timeout=10
    )
    assert response.status_code == 413
    assert message(response).startswith("body is ") and message(response).endswith("bytes; limit 65536")


def test_a_folder_under_the_root_loads_by_its_resolved_path(rooted: Serve, root: Path) -> None:
    folder = adapter_folder(root / "real" / "manga", config={"r": 16})
    alias = root / "current"
    alias.symlink_to(folder.parent, target_is_directory=True)  # a link that stays inside the root
    response = register(rooted, {"name": "manga", "src": f"{alias}/manga"})
    assert response.status_code == 200, response.text
    loads = [call for call in lora_calls(rooted) if call["op"] == "load"]
    assert loads[-1]["lora_path"] == str(folder)
