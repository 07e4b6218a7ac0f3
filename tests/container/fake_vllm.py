"""A scripted stand-in for vLLM 0.26's OpenAI server, run as the gateway's engine process.

It takes the same argv the gateway builds for vLLM (``--port``, ``--served-model-name``,
``--lora-modules name=path ...``; everything else is recorded and ignored) and speaks the
same protocol: ``/health``, ``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``
(JSON or SSE with ``data: ...`` and ``data: [DONE]``), ``/metrics`` in Prometheus text
with vLLM 0.26's metric names and ``model_name``/``engine`` labels, and the runtime-LoRA
routes ``/v1/load_lora_adapter`` / ``/v1/unload_lora_adapter`` (vLLM's answers for a name it
already has or does not know; every call is recorded in ``lora_calls``).

Scripting (all under ``/_control``, used by the tests only):
- env ``FAKE_STARTUP_DELAY_S``: sleep before listening (vLLM listens only after loading);
- env ``FAKE_GATE=closed``: completions wait until ``POST /_control/open``;
- env ``FAKE_PREFILL_GATE=closed``: completions of a token-id prompt (the gateway's prefill
  warm-up) wait until ``POST /_control/open_prefill``;
- env ``FAKE_PID_FILE``: write the pid there;
- env ``FAKE_COMPILE_KEY``: "compile" like vLLM: write ``torch_compile_cache/<key>/graph`` under
  ``VLLM_CACHE_ROOT`` unless it is there (a hit writes nothing);
- user content or prompt ``hold``: stream one chunk (or, without streaming, send nothing), then wait
  for ``POST /_control/release``;
- user content ``slow:<seconds>``: sleep before answering;
- user content ``fail-mid-stream`` (streaming): one chunk, then the error event vLLM 0.26 writes when
  generation fails after its 200 (``_convert_generation_error_to_streaming_response`` /
  ``create_streaming_error_response`` in vllm/entrypoints/openai/chat_completion/serving.py: an
  ``InternalServerError`` with code 500), then ``[DONE]``;
- user content ``boom``: answer 500 with a CUDA out-of-memory message, in the exact shape vLLM 0.26's
  API server answers a per-request ``torch.OutOfMemoryError`` (``create_error_response`` in
  vllm/entrypoints/serve/utils/error_response.py: ``InternalServerError``, ``param`` null, code 500);
- user content ``oom-over:<n>``: the same answer while the chat prompt counts more than ``n`` tokens
  (an OOM that a shorter context avoids);
- a summary request (system message starting "Summarise") whose transcript holds ``slow-summary``:
  sleep 3 s first;
- ``POST /tokenize`` with ``messages``: ``{"count", "max_model_len", "tokens"}`` as vLLM's, counted
  by :func:`count_tokens` (words + 4 per message + 1); a chat prompt whose count + ``max_tokens``
  exceeds ``--max-model-len`` gets vLLM 0.26's 400 ("This model's maximum context length is ...");
- a ``fake_vllm.json`` file in an adapter folder scripts its load: ``load_delay_s`` (sleep
  first), ``load_status`` + ``load_message`` (answer that error), ``chat_status`` (the loaded
  adapter answers every completion with that error status).

Kept for the faults the real engine cannot be made to show on demand: an engine that never
becomes healthy (startup timeout), warmup held at a gate (to see ``/ping`` in ``warming_up``),
an upstream that stalls past ``REQUEST_TIMEOUT_S``, a CUDA OOM answer, a stream held open mid
relay, and for runtime adapters: a 4xx from vLLM's load, a load slower than
``REQUEST_TIMEOUT_S``, an adapter that loads but fails its warmup. Everything else runs against
the real vLLM 0.26.0 engine in ``tests/engine/``: ``test_real_gateway.py`` (readiness gating,
routing by ``model`` / custom attribute / ``X-Amzn-SageMaker-Adapter-Identifier`` for the base
and every adapter, sync and streaming, bad input, the real ``/metrics`` names, EMF with engine
values), ``test_runtime_adapters.py`` (``POST /adapters`` by body and by query, invoking each
adapter, duplicates, rank and capacity refusals, vLLM's 500 for an adapter it cannot load,
delete, re-register) and ``test_real_engine_faults.py`` (SIGTERM drain, engine-core death).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--served-model-name", default="base")
parser.add_argument("--lora-modules", nargs="+", default=[])
parser.add_argument("--max-model-len", type=int, default=4096)
# Imported by the unit tests for its exposition (no argv there); run as the engine otherwise.
ARGS, REST = parser.parse_known_args() if __name__ == "__main__" else parser.parse_known_args(["--port", "0"])
ADAPTERS = [item.split("=", 1)[0] for item in ARGS.lora_modules]
MODELS = [ARGS.served_model_name, *ADAPTERS]

STATE: dict[str, Any] = {
    "requests": [],  # one dict per completion request received
    "streams_open": 0,
    "streams_finished": 0,
    "argv": sys.argv[1:],
    # Where vLLM would read its tuned LoRA kernel configs (vllm/envs.py); None: its defaults.
    "tuned_config_folder": os.environ.get("VLLM_TUNED_CONFIG_FOLDER"),
    "counters": {"prompt": 0, "generation": 0, "queries": 0, "hits": 0, "preemptions": 0},
    "queue_times": [],  # seconds each completion waited at the gate (vLLM: WAITING phase)
    "lora_calls": [],  # one dict per /v1/load_lora_adapter or /v1/unload_lora_adapter call
    "tokenize_calls": 0,
}
FAILING_ADAPTERS: dict[str, int] = {}  # adapter name -> status of its every completion (chat_status)
QUEUE_TIME_BUCKETS: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0)
QUEUE_TIME_BUCKETS += (50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
"""``request_latency_buckets`` of vLLM 0.26.0 (vllm/v1/metrics/loggers.py, as in 0.22.0), which
``vllm:request_queue_time_seconds`` uses."""
GATE = asyncio.Event()
RELEASE = [asyncio.Event()]  # a fresh event after each release: later holds hold again
if os.environ.get("FAKE_GATE") != "closed":
    GATE.set()
PREFILL_GATE = asyncio.Event()
if os.environ.get("FAKE_PREFILL_GATE") != "closed":
    PREFILL_GATE.set()


def error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": status}},
        status_code=status,
    )


OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.05 GiB of which "
    "892.00 MiB is free. Including non-PyTorch memory, this process has 21.17 GiB memory in use."
)
"""``str(torch.OutOfMemoryError)`` as torch 2.11's caching allocator words it."""


def oom() -> JSONResponse:
    """vLLM 0.26's answer to a per-request ``torch.OutOfMemoryError`` raised in its API server."""
    return error(500, OOM_MESSAGE, "InternalServerError")


class RaisedError(Exception):
    """An error vLLM answers through its catch-all handler (``app.exception_handler(Exception)``
    in vllm/entrypoints/openai/api_server.py), such as a ``torch.OutOfMemoryError``. Starlette runs
    that handler in ``ServerErrorMiddleware``, which re-raises after answering, so uvicorn closes the
    connection without a ``Connection: close`` header: checked on vLLM 0.22's CPU engine, where the
    context-length 400 went this way too (the next request on the socket got ECONNRESET). vLLM 0.26
    registers ``VLLMValidationError`` (that 400) and ``ValueError`` with ``ExceptionMiddleware``
    instead, which keeps the connection; the fake answers that 400 the same way."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


async def raised_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, RaisedError):
        return exc.response
    return error(500, f"{exc.__class__.__name__}: {exc}", "InternalServerError")


def count_tokens(messages: list[dict[str, Any]]) -> int:
    """The fake's tokenizer: words of every text content, 4 template tokens per message, 1 for the
    generation prompt (deterministic, so the tests can predict a trim)."""
    total = 1
    for message in messages:
        content = message.get("content")
        total += 4 + (len(content.split()) if isinstance(content, str) else 0)
    return total


async def tokenize(request: Request) -> Response:
    body = json.loads(await request.body())
    STATE["tokenize_calls"] += 1
    count = count_tokens(body["messages"])
    return JSONResponse({"count": count, "max_model_len": ARGS.max_model_len, "tokens": list(range(count))})


async def health(request: Request) -> Response:
    return Response(status_code=200)


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})


def histogram_lines(name: str, labels: str, observations: list[float], buckets: tuple[float, ...]) -> list[str]:
    """A Prometheus histogram as prometheus_client writes it (cumulative buckets, +Inf,
    _count, _sum, _created)."""
    lines = [f"# TYPE {name} histogram"]
    for upper in buckets:
        count = sum(1 for value in observations if value <= upper)
        lines.append(f'{name}_bucket{{{labels},le="{upper}"}} {float(count)}')
    lines += [
        f'{name}_bucket{{{labels},le="+Inf"}} {float(len(observations))}',
        f"{name}_count{{{labels}}} {float(len(observations))}",
        f"{name}_sum{{{labels}}} {sum(observations)}",
        f"{name}_created{{{labels}}} 1.7636e+09",
    ]
    return lines


def metrics_text(state: dict[str, Any] = STATE) -> str:
    c = state["counters"]
    lines = []
    for model in MODELS[:1]:
        labels = f'engine="0",model_name="{model}"'
        lines += [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} {float(state['streams_open'])}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{labels}}} 2.0",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{labels}}} 0.25",
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of tokens.",
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{{{labels}}} {float(c['queries'])}",
            "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of tokens.",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{{{labels}}} {float(c['hits'])}",
            "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
            "# TYPE vllm:num_preemptions_total counter",
            f"vllm:num_preemptions_total{{{labels}}} {float(c['preemptions'])}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{labels}}} {float(c['prompt'])}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{labels}}} {float(c['generation'])}",
            "# HELP vllm:time_to_first_token_seconds Histogram of time to first token.",
            "# TYPE vllm:time_to_first_token_seconds histogram",
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.1"}} 1.0',
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} 1.0',
            f"vllm:time_to_first_token_seconds_count{{{labels}}} 1.0",
            f"vllm:time_to_first_token_seconds_sum{{{labels}}} 0.05",
            "# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.",
            *histogram_lines("vllm:request_queue_time_seconds", labels, state["queue_times"], QUEUE_TIME_BUCKETS),
            "# HELP vllm:lora_requests_info Running stats on lora requests.",
            "# TYPE vllm:lora_requests_info gauge",
            f'vllm:lora_requests_info{{max_lora="4",running_lora_adapters="{",".join(ADAPTERS)}",'
            f'waiting_lora_adapters=""}} {time.time()}',
        ]
    # A second engine index, as with data parallelism: the gateway must sum across it.
    lines.append(f'vllm:num_requests_waiting{{engine="1",model_name="{MODELS[0]}"}} 1.0')
    return "\n".join(lines) + "\n"


async def metrics(request: Request) -> Response:
    return PlainTextResponse(metrics_text(), media_type="text/plain; version=0.0.4")


def text_of(body: dict[str, Any]) -> str:
    if "messages" in body:
        content = body["messages"][-1].get("content") if body["messages"] else ""
        return content if isinstance(content, str) else ""
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else ""


async def completions(request: Request) -> Response:  # noqa: PLR0915, C901 (one scripted flow)
    chat = request.url.path.endswith("chat/completions")
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError:
        return error(400, "invalid JSON")
    if not isinstance(body, dict):
        return error(400, "body must be an object")
    model = body.get("model")
    if model not in MODELS:
        return error(404, f"The model `{model}` does not exist.")
    if model in FAILING_ADAPTERS:
        return error(FAILING_ADAPTERS[model], f"scripted failure of adapter {model}")
    max_tokens = body.get("max_tokens") or 3
    if not isinstance(max_tokens, int) or max_tokens > 1000:
        return error(400, "max_tokens must be an integer <= 1000")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    if options is not None and not stream:
        return error(400, "Stream options can only be defined when `stream=True`.")
    text = text_of(body)
    if chat and isinstance(body.get("messages"), list):
        prompt = count_tokens(body["messages"])
        output = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if prompt + output > ARGS.max_model_len:  # vLLM 0.26: TokenizeParams._token_len_check
            return error(
                400,
                f"This model's maximum context length is {ARGS.max_model_len} tokens. However, you requested "
                f"{output} output tokens and your prompt contains {prompt} input tokens, for a total of "
                f"{prompt + output} tokens. Please reduce the length of the input prompt or the number of "
                "requested output tokens.",
                param="input_tokens",
            )
        first = body["messages"][0].get("content") if body["messages"] else None
        if isinstance(first, str) and first.startswith("Summarise") and "slow-summary" in text:
            await asyncio.sleep(3)  # a summary request (serving_app.context_budget) that is late
        if text.startswith("oom-over:") and prompt > int(text.split(":", 1)[1]):
            STATE["requests"].append({"path": request.url.path, "model": model, "messages": body["messages"]})
            raise RaisedError(oom())
    entry = {
        "path": request.url.path,
        "model": model,
        "stream": stream,
        "text": text,
        "stream_options": options,
        "cache_salt": body.get("cache_salt"),
        "messages": body.get("messages"),
        "sha256": hashlib.sha256(raw).hexdigest(),  # the exact bytes that arrived
        # A token-id prompt's length (the gateway's prefill warm-up sends token ids).
        "prompt_token_count": len(body["prompt"]) if isinstance(body.get("prompt"), list) else None,
        "t": time.monotonic(),
    }
    arrived = time.monotonic()
    STATE["requests"].append(entry)
    await GATE.wait()
    if entry["prompt_token_count"] is not None:
        await PREFILL_GATE.wait()
    STATE["queue_times"].append(time.monotonic() - arrived)
    if text == "boom":
        raise RaisedError(oom())
    if text.startswith("slow:"):
        await asyncio.sleep(float(text.split(":", 1)[1]))
    release = RELEASE[0]
    if text == "hold" and not stream:
        await release.wait()
    n_out = min(max_tokens, 3)
    c = STATE["counters"]
    c["prompt"] += 7
    c["generation"] += n_out
    c["queries"] += 7
    c["hits"] += 3
    usage = {"prompt_tokens": 7, "completion_tokens": n_out, "total_tokens": 7 + n_out}
    ident = f"cmpl-{len(STATE['requests'])}"
    if not stream:
        if chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": "tok " * n_out},
                "finish_reason": "stop",
            }
        else:
            choice = {"index": 0, "text": "tok " * n_out, "finish_reason": "stop"}
        return JSONResponse(
            {
                "id": ident,
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
                "usage": usage,
            }
        )
    include_usage = isinstance(options, dict) and options.get("include_usage") is True

    def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
        if chat:
            choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": (delta or {}).get("content", ""), "finish_reason": finish}
        payload = {
            "id": ident,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": 0,
            "model": model,
            "choices": [choice],
        }
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    async def events():
        STATE["streams_open"] += 1
        try:
            yield chunk({"role": "assistant", "content": ""})
            if text == "fail-mid-stream":
                failure = {
                    "message": "Internal server error",
                    "type": "InternalServerError",
                    "param": None,
                    "code": 500,
                }
                yield b"data: " + json.dumps({"error": failure}).encode() + b"\n\ndata: [DONE]\n\n"
                return
            if text == "hold":
                await release.wait()
            for i in range(n_out):
                yield chunk({"content": f"tok{i} "})
                await asyncio.sleep(0)
            yield chunk({}, "stop")
            if include_usage:
                payload: dict[str, Any] = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
                yield b"data: " + json.dumps(payload).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
        finally:
            STATE["streams_open"] -= 1
            STATE["streams_finished"] += 1

    return StreamingResponse(events(), media_type="text/event-stream")


def lora_script(path: str) -> dict[str, Any]:
    """The adapter folder's ``fake_vllm.json`` (empty when absent)."""
    script = Path(path) / "fake_vllm.json"
    return json.loads(script.read_text()) if script.is_file() else {}


async def load_lora_adapter(request: Request) -> Response:
    body = json.loads(await request.body())
    STATE["lora_calls"].append({"op": "load", **body})
    name, path = body["lora_name"], body["lora_path"]
    script = lora_script(path)
    await asyncio.sleep(script.get("load_delay_s", 0))
    if "load_status" in script:
        return error(script["load_status"], script["load_message"])
    if name in MODELS:  # vLLM 0.26's message (vllm/entrypoints/openai/models/serving.py)
        return error(400, f"The lora adapter '{name}' has already been loaded.")
    ADAPTERS.append(name)
    MODELS.append(name)
    if "chat_status" in script:
        FAILING_ADAPTERS[name] = script["chat_status"]
    return Response(f"Success: LoRA adapter '{name}' added successfully.")


async def unload_lora_adapter(request: Request) -> Response:
    body = json.loads(await request.body())
    STATE["lora_calls"].append({"op": "unload", **body})
    name = body["lora_name"]
    if name not in ADAPTERS:
        return error(404, f"The lora adapter '{name}' cannot be found.")
    ADAPTERS.remove(name)
    MODELS.remove(name)
    FAILING_ADAPTERS.pop(name, None)
    return Response(f"Success: LoRA adapter '{name}' removed successfully.")


async def control_state(request: Request) -> Response:
    return JSONResponse({k: v for k, v in STATE.items() if k not in ("counters", "queue_times")})


async def control_open(request: Request) -> Response:
    GATE.set()
    return Response(status_code=204)


async def control_open_prefill(request: Request) -> Response:
    PREFILL_GATE.set()
    return Response(status_code=204)


async def control_release(request: Request) -> Response:
    RELEASE[0].set()
    RELEASE[0] = asyncio.Event()
    return Response(status_code=204)


app = Starlette(
    exception_handlers={Exception: raised_error},
    routes=[
        Route("/health", health),
        Route("/v1/models", models),
        Route("/metrics", metrics),
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/load_lora_adapter", load_lora_adapter, methods=["POST"]),
        Route("/v1/unload_lora_adapter", unload_lora_adapter, methods=["POST"]),
        Route("/_control/state", control_state),
        Route("/_control/open", control_open, methods=["POST"]),
        Route("/_control/open_prefill", control_open_prefill, methods=["POST"]),
        Route("/_control/release", control_release, methods=["POST"]),
    ],
)

if __name__ == "__main__":
    if os.environ.get("FAKE_PID_FILE"):
        with open(os.environ["FAKE_PID_FILE"], "w") as handle:
            handle.write(str(os.getpid()))
    if os.environ.get("FAKE_COMPILE_KEY"):
        root = Path(os.path.expanduser(os.environ.get("VLLM_CACHE_ROOT", "~/.cache/vllm")))
        graph = root / "torch_compile_cache" / os.environ["FAKE_COMPILE_KEY"] / "graph"
        if not graph.exists():
            graph.parent.mkdir(parents=True, exist_ok=True)
            graph.write_text("compiled")
    time.sleep(float(os.environ.get("FAKE_STARTUP_DELAY_S", "0")))
    uvicorn.run(app, host=ARGS.host, port=ARGS.port, log_level="warning", access_log=False)
