"""SageMaker's adapter contract: ``POST /adapters``, ``DELETE /adapters/{adapter_name}`` (routes only)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from serving_app.adapters.serving import AdapterService


def routes(adapters: AdapterService) -> list[Route]:
    """Register and unregister runtime LoRA adapters (control plane: Starlette's router, not the
    front door; the delete route has a path parameter)."""

    async def register(request: Request) -> Response:
        return await adapters.register(request)

    async def unregister(request: Request) -> Response:
        return await adapters.unregister(request, request.path_params["adapter_name"])

    return [
        Route("/adapters", register, methods=["POST"]),
        Route("/adapters/{adapter_name}", unregister, methods=["DELETE"]),
    ]
