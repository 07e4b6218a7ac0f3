"""``POST /adapters`` and ``DELETE /adapters/{name}``: SageMaker loads and unloads LoRA adapters
at runtime (``LORA_RUNTIME_ADAPTERS=true``, inference-components mode).

SageMaker runs this container as the base inference component and, for each adapter inference
component, calls ``POST /adapters`` with the component's name and the folder it extracted the
adapter to; it then invokes the adapter with ``X-Amzn-SageMaker-Adapter-Identifier: <name>``
(contract in :mod:`serving_app.adapters.protocol`).

Register: the gateway checks what it can before vLLM sees the request (name, folder, rank,
capacity), asks vLLM to load the adapter (``POST /v1/load_lora_adapter``, enabled by
``VLLM_ALLOW_RUNTIME_LORA_UPDATING``, see ``serving_app.vllm_args.engine_environment``), sends
one warmup request through it so the first real request does not pay for the first load, and
only then adds the name to the registry: no request reaches a new adapter before it answered once.

Register a name that is already registered from another folder: a new version of the adapter
(SageMaker updating an adapter component's ``ArtifactUrl``; whether it sends ``DELETE`` first is
not documented). The new folder is checked like any other, vLLM forgets the old version and
loads the new one, and the name keeps its place in the registry: requests that reach vLLM
between the two fail (vLLM's 404), those after it are answered by the new version, and if the
new version fails to load the name is unregistered (the old version is already gone from vLLM)
and the answer says so. Like a delete, a replacement leaves the old weights in vLLM's CPU cache
until its LRU evicts them (below).

Prefix cache: vLLM 0.26 keys the prefix cache's blocks by the adapter's *name*
(``_gen_lora_extra_hash_keys`` in vllm/v1/core/kv_cache_utils.py returns ``lora_name``), so a
name loaded again with other weights (a new version, or a delete and a registration) would reuse
KV blocks computed with the old weights and answer wrongly until they are evicted: seen on the
real engine (tests/engine/test_runtime_adapters.py). Each load therefore gets its own
``cache_salt`` (vLLM's request field, hashed into the first block and so into every block after
it); the registry keeps it and the invocation path adds it to every request to the adapter.

Unregister: the name leaves the registry first (new requests get the 400 unknown-adapter
answer at once; requests already in vLLM finish with the adapter), then vLLM is asked to forget
it (``POST /v1/unload_lora_adapter``). vLLM 0.26's unload only forgets the name in its API
server (``OpenAIServingModels.unload_lora_adapter`` in
vllm/entrypoints/openai/models/serving.py deletes ``lora_requests[name]``; nothing calls the
engine's ``remove_lora``): the weights stay in the engine's CPU cache, and maybe a GPU slot,
until its LRU evicts them. So after a delete or a replacement, a later load may evict a registered adapter that
was used less recently than the deleted one; vLLM then reloads it from its folder on its next
request (a one-off load, not an error).

Every mutation holds one ``asyncio.Lock``: the capacity check, the load and the registry update
of one request happen as one step, and SageMaker may send registrations concurrently.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Final

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response

from serving_app.adapters.protocol import (
    ADAPTER_ALIAS_HEADER,
    AdapterRequestError,
    check_adapter_name,
    parse_registration,
)
from serving_app.adapters.registry import ModelRegistry
from serving_app.adapters.source import AdapterDigestError, check_digest, checked_source
from serving_app.artifacts import ArtifactError, adapter_rank
from serving_app.engine.monitor import EngineMonitor, reports_dead_engine
from serving_app.engine.readiness import Phase, Readiness
from serving_app.errors import caller_text, error_response
from serving_app.lifecycle.warmup import prefill_body, prefill_prompt, prefill_sizes, warmup_body
from serving_app.settings import Settings
from serving_app.upstream import UpstreamError, UpstreamPool
from serving_contract import env

log = logging.getLogger("serving_app.adapters")

UNLOAD_TIMEOUT_S: Final = 5.0
"""Bound on vLLM's unload, seconds: it only deletes a dict entry in vLLM's API server."""

MAX_REGISTRATION_BYTES: Final = 64 * 1024
"""Largest ``POST /adapters`` body: SageMaker's is four short fields (name <= 63 characters, a path)."""

_MAX_ENGINE_TEXT: Final = 300
"""Characters of vLLM's error message passed on (its messages are one sentence)."""


class AdapterRefusedError(Exception):
    """A request the gateway answers with ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def engine_message(content: bytes) -> str:
    """vLLM's error text: ``error.message`` of its JSON error body, else the body, on one line."""
    text = content.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
        text = str(parsed["error"]["message"])
    except (ValueError, KeyError, TypeError):
        pass
    return " ".join(text.split())[:_MAX_ENGINE_TEXT]


class AdapterService:
    """Registers and unregisters runtime adapters: the checks, vLLM's load/unload, the registry."""

    def __init__(
        self,
        *,
        settings: Settings,
        models: ModelRegistry,
        readiness: Readiness,
        pool: UpstreamPool,
        monitor: EngineMonitor,
    ) -> None:
        self.settings = settings
        self.models = models
        self.readiness = readiness
        self.pool = pool
        self.monitor = monitor
        self._lock = asyncio.Lock()
        self._loads = itertools.count(1)

    # ------------------------------------------------------------------ routes
    async def register(self, request: Request) -> Response:
        """``POST /adapters``: 200 ``Adapter {alias or name} registered``, or a JSON error.

        A name already registered from the same ``src`` answers 200 at once (a retry); from
        another ``src`` it is replaced by the new version (module docstring).

        404 runtime adapters off; 400 bad name or folder, rank above ``LORA_MAX_RANK``, or vLLM
        refused it (4xx); 409 capacity full; 502 vLLM failed
        (5xx) or the warmup request failed; 503 not ready, draining or engine unreachable;
        504 load + warmup took longer than ``REQUEST_TIMEOUT_S``. Never raises.
        """
        return await self._answer(self._register(request))

    async def unregister(self, request: Request, name: str) -> Response:
        """``DELETE /adapters/{name}``: 200 ``Adapter {alias or name} unregistered``, or 404 when
        runtime adapters are off or ``name`` is not registered. Never raises.

        Still 200 when vLLM's unload fails: the name has left the registry, so no request reaches
        the adapter, and a later registration of the name makes vLLM forget it first.
        """
        return await self._answer(self._unregister(request, name))

    async def _answer(self, work: Awaitable[Response]) -> Response:
        try:
            return await work
        except AdapterRefusedError as refusal:
            return error_response(refusal.status, refusal.message)
        except ClientDisconnect:
            return error_response(499, "client disconnected before the body was read")
        except Exception:
            log.exception("adapters: unhandled error")
            return error_response(500, "internal error in the serving gateway")

    # ------------------------------------------------------------------ register
    async def _register(self, request: Request) -> Response:
        self._require_runtime_adapters()
        body = await request.body()
        if len(body) > MAX_REGISTRATION_BYTES:
            raise AdapterRefusedError(413, f"body is {len(body)} bytes; limit {MAX_REGISTRATION_BYTES}")
        try:
            registration = parse_registration(body, request.query_params)
            check_adapter_name(registration.name, self.models.base)
        except AdapterRequestError as exc:
            raise AdapterRefusedError(400, str(exc)) from None
        name, src = registration.name, registration.src
        alias = request.headers.get(ADAPTER_ALIAS_HEADER) or name
        async with self._lock:
            self._require_ready()
            replacing = name in self.models.adapters
            previous_src = self.models.source(name)
            if replacing and previous_src == src:  # SageMaker retried: the adapter is already there
                return PlainTextResponse(f"Adapter {alias} registered")
            folder = await self._check_folder(name, src)
            if not replacing:  # a new version takes the old one's place, not another slot
                self._check_capacity(name)
            started = time.monotonic()
            salt = f"adapter-load-{next(self._loads)}"  # one per load: see "Prefix cache" above
            if replacing:
                # Requests from here on carry the new load's salt: once vLLM holds the new weights
                # (during the warmup), none may read the old version's prefix-cache blocks.
                self.models.add(name, previous_src, salt)
            try:
                await self._load_and_warm(name, str(folder), salt)
            except AdapterRefusedError as refusal:
                log.warning(
                    "adapters: load of %s from %s failed after %.2f s: %s",
                    name,
                    src,
                    time.monotonic() - started,
                    refusal.message,
                )
                if not replacing:
                    raise
                # vLLM forgot the previous version before this load: the name serves nothing now.
                self.models.remove(name)
                raise AdapterRefusedError(
                    refusal.status,
                    f"{refusal.message}; the version from src={caller_text(previous_src, 200)} is unloaded too: "
                    "register it again to restore it",
                ) from None
            self.models.add(name, src, salt)
        replaced = f" (replaces the version from {previous_src})" if replacing else ""
        log.info("adapters: loaded %s from %s in %.2f s%s", name, src, time.monotonic() - started, replaced)
        return PlainTextResponse(f"Adapter {alias} registered")

    def _require_runtime_adapters(self) -> None:
        if not self.settings.lora_runtime_adapters:
            raise AdapterRefusedError(
                404,
                f"runtime adapters are off ({env.LORA_RUNTIME_ADAPTERS}=false): this container serves "
                "the adapters baked into the image (LORA_ADAPTERS)",
            )

    def _require_ready(self) -> None:
        if self.readiness.draining:
            raise AdapterRefusedError(503, "instance is draining (SIGTERM); adapters cannot be registered")
        if not self.readiness.ready:
            phase = "engine unhealthy" if self.readiness.phase is Phase.READY else self.readiness.phase.value
            raise AdapterRefusedError(503, f"not ready: {phase}; register adapters once /ping answers 200")

    async def _check_folder(self, name: str, src: str) -> Path:
        """The resolved adapter folder ``src`` names, after the root, layout and rank checks."""
        try:
            folder = checked_source(src, self.settings.adapter_src_root)
        except AdapterRequestError as exc:
            raise AdapterRefusedError(400, f"adapter {name!r}: {exc}") from None
        if not folder.is_dir():
            raise AdapterRefusedError(
                400,
                f"adapter {name!r}: src={caller_text(src, 200)} is invalid: must be a local folder holding "
                "adapter_config.json and adapter_model.safetensors",
            )
        try:
            rank = await asyncio.to_thread(adapter_rank, folder)
        except ArtifactError as exc:
            raise AdapterRefusedError(400, f"adapter {name!r}: src {exc}") from None
        if rank > self.settings.max_lora_rank:
            raise AdapterRefusedError(
                400, f"adapter {name!r}: rank {rank} exceeds {env.LORA_MAX_RANK}={self.settings.max_lora_rank}"
            )
        try:  # last: hashing reads every byte (~84 MB for a rank-16 Llama-3-8B adapter)
            await asyncio.to_thread(check_digest, name, folder, self.settings.adapter_sha256)
        except AdapterDigestError as exc:
            log.warning(
                "adapters: %s from %s refused: sha256 %s, pinned %s",
                name,
                folder,
                exc.actual,
                self.settings.adapter_sha256.get(name),
            )
            raise AdapterRefusedError(400, str(exc)) from None
        return folder

    def _check_capacity(self, name: str) -> None:
        capacity = self.settings.runtime_adapter_capacity
        registered = self.models.adapters
        if len(registered) >= capacity:
            log.warning("adapters: %s refused, registered: %s", name, ", ".join(registered))
            raise AdapterRefusedError(
                409,
                f"adapter {name!r} cannot be registered: {self.settings.runtime_adapter_capacity_variable}="
                f"{capacity} adapters are registered; unregister one first",
            )

    async def _load_and_warm(self, name: str, src: str, cache_salt: str) -> None:
        """Load ``name`` in vLLM and send it the warm-up (one chat, then the prefill prompts of
        ``WARMUP_PREFILL_TOKENS``), within ``REQUEST_TIMEOUT_S`` (the bound of a request;
        SageMaker documents no limit for its adapter calls).

        vLLM is first asked to forget the name (a 404 when it does not know it): it may still
        know it when an earlier load finished after the gateway gave up on it, and would then
        refuse this load for good ("has already been loaded"). Not ``load_inplace``: vLLM
        keeps that flag on the adapter's request object, and its worker reloads an adapter from
        disk at every scheduler step while the flag is set (``LRUCacheWorkerLoRAManager.add_adapter``
        in vllm/lora/worker_manager.py).
        """
        timeout_s = self.settings.request_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout_s
        await self._forget(name)
        try:
            async with asyncio.timeout_at(deadline):
                status, content = await self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": src})
        except TimeoutError:
            await self._forget(name)
            raise AdapterRefusedError(
                504, f"engine did not load adapter {name!r} within {env.REQUEST_TIMEOUT_S}={timeout_s:g} s"
            ) from None
        if 400 <= status < 500:
            raise AdapterRefusedError(400, f"engine refused adapter {name!r} ({status}): {engine_message(content)}")
        if status != 200:
            self._engine_failed(content)
            raise AdapterRefusedError(
                502, f"engine failed to load adapter {name!r} ({status}): {engine_message(content)}"
            )
        # The chat, then the prefill-sized prompts of the start-up warm-up (WARMUP_PREFILL_TOKENS):
        # in inference_components mode no adapter exists at start, so the first adapter loaded
        # is the first to reach vLLM's prefill-sized LoRA kernels (issue 35).
        requests = [("/v1/chat/completions", warmup_body(name, 0))]
        requests += [
            ("/v1/completions", prefill_body(name, prefill_prompt(0, index, size)))
            for index, size in enumerate(prefill_sizes(self.settings.warmup_prefill_tokens))
        ]
        try:
            async with asyncio.timeout_at(deadline):
                for path, body in requests:
                    status, content = await self._post(path, {**body, "cache_salt": cache_salt})
                    if status != 200:
                        break
        except TimeoutError:
            await self._forget(name)
            raise AdapterRefusedError(
                504,
                f"adapter {name!r} loaded but its warmup request did not finish within "
                f"{env.REQUEST_TIMEOUT_S}={timeout_s:g} s",
            ) from None
        if status != 200:
            await self._forget(name)
            if status >= 500:
                self._engine_failed(content)
            raise AdapterRefusedError(
                502, f"adapter {name!r} loaded but its warmup request answered {status}: {engine_message(content)}"
            )

    # ------------------------------------------------------------------ unregister
    async def _unregister(self, request: Request, name: str) -> Response:
        self._require_runtime_adapters()
        alias = request.headers.get(ADAPTER_ALIAS_HEADER) or name
        async with self._lock:
            if name not in self.models.adapters:
                raise AdapterRefusedError(
                    404,
                    f"adapter {caller_text(name)} is not registered; registered adapters: "
                    f"{', '.join(self.models.adapters) or 'none'}",
                )
            src = self.models.source(name)
            self.models.remove(name)
            started = time.monotonic()
            await self._forget(name)
        log.info("adapters: unloaded %s (src %s) in %.2f s", name, src, time.monotonic() - started)
        return PlainTextResponse(f"Adapter {alias} unregistered")

    # ------------------------------------------------------------------ engine calls
    async def _post(self, path: str, payload: dict[str, object]) -> tuple[int, bytes]:
        """POST ``payload`` to vLLM; ``(status, body)``. Unreachable engine: :class:`AdapterRefusedError` 503."""
        try:
            response = await self.pool.request("POST", path, json.dumps(payload).encode())
            return response.status_code, await response.read()
        except UpstreamError as exc:
            self.monitor.report_engine_down("engine unreachable from an adapter request")
            log.warning("adapters: engine unavailable: %s", exc)
            raise AdapterRefusedError(503, "engine unavailable") from None

    async def _forget(self, name: str) -> None:
        """Ask vLLM to forget ``name``; failures are logged, not raised (see :meth:`unregister`)."""
        try:
            async with asyncio.timeout(UNLOAD_TIMEOUT_S):
                status, content = await self._post("/v1/unload_lora_adapter", {"lora_name": name})
        except TimeoutError:
            log.warning("adapters: unload of %s timed out after %g s", name, UNLOAD_TIMEOUT_S)
            return
        except AdapterRefusedError as refusal:
            log.warning("adapters: unload of %s failed: %s", name, refusal.message)
            return
        # 404: vLLM does not know the name (the usual answer before a load): nothing to forget.
        if status not in (200, 404):
            log.warning("adapters: unload of %s answered %d: %s", name, status, engine_message(content))

    def _engine_failed(self, content: bytes) -> None:
        if reports_dead_engine(content):
            self.monitor.report_engine_down("engine core dead (EngineDeadError)")
        else:
            self.monitor.report_engine_error()
