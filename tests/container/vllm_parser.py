"""vLLM's own argument parser, run once in ``.venv-vllm`` on the argvs ``serve`` builds.

The parser subprocess imports vLLM in ~10 s, so ``tests/container/conftest.py`` starts it once collection
is done and ``test_vllm_contract.py`` reads its answer; both import the argvs and the plumbing from here.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from serving_app.settings import Settings
from serving_app.vllm_args import EnginePaths, build_vllm_args

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
VLLM_PARSER = Path(__file__).with_name("vllm_parse_argv.py")
_CONTRACT: dict[str, Any] = {}


def start_parser(argvs: list[list[str]]) -> None:
    """Start the one parsing subprocess on ``argvs`` (its answer is read by :func:`contract_answer`)."""
    # Files, not pipes: nobody reads until the contract tests run.
    stdout = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed with the session)
    stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115
    # Lowest priority: it runs on the cycles the (mostly waiting) HTTP tests leave idle.
    proc = subprocess.Popen(
        ["nice", "-n", "19", str(VLLM_PYTHON), str(VLLM_PARSER)],
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=stderr,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(argvs))
    proc.stdin.close()
    _CONTRACT.update(proc=proc, argvs=argvs, stdout=stdout, stderr=stderr)


def contract_answer(argvs: list[list[str]]) -> dict[str, Any]:
    """vLLM's parser's answer for ``argvs``."""
    if _CONTRACT.get("argvs") != argvs:
        start_parser(argvs)
    proc: subprocess.Popen[str] = _CONTRACT["proc"]
    # Liveness only: at nice 19 on two saturated cores its ~10 s of imports can take minutes.
    proc.wait(timeout=900)
    _CONTRACT["stdout"].seek(0)
    _CONTRACT["stderr"].seek(0)
    stdout, stderr = _CONTRACT["stdout"].read(), _CONTRACT["stderr"].read()
    assert proc.returncode == 0, stderr[-2000:]
    answer: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return answer


PATHS = EnginePaths(model_dir=Path("/opt/model/base"), adapter_dir=Path("/opt/model/adapters"), port=8081)
FULL_ENV = {
    "LORA_ADAPTERS": "manga_domain_v3,general_support_v2,jp_style_v1",
    "LORA_MAX_RANK": "16",
    "LORA_MAX_LORAS": "3",
    "DRAIN_TIMEOUT_S": "20",
}
RUNTIME_ADAPTERS_ENV = {
    # inference_components mode: LoRA on, no adapter at start (SageMaker loads them via POST /adapters).
    "LORA_RUNTIME_ADAPTERS": "true",
    "LORA_MAX_LORAS": "2",
    "LORA_MAX_CPU_LORAS": "3",
    "LORA_MAX_RANK": "32",
    "LORA_SPECIALIZE_ACTIVE": "false",
}
OFFLOAD_ENV = {
    # KV offload to host memory (issue 56): vLLM 0.26's --kv-offloading-size GiB and its backend.
    **FULL_ENV,
    "ENGINE_KV_OFFLOADING_SIZE_GIB": "16",
    "ENGINE_KV_OFFLOADING_BACKEND": "native",
}
MINIMAL_ENV = {
    "ENGINE_QUANTIZATION": "awq",
    "ENGINE_KV_CACHE_DTYPE": "fp8",
    "ENGINE_ATTENTION_BACKEND": "FLASHINFER",
    "ENGINE_ENABLE_PREFIX_CACHING": "false",
    "ENGINE_ENFORCE_EAGER": "true",
    "ENGINE_LOG_LEVEL": "debug",
    "ENGINE_DATA_PARALLEL_SIZE": "2",  # what the stack sets on a 2-GPU group instance (variants mode)
}


def contract_argvs() -> list[list[str]]:
    """Argvs sent to vLLM's parser, in order (conftest starts the subprocess with these)."""
    return [
        build_vllm_args(Settings.from_env(FULL_ENV), PATHS),
        build_vllm_args(Settings.from_env(MINIMAL_ENV), PATHS),
        [*build_vllm_args(Settings.from_env(FULL_ENV), PATHS), "--disable-log-requests"],
        build_vllm_args(Settings.from_env(RUNTIME_ADAPTERS_ENV), PATHS),
        build_vllm_args(Settings.from_env(OFFLOAD_ENV), PATHS),
        build_vllm_args(Settings.from_env({**OFFLOAD_ENV, "ENGINE_KV_OFFLOADING_SIZE_GIB": "0.25"}), PATHS),
    ]
