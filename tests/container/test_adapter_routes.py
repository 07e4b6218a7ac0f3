"""``POST /adapters`` and ``DELETE /adapters/{name}`` of the real gateway process against the
scripted vLLM: the refusals decided before the engine is called, and the engine faults the real
engine cannot show on demand (its 4xx, a slow load, a failing warmup). The flows with the real
engine are in ``tests/engine/test_runtime_adapters.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.container.conftest import Serve, write_safetensors

RUNTIME_ENV = {"LORA_RUNTIME_ADAPTERS": "true", "LORA_ADAPTERS": "", "LORA_MAX_LORAS": "2"}
"""No LORA_MAX_CPU_LORAS: the capacity is LORA_MAX_LORAS."""


@pytest.fixture(scope="module")
def runtime_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("runtime"), env=RUNTIME_ENV)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def adapter_folder(
    root: Path, *, config: dict[str, Any] | None = None, weights: bool = True, script: dict[str, Any] | None = None
) -> Path:
    """An adapter folder; ``script`` becomes the fake engine's ``fake_vllm.json``."""
    root.mkdir(parents=True)
    if config is not None:
        (root / "adapter_config.json").write_text(json.dumps(config))
    if weights:
        write_safetensors(root / "adapter_model.safetensors")
    if script is not None:
        (root / "fake_vllm.json").write_text(json.dumps(script))
    return root


def register(serve: Serve, body: dict[str, str]) -> httpx.Response:
    return httpx.post(serve.url + "/adapters", json=body, timeout=10)


def message(response: httpx.Response) -> str:
    return str(response.json()["error"]["message"])


def lora_calls(serve: Serve) -> list[dict[str, Any]]:
    return list(serve.engine_state()["lora_calls"])


def registered(serve: Serve) -> list[str]:
    return list(httpx.get(serve.url + "/ping", timeout=5).json()["adapters"])


def test_registrations_the_gateway_can_judge_alone_never_reach_the_engine(runtime_serve: Serve, tmp_path: Path) -> None:
    valid = str(adapter_folder(tmp_path / "valid", config={"r": 16}))
    no_config = adapter_folder(tmp_path / "no-config")
    no_weights = adapter_folder(tmp_path / "no-weights", config={"r": 16}, weights=False)
    cases = [
        (
            {"name": "manga domain", "src": valid},
            "name = 'manga domain': must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ (letters, digits, . _ -; at most 64)",
        ),
        (
            {"name": "base", "src": valid},
            "name = 'base': it is the base model's name (ENGINE_SERVED_MODEL_NAME); pick another",
        ),
        (
            {"name": "manga", "src": str(tmp_path / "absent")},
            f"adapter 'manga': src='{tmp_path / 'absent'}' is invalid: must be a local folder holding "
            "adapter_config.json and adapter_model.safetensors",
        ),
        (
            {"name": "manga", "src": str(no_config)},
            f"adapter 'manga': src {no_config}: required file adapter_config.json is missing",
        ),
        (
            {"name": "manga", "src": str(no_weights)},
            f"adapter 'manga': src {no_weights}: adapter weights are missing (expected adapter_model.safetensors)",
        ),
    ]
    calls_before = lora_calls(runtime_serve)
    for body, expected in cases:
        response = register(runtime_serve, body)
        assert (response.status_code, message(response)) == (400, expected)
    # Query parameters go through the same checks.
    response = httpx.post(runtime_serve.url + "/adapters", params={"name": "manga"}, timeout=10)
    assert (response.status_code, message(response)) == (
        400,
        "src is missing: POST /adapters needs 'name' and 'src' in a JSON body or as query parameters",
    )
    assert lora_calls(runtime_serve) == calls_before


def test_an_engine_4xx_is_a_400_with_the_engine_message(runtime_serve: Serve, tmp_path: Path) -> None:
    folder = adapter_folder(
        tmp_path / "refused",
        config={"r": 16},
        script={"load_status": 404, "load_message": "Loading lora refused failed: No adapter found for /x"},
    )
    response = register(runtime_serve, {"name": "refused", "src": str(folder)})
    assert (response.status_code, message(response)) == (
        400,
        "engine refused adapter 'refused' (404): Loading lora refused failed: No adapter found for /x",
    )
    assert "refused" not in registered(runtime_serve)


def test_an_adapter_whose_warmup_fails_is_unloaded_and_never_registered(runtime_serve: Serve, tmp_path: Path) -> None:
    folder = adapter_folder(tmp_path / "broken", config={"r": 16}, script={"chat_status": 500})
    calls_before = len(lora_calls(runtime_serve))
    response = register(runtime_serve, {"name": "broken", "src": str(folder)})
    assert (response.status_code, message(response)) == (
        502,
        "adapter 'broken' loaded but its warmup request answered 500: scripted failure of adapter broken",
    )
    assert [(call["op"], call["lora_name"]) for call in lora_calls(runtime_serve)[calls_before:]] == [
        ("unload", "broken"),  # forget a stale name first (404 here)
        ("load", "broken"),
        ("unload", "broken"),
    ]
    assert "broken" not in registered(runtime_serve)


def test_a_load_slower_than_the_request_timeout_is_a_504_and_unloaded(tmp_path: Path) -> None:
    # Its own gateway with a 1 s budget; the fake's 3 s load starts after the gateway's timer, so a
    # slower runner can only make the load answer later.
    serve = Serve(tmp_path / "serve", env={**RUNTIME_ENV, "REQUEST_TIMEOUT_S": "1"})
    try:
        serve.wait_ready()
        folder = adapter_folder(tmp_path / "slow", config={"r": 16}, script={"load_delay_s": 3})
        calls_before = len(lora_calls(serve))
        response = register(serve, {"name": "slow", "src": str(folder)})
        assert (response.status_code, message(response)) == (
            504,
            "engine did not load adapter 'slow' within REQUEST_TIMEOUT_S=1 s",
        )
        assert [call["op"] for call in lora_calls(serve)[calls_before:]] == ["unload", "load", "unload"]
        assert "slow" not in registered(serve)
    finally:
        serve.stop()


def test_capacity_is_lora_max_loras_when_the_cpu_cache_is_not_set(runtime_serve: Serve, tmp_path: Path) -> None:
    adapters = runtime_serve.tmp / "model" / "adapters"
    for name in ("manga_domain_v3", "jp_style_v1"):
        response = register(runtime_serve, {"name": name, "src": str(adapters / name)})
        assert (response.status_code, response.text) == (200, f"Adapter {name} registered")
    full = register(runtime_serve, {"name": "general_support_v2", "src": str(adapters / "general_support_v2")})
    assert (full.status_code, message(full)) == (
        409,
        "adapter 'general_support_v2' cannot be registered: LORA_MAX_LORAS=2 adapters are registered; "
        "unregister one first",
    )
    for name in ("manga_domain_v3", "jp_style_v1"):
        deleted = httpx.delete(runtime_serve.url + f"/adapters/{name}", timeout=10)
        assert (deleted.status_code, deleted.text) == (200, f"Adapter {name} unregistered")
    assert registered(runtime_serve) == []


def test_a_new_version_under_a_registered_name_replaces_it_even_at_full_capacity(
    runtime_serve: Serve, tmp_path: Path
) -> None:
    """SageMaker updating an adapter component's ArtifactUrl: the same name from another folder."""
    first = adapter_folder(tmp_path / "v1", config={"r": 16})
    other = adapter_folder(tmp_path / "other", config={"r": 16})
    for name, folder in (("manga", first), ("other", other)):  # LORA_MAX_LORAS=2: capacity full
        assert register(runtime_serve, {"name": name, "src": str(folder)}).status_code == 200
    second = adapter_folder(tmp_path / "v2", config={"r": 16})
    calls_before = len(lora_calls(runtime_serve))
    replaced = register(runtime_serve, {"name": "manga", "src": str(second)})
    assert (replaced.status_code, replaced.text) == (200, "Adapter manga registered")
    assert [(c["op"], c.get("lora_path")) for c in lora_calls(runtime_serve)[calls_before:]] == [
        ("unload", None),  # vLLM forgets v1 ...
        ("load", str(second)),  # ... and loads v2 under the same name
    ]
    assert registered(runtime_serve) == ["manga", "other"]
    runtime_serve.log_line(f"adapters: loaded manga from {second} in ")
    loaded = [line for line in runtime_serve.stderr_lines if f"adapters: loaded manga from {second} in " in line]
    assert loaded and loaded[-1].endswith(f" s (replaces the version from {first})"), loaded

    broken = adapter_folder(
        tmp_path / "v3", config={"r": 16}, script={"load_status": 500, "load_message": "Worker failed"}
    )
    failed = register(runtime_serve, {"name": "manga", "src": str(broken)})
    assert (failed.status_code, message(failed)) == (
        502,
        f"engine failed to load adapter 'manga' (500): Worker failed; the version from src='{second}' is "
        "unloaded too: register it again to restore it",
    )
    assert registered(runtime_serve) == ["other"]
    assert httpx.delete(runtime_serve.url + "/adapters/other", timeout=10).status_code == 200


def test_each_load_of_an_adapter_salts_its_prefix_cache_apart_from_earlier_loads(
    runtime_serve: Serve, tmp_path: Path
) -> None:
    """vLLM (0.22, 0.26) keys prefix-cache blocks by adapter name: a name loaded again must not reuse them."""

    def salts_sent(since: int) -> list[tuple[str, str | None]]:
        return [(r["model"], r["cache_salt"]) for r in runtime_serve.engine_state()["requests"][since:]]

    warmups = 3  # the chat, then 2,048 and 2,047 token ids (WARMUP_PREFILL_TOKENS, issue 35)

    def invoke(model: str, **extra: str) -> None:
        body = {"prompt": "hello", "max_tokens": 2, **extra}
        headers = {"X-Amzn-SageMaker-Adapter-Identifier": model} if model != "base" else {}
        assert httpx.post(runtime_serve.url + "/invocations", json=body, headers=headers, timeout=10).status_code == 200

    before = len(runtime_serve.engine_state()["requests"])
    first_load = register(
        runtime_serve, {"name": "salted", "src": str(adapter_folder(tmp_path / "a", config={"r": 8}))}
    )
    assert first_load.status_code == 200, first_load.text
    invoke("salted")
    invoke("salted", cache_salt="tenant-7")  # the client's own salt is kept, the load's appended
    invoke("base")
    sent = salts_sent(before)  # the warm-up requests first
    first = sent[0][1]
    assert first is not None and first.startswith("adapter-load-")
    assert sent[:warmups] == [("salted", first)] * warmups
    assert sent[warmups:] == [("salted", first), ("salted", f"tenant-7:{first}"), ("base", None)]
    prefill = runtime_serve.engine_state()["requests"][before + 1 : before + warmups]
    assert [(r["path"], r["prompt_token_count"]) for r in prefill] == [
        ("/v1/completions", 2048),
        ("/v1/completions", 2047),
    ]

    before = len(runtime_serve.engine_state()["requests"])
    new_version = register(
        runtime_serve, {"name": "salted", "src": str(adapter_folder(tmp_path / "b", config={"r": 8}))}
    )
    assert new_version.status_code == 200, new_version.text
    invoke("salted")
    sent = salts_sent(before)
    second = sent[0][1]
    assert second not in (None, first)
    assert sent == [("salted", second)] * (warmups + 1)
    assert httpx.delete(runtime_serve.url + "/adapters/salted", timeout=10).status_code == 200
