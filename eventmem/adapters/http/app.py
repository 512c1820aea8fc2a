"""The HTTP server's composition: one Starlette app with MCP (``/mcp``), REST (``/api/v1``), the
server-sent change stream, the OpenAPI document and the UI (``/``), behind :class:`.security.Guard`.

``/mcp`` is the SDK's own Streamable HTTP transport, one MCP server per project (built by
:func:`eventmem.adapters.mcp.server.build_server`, given by the entry point, so the tool profiles are the
stdio server's). A request
names its project with the ``X-Eventmem-Project`` header or the ``project`` query parameter; with
one project served, neither is needed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from http import HTTPStatus
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from eventmem.adapters.http.events_stream import Changes
from eventmem.adapters.http.openapi import openapi_document
from eventmem.adapters.http.projects import Project, Projects
from eventmem.adapters.http.rest import rest_routes
from eventmem.adapters.http.security import Guard, GuardSettings, problem_body, send_problem
from eventmem.core.errors import InvalidInput
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService

__all__ = ["PROJECT_HEADER", "create_app", "static_dir"]

log = logging.getLogger("eventmem.http")
PROJECT_HEADER = "x-eventmem-project"
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""The UI page runs only its own files, and no other site may frame it."""


def static_dir() -> Path:
    return Path(str(resources.files("eventmem.adapters.http") / "static"))


class McpRouter:
    """``/mcp``: the request goes to the session manager of the project it names."""

    def __init__(self, projects: Projects, managers: dict[str, StreamableHTTPSessionManager]) -> None:
        self.projects = projects
        self.managers = managers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        name = headers.get(PROJECT_HEADER) or Request(scope).query_params.get("project")
        try:
            project = self.projects.get(name)
        except InvalidInput as exc:
            await send_problem(send, 404 if name else 400, "Not Found" if name else "Bad Request", str(exc))
            return
        await self.managers[project.name].handle_request(scope, receive, send)


def _opener(project: Project) -> Callable[[RootChoice], MemoryService]:
    """The MCP server's opener: the project's service, shared with REST (opened once, at start)."""
    return lambda _root: project.service()


McpBuilder = Callable[..., "MCPServer[Any]"]
"""Builds one project's MCP server (:func:`eventmem.adapters.mcp.server.build_server`, given by
:mod:`eventmem.main`: this adapter does not import the MCP adapter)."""


def create_app(
    projects: Projects, guard: GuardSettings, build_server: McpBuilder, *, tools: str | None = None
) -> Guard:
    """The whole server as one ASGI app (the guard in front)."""
    servers: dict[str, MCPServer[Any]] = {}
    managers: dict[str, StreamableHTTPSessionManager] = {}
    for name, project in projects.by_name.items():
        server = build_server(project.root, opener=_opener(project), tools=tools)
        server.streamable_http_app(
            streamable_http_path="/",
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),  # the guard checks
            max_request_body_size=guard.max_body_bytes,
        )
        servers[name], managers[name] = server, server.session_manager
    changes = Changes(projects)
    document = openapi_document()

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        projects.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                for manager in managers.values():
                    await stack.enter_async_context(manager.run())
                async with anyio.create_task_group() as tasks:
                    await changes.run(tasks)
                    try:
                        yield
                    finally:
                        changes.close()
                        tasks.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(projects.close)

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    async def index(request: Request) -> Response:
        return FileResponse(static_dir() / "index.html", headers={"Cache-Control": "no-cache", **PAGE_HEADERS})

    router = McpRouter(projects, managers)
    app = Starlette(
        routes=[
            Route("/api/v1/openapi.json", openapi, methods=["GET"]),
            Mount("/api/v1", routes=[*rest_routes(projects), *changes.routes()]),
            Route("/mcp", router, methods=["GET", "POST", "DELETE"]),
            Route("/mcp/", router, methods=["GET", "POST", "DELETE"]),
            Mount("/static", StaticFiles(directory=static_dir()), name="static"),
            Route("/", index, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: http_problem},
    )
    return Guard(app, guard)


async def http_problem(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method the route does not take) as problem+json."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "the request failed"
    if status == 404:
        detail = "nothing at this path; the API is described at /api/v1/openapi.json"
    elif status == 405:
        detail = f"this path does not take {request.method}"
    body = problem_body(status, HTTPStatus(status).phrase, str(detail))
    return Response(body, status, getattr(exc, "headers", None), media_type="application/problem+json")
