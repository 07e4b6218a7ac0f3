"""The ASGI app on :8080: every area's routes, behind a front door for the hot paths."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from serving_app.adapters import api_router as adapter_router
from serving_app.gateway import Gateway
from serving_app.metrics import exposition
from serving_app.sagemaker import api_router as sagemaker_router

Endpoint = Callable[[Request], Awaitable[Response]]


class _FrontDoor:
    """Outermost ASGI app: requests to a fixed path go straight to their endpoint.

    Starlette's middleware stack and router cost ~100 us per request on the dev machine;
    exact paths (``/ping``, ``POST /invocations``) skip them (the endpoints catch their own
    errors). Everything else (404s, 405s, path parameters, the adapter control plane,
    lifespan) goes through Starlette.
    Requests to ``/invocations`` count as in flight until their last byte, streams included.
    """

    def __init__(self, app: ASGIApp, gateway: Gateway, routes: list[Route]) -> None:
        self.app = app
        self.gateway = gateway
        self.fixed: dict[tuple[str, str], Endpoint] = {
            (method, route.path): route.endpoint
            for route in routes
            if "{" not in route.path
            for method in (route.methods or ())
            if method != "HEAD"
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            endpoint = self.fixed.get((scope["method"], scope["path"]))
            if endpoint is not None:
                tracked = scope["path"] == "/invocations"
                if tracked:
                    self.gateway.tracker.enter()
                try:
                    response = await endpoint(Request(scope, receive))
                    await response(scope, receive, send)
                finally:
                    if tracked:
                        self.gateway.tracker.exit()
                return
        await self.app(scope, receive, send)


def create_app(gateway: Gateway) -> ASGIApp:
    """Starlette app whose lifespan starts and stops ``gateway``, behind :class:`_FrontDoor`."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.startup()
        try:
            yield
        finally:
            await gateway.shutdown()

    hot_routes = sagemaker_router.routes(gateway.readiness, gateway.invocations)
    control_routes = adapter_router.routes(gateway.adapters)
    metrics_routes = exposition.routes(gateway.exposition)
    app = Starlette(routes=[*hot_routes, *control_routes, *metrics_routes], lifespan=lifespan)
    return _FrontDoor(app, gateway, hot_routes)
