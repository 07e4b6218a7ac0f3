"""benchmarks/local_gateway.first_error and explain_exit (issue 44): a failed engine start names its root
cause. The log below has the shape of vLLM 0.26's CPU engine failing on an AVX2 host (the worker's
traceback first, logged through vLLM's logger; the API server's own traceback last, which says only
"See root cause above"), shortened; the lines are as vLLM printed them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from local_gateway import explain_exit, first_error

W = "(Worker pid=9725) ERROR 11-27 11:28:15 [multiproc_executor.py:1007] "
API = "(APIServer pid=9330) "
SITE = "/venv/lib/python3.11/site-packages"
ENGINE_LOG = [
    f"{API}INFO 11-27 11:26:58 [api_server.py:620] vLLM API server version 0.26.0",
    f"{API}WARNING 11-27 11:26:58 [system_utils.py:299] Found ulimit of 20000 and failed to increase it",
    "(Worker pid=9725) INFO 11-27 11:28:15 [default_loader.py:430] Loading weights took 0.04 seconds",
    f"{W}WorkerProc hit an exception.",
    f"{W}Traceback (most recent call last):",
    f'{W}  File "{SITE}/vllm/v1/executor/multiproc_executor.py", line 999, in worker_busy_loop',
    f"{W}    output = func(*args, **kwargs)",
    f"{API}INFO 11-27 11:28:15 [core_client.py:580] waiting for the engine core",  # interleaved
    f'{W}  File "{SITE}/vllm/v1/worker/cpu_model_runner.py", line 148, in warming_up_model',
    f"{W}    self.profile_run()",
    f'{W}  File "{SITE}/vllm/_custom_ops.py", line 3642, in cpu_gemm_wna16',
    f"{W}    torch.ops._C.cpu_gemm_wna16(",
    f'{W}  File "{SITE}/torch/_ops.py", line 1379, in __getattr__',
    f"{W}    raise AttributeError(",
    f"{W}AttributeError: '_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16'",
    f"{W}WorkerProc hit an exception.",
    f"{API}Traceback (most recent call last):",
    f'{API}  File "{SITE}/vllm/v1/engine/utils.py", line 1272, in wait_for_engine_startup',
    f"{API}    raise RuntimeError(",
    f"{API}RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}",
]


def test_the_first_traceback_is_kept_to_its_exception_with_the_innermost_frames() -> None:
    found = first_error(ENGINE_LOG)
    assert found is not None
    start, block = found
    assert start == 3
    assert block == [
        f"{W}WorkerProc hit an exception.",
        f"{W}Traceback (most recent call last):",
        "... 2 frames ...",
        f'{W}  File "{SITE}/vllm/_custom_ops.py", line 3642, in cpu_gemm_wna16',
        f"{W}    torch.ops._C.cpu_gemm_wna16(",
        f'{W}  File "{SITE}/torch/_ops.py", line 1379, in __getattr__',
        f"{W}    raise AttributeError(",
        f"{W}AttributeError: '_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16'",
    ]


def test_the_message_has_the_root_cause_and_the_tail() -> None:
    message = explain_exit(ENGINE_LOG, tail=2)
    assert message.startswith("first error (line 4 of 20):\n")
    assert "AttributeError: '_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16'\nlast 2 lines:\n" in message
    assert message.endswith("Engine core initialization failed. See root cause above. Failed core proc(s): {}")


def test_a_gateway_error_without_a_traceback_is_its_one_line() -> None:
    log = [
        "2026-11-27 11:28:15,120 INFO serving_app.engine: engine: started pid 12",
        "2026-11-27 11:28:16,001 ERROR serving_app: startup failed: engine exited with 1",
        "2026-11-27 11:28:16,002 INFO serving_app: serve: exiting with 1",
    ]
    assert first_error(log) == (1, [log[1]])


def test_a_log_without_an_error_says_so_and_keeps_the_tail() -> None:
    log = [f"line {i}" for i in range(20)]
    assert first_error(log) is None
    assert explain_exit(log, tail=2) == "no error block in 20 lines; last 2:\nline 18\nline 19"
