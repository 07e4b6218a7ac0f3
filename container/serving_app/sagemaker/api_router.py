"""SageMaker's contract: ``GET /ping`` and ``POST /invocations`` (routes only)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from serving_app.engine.readiness import Readiness
from serving_app.sagemaker.serving import InvocationService


def routes(readiness: Readiness, invocations: InvocationService) -> list[Route]:
    """``/ping`` (200 only when warmed up, engine healthy and not draining; never awaits the
    engine: SageMaker allows it 2 s; the body also lists the adapters requests may use) and
    ``/invocations``."""
    models = invocations.models

    async def ping(request: Request) -> Response:
        body = {**readiness.body(), "adapters": list(models.adapters)}
        return JSONResponse(body, status_code=200 if readiness.ready else 503)

    async def invoke(request: Request) -> Response:
        return await invocations.handle(request)

    return [Route("/ping", ping, methods=["GET"]), Route("/invocations", invoke, methods=["POST"])]
