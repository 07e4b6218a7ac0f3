"""KV offload to host memory on the real engine (issue 56 item 4): the container's settings reach vLLM 0.26 as
``--kv-offloading-size``/``--kv-offloading-backend``, vLLM builds its offloading connector from them, and the
CPU build then refuses to run it.

Checked by hand first (2026-11-29, the tiny model, vLLM 0.26.0's CPU build, with and without the gateway): the
engine loads the model, builds ``OffloadingConnector`` with ``CPUOffloadingSpec``, and its worker raises "CPU
Offloading is currently only supported on CUDA-alike and XPU GPUs" (``CPUOffloadingSpec.get_worker`` in
vllm/v1/kv_offload/cpu/spec.py) while registering the KV cache; ``VLLM_USE_SIMPLE_KV_OFFLOAD``'s connector
needs CUDA streams too. So no CPU test can serve with offload on: this one holds the refusal to its exact
cause, and that the gateway turns it into a failed start. That it serves on a GPU is the H200 log of
benchmarks/results/h200-2026-11-29-open-loop (docs/memory-plan.md, "Host tier").
"""

from __future__ import annotations

import pytest

from tests.engine.real_engine import RealGateway

pytestmark = pytest.mark.real_engine

EXIT_BOUND_S = 900.0
"""Liveness bound on the engine's start-up until its refusal (about a minute of one core on a quiet machine; the
other gateways boot beside it from collection on)."""


def test_the_cpu_build_builds_the_offloading_connector_from_the_containers_flags_then_refuses_it(
    offload_gateway: RealGateway,
) -> None:
    assert offload_gateway.wait_exit(EXIT_BOUND_S) == 1
    log = "\n".join(offload_gateway.log_lines)
    # The container's argv reached vLLM's config ...
    assert "'kv_offloading_size': 0.25" in log
    # ... which built the native backend's connector (vllm/config/vllm.py, _post_init_kv_transfer_config) ...
    assert "Creating v1 connector with name: OffloadingConnector" in log
    assert "Creating offloading spec with name: CPUOffloadingSpec" in log
    # ... and the CPU platform refused to run it: the cause, not a crash elsewhere.
    assert "Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs" in log
    # The gateway never reported ready and said why in one line of its own (then exited 1).
    assert not [ping for ping in offload_gateway.ping_log if ping.status == 200]
    assert [line for line in offload_gateway.stderr_lines if "vLLM exited" in line], offload_gateway.stderr_lines[-5:]
