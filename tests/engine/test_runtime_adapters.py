"""Runtime LoRA adapters with the real engine: SageMaker's inference-components mode, where the
container starts with no adapter and SageMaker registers each adapter component through
``POST /adapters`` (``LORA_RUNTIME_ADAPTERS=true``).

Every test here uses ``disposable_gateway`` (``LORA_MAX_LORAS=2``, ``LORA_MAX_CPU_LORAS=3``) and
they run in file order: the first one needs room for one more adapter, the ``registered``
fixture fills the capacity with the three tiny adapters, and the last one deletes and
registers again. The engine-death test ends the gateway after them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from serving_contract.components import adapter_component_name
from tests.engine.real_engine import ADAPTERS, BASE_MODEL, ENGINE_ENV, RealGateway, write_adapter

pytestmark = pytest.mark.real_engine

GREEDY = {"messages": [{"role": "user", "content": "recommend an action manga"}], "max_tokens": 8, "temperature": 0}
COMPONENTS = {adapter: adapter_component_name(ENGINE_ENV["ENDPOINT_NAME"], adapter) for adapter in ADAPTERS}
"""What SageMaker registers each adapter as: its inference component's name."""
ALIAS = "General support v2"
QUERY_REGISTERED = "general_support_v2"
"""Registered with query parameters and an alias; the other two with a JSON body."""


def source(gateway: RealGateway, adapter: str) -> str:
    return str(gateway.model_root / "adapters" / adapter)


def register(
    gateway: RealGateway, name: str, src: str, *, as_query: bool = False, alias: str | None = None
) -> httpx.Response:
    headers = {"X-Amzn-SageMaker-Adapter-Alias": alias} if alias else {}
    if as_query:  # no body at all, as SageMaker may send it
        return httpx.post(gateway.url + "/adapters", params={"name": name, "src": src}, headers=headers, timeout=60)
    return httpx.post(gateway.url + "/adapters", json={"name": name, "src": src}, headers=headers, timeout=60)


def invoke(gateway: RealGateway, name: str) -> httpx.Response:
    headers = {"X-Amzn-SageMaker-Adapter-Identifier": name}
    return httpx.post(gateway.url + "/invocations", json=GREEDY, headers=headers, timeout=60)


def engine_answer(gateway: RealGateway, name: str) -> str:
    """The greedy answer of vLLM's own OpenAI route (no gateway in between)."""
    response = httpx.post(gateway.engine_url + "/v1/chat/completions", json={**GREEDY, "model": name}, timeout=60)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def error_message(response: httpx.Response) -> Any:
    return response.json()["error"]["message"]


def registered_adapters(gateway: RealGateway) -> list[str]:
    return list(httpx.get(gateway.url + "/ping", timeout=5).json()["adapters"])


def test_an_adapter_the_engine_cannot_load_is_a_502_with_its_reason(
    disposable_gateway: RealGateway, tmp_path: Path
) -> None:
    # The gateway's checks pass (files, rank); vLLM 0.26 refuses LoRA biases when it loads the
    # adapter and answers 500 (PEFTHelper.validate_legal, vllm/lora/peft_helper.py).
    folder = tmp_path / "biased"
    shutil.copytree(source(disposable_gateway, "jp_style_v1"), folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "bias": "all"}))
    response = register(disposable_gateway, "biased", str(folder))
    assert response.status_code == 502
    assert error_message(response) == (
        "engine failed to load adapter 'biased' (500): Call to add_lora method failed: Worker failed with error "
        "'Adapter bias is not supported.', please check the stack trace above for the root cause"
    )
    assert "biased" not in registered_adapters(disposable_gateway)


@pytest.fixture(scope="module")
def registered(disposable_gateway: RealGateway) -> dict[str, httpx.Response]:
    """The three tiny adapters, registered under their component names as SageMaker does."""
    return {
        adapter: register(
            disposable_gateway,
            COMPONENTS[adapter],
            source(disposable_gateway, adapter),
            as_query=adapter == QUERY_REGISTERED,
            alias=ALIAS if adapter == QUERY_REGISTERED else None,
        )
        for adapter in ADAPTERS
    }


def test_adapters_register_by_json_body_and_by_query_parameters(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response]
) -> None:
    for adapter, response in registered.items():
        assert response.status_code == 200, response.text
        expected = ALIAS if adapter == QUERY_REGISTERED else COMPONENTS[adapter]
        assert response.text == f"Adapter {expected} registered"
    assert registered_adapters(disposable_gateway) == list(COMPONENTS.values())
    for adapter, name in COMPONENTS.items():
        disposable_gateway.wait_for_log(f"adapters: loaded {name} from {source(disposable_gateway, adapter)} in ")


def test_each_registered_adapter_answers_as_the_engine_itself_does(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response]
) -> None:
    answers = {}
    for name in COMPONENTS.values():
        response = invoke(disposable_gateway, name)
        assert response.status_code == 200, response.text
        assert response.json()["model"] == name
        answers[name] = response.json()["choices"][0]["message"]["content"]
        assert answers[name] == engine_answer(disposable_gateway, name)
    # Without this the comparison could pass while every request ran the base model.
    assert len({*answers.values(), engine_answer(disposable_gateway, BASE_MODEL)}) == len(ADAPTERS) + 1, answers


def test_registering_a_name_again_is_idempotent_for_the_same_src_and_a_new_version_for_another(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response]
) -> None:
    name, src = COMPONENTS["manga_domain_v3"], source(disposable_gateway, "manga_domain_v3")
    before = invoke(disposable_gateway, name).json()["choices"][0]["message"]["content"]
    again = register(disposable_gateway, name, src)  # SageMaker retried
    assert again.status_code == 200 and again.text == f"Adapter {name} registered"

    # A new version of the adapter under the same component name (an ArtifactUrl update), at full
    # capacity: the name now answers with the other weights, as vLLM itself does. Without the
    # gateway's per-load cache_salt, vLLM reused the prompt's KV blocks of the old version (its
    # prefix cache is keyed by adapter name) and answered with neither adapter's text.
    new_version = source(disposable_gateway, "jp_style_v1")
    replaced = register(disposable_gateway, name, new_version)
    assert replaced.status_code == 200 and replaced.text == f"Adapter {name} registered"
    after = invoke(disposable_gateway, name).json()["choices"][0]["message"]["content"]
    assert after == engine_answer(disposable_gateway, COMPONENTS["jp_style_v1"]) != before
    assert registered_adapters(disposable_gateway) == list(COMPONENTS.values())

    restored = register(disposable_gateway, name, src)  # later tests expect the original weights
    assert restored.status_code == 200
    assert invoke(disposable_gateway, name).json()["choices"][0]["message"]["content"] == before


def test_a_rank_above_lora_max_rank_and_a_full_capacity_are_refused(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response], tmp_path: Path
) -> None:
    rank_32 = write_adapter(tmp_path / "rank32", rank=32)
    too_wide = register(disposable_gateway, "wide-adapter", str(rank_32))
    assert too_wide.status_code == 400
    assert error_message(too_wide) == "adapter 'wide-adapter': rank 32 exceeds LORA_MAX_RANK=16"
    # LORA_MAX_CPU_LORAS=3 and three are registered: a fourth would make vLLM evict one.
    extra = register(disposable_gateway, "extra-adapter", source(disposable_gateway, "jp_style_v1"))
    assert extra.status_code == 409
    assert error_message(extra) == (
        "adapter 'extra-adapter' cannot be registered: LORA_MAX_CPU_LORAS=3 adapters are registered; "
        "unregister one first"
    )
    assert registered_adapters(disposable_gateway) == list(COMPONENTS.values())


def test_deleting_an_unknown_adapter_is_a_404_naming_the_registered_ones(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response]
) -> None:
    response = httpx.delete(disposable_gateway.url + "/adapters/retired-adapter", timeout=10)
    assert response.status_code == 404
    assert error_message(response) == (
        f"adapter 'retired-adapter' is not registered; registered adapters: {', '.join(COMPONENTS.values())}"
    )


def test_a_deleted_adapter_is_unknown_until_registered_again(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response]
) -> None:
    name, src = COMPONENTS[QUERY_REGISTERED], source(disposable_gateway, QUERY_REGISTERED)
    answer = engine_answer(disposable_gateway, name)
    deleted = httpx.delete(
        disposable_gateway.url + f"/adapters/{name}", headers={"X-Amzn-SageMaker-Adapter-Alias": ALIAS}, timeout=10
    )
    assert deleted.status_code == 200 and deleted.text == f"Adapter {ALIAS} unregistered"
    disposable_gateway.wait_for_log(f"adapters: unloaded {name} (src {src}) in ")
    refused = invoke(disposable_gateway, name)
    assert refused.status_code == 400
    assert error_message(refused) == f"unknown adapter '{name}'"
    # vLLM forgot the name too (its unload only drops the name; the weights wait for its LRU).
    forgotten = httpx.post(disposable_gateway.engine_url + "/v1/chat/completions", json={**GREEDY, "model": name})
    assert forgotten.status_code == 404

    again = register(disposable_gateway, name, src)
    assert again.status_code == 200 and again.text == f"Adapter {name} registered"
    answered = invoke(disposable_gateway, name)
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"] == answer


def test_a_name_the_engine_still_knows_is_loaded_again(
    disposable_gateway: RealGateway, registered: dict[str, httpx.Response]
) -> None:
    # As after a load that finished in vLLM after the gateway gave up on it (REQUEST_TIMEOUT_S):
    # vLLM knows the name, the gateway does not; a plain load would be refused for good.
    name, src = COMPONENTS["jp_style_v1"], source(disposable_gateway, "jp_style_v1")
    assert httpx.delete(disposable_gateway.url + f"/adapters/{name}", timeout=10).status_code == 200
    stale = httpx.post(
        disposable_gateway.engine_url + "/v1/load_lora_adapter", json={"lora_name": name, "lora_path": src}, timeout=60
    )
    assert stale.status_code == 200, stale.text
    again = register(disposable_gateway, name, src)
    assert again.status_code == 200, again.text
    assert invoke(disposable_gateway, name).status_code == 200
    assert registered_adapters(disposable_gateway) == [
        COMPONENTS["manga_domain_v3"],
        COMPONENTS[QUERY_REGISTERED],
        name,
    ]
