"""The stdio MCP server: thin tools over :class:`~eventmem.service.MemoryService`.

The lifespan opens the project in a background thread, so ``initialize`` is answered at once; a
tool call waits until the memory is loaded. Tools are plain functions (the SDK runs them in a worker
thread); each one validates nothing itself, calls the service, and turns an error the model can fix
into a tool error with the service's message. Nothing here writes to stdout: it belongs to the
protocol, and logs go to stderr.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import anyio
import mcp.types as mcp_types
import msgspec
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated
from mcp.types import ToolAnnotations
from pydantic import Field

from eventmem import __version__
from eventmem.errors import EventmemError, InvalidInput
from eventmem.events import KINDS
from eventmem.project import RootChoice
from eventmem.query import Filters
from eventmem.service import MemoryService, open_service
from eventmem.views import render_summary
from eventmem.watcher import watch_journal

__all__ = ["build_server", "terminate"]

log = logging.getLogger("eventmem.mcp")
T = TypeVar("T")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
CHANGING = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
eventmem is this project's memory, shared by every agent and teammate through git.
At the start of a task, retrieve what is known (retrieve_context or recall_memories). When you make
a decision, fix a bug, learn a convention or hit an error worth remembering, save it (save_context or
store_memory) with a short summary and a few tags. Keep secrets out: they are scrubbed, and
<private>…</private> spans are dropped."""

SUMMARY_URI = "memory://summary"
MEMORY_URI = "memory://memories/{memory_id}"

KIND_HELP = "One of: " + ", ".join(KINDS) + "."


@dataclass
class App:
    """What the lifespan holds: the service, loaded in the background."""

    root: RootChoice
    opener: Callable[[RootChoice], MemoryService]
    ready: threading.Event = field(default_factory=threading.Event)
    service_: MemoryService | None = None
    error: BaseException | None = None
    subscriptions: dict[str, set[ServerSession]] = field(default_factory=dict)
    """Resource URIs clients subscribed to (``resources/subscribe``), with the sessions to tell."""

    def load(self) -> None:
        try:
            self.service_ = self.opener(self.root)
        except BaseException as exc:
            self.error = exc
            log.exception("could not open the memory at %s", self.root.root)
        finally:
            self.ready.set()

    @property
    def service(self) -> MemoryService:
        self.ready.wait()
        if self.service_ is None:
            raise ToolError(f"the memory could not be opened: {self.error}")
        return self.service_


_RUNNING: list[App] = []
"""Apps of the servers running in this process (one, for ``eventmem serve``)."""


def terminate() -> None:
    """Exit at once, but only between writes: wait for any save in progress, then leave.

    Used for SIGTERM. Every acknowledged save is already on disk (and a killed process loses
    nothing either), so there is nothing to flush; waiting for the store locks keeps a save that
    is being written from being cut off before it is acknowledged.
    """
    for app in _RUNNING:
        if app.service_ is not None:
            for store in app.service_.stores():
                store.lock.acquire()
    os._exit(0)


def _client_name(ctx: Context[Any, Any] | None) -> str:
    if ctx is None:
        return ""
    try:
        params = ctx.session.client_params
    except Exception:
        return ""
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", "")
    return str(name or "")


def _app(ctx: Context[Any, Any]) -> App:
    app = ctx.request_context.lifespan_context
    assert isinstance(app, App)
    return app


def _call(fn: Callable[[], T]) -> T:
    """Run a service call; errors the caller can fix become tool errors with a clear message."""
    try:
        return fn()
    except ToolError:
        raise
    except EventmemError as exc:
        raise ToolError(str(exc)) from exc


def _as_list(value: str | list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def _filters(
    type: str | list[str] | None,
    tags: str | list[str] | None,
    scope: str | None,
    min_importance: float | None,
    created_after: str | None = None,
    created_before: str | None = None,
    include_superseded: bool = False,
) -> Filters:
    kinds = tuple(k.strip().lower() for k in (_as_list(type) or ()))
    tag_list = tuple(t.strip().lower() for t in (_as_list(tags) or ()))
    try:
        return Filters(
            kinds=kinds,
            tags=tag_list,
            scope=scope or None,
            min_importance=min_importance,
            created_after=created_after,
            created_before=created_before,
            include_superseded=include_superseded,
        )
    except (msgspec.ValidationError, TypeError) as exc:
        raise InvalidInput(f"bad filter: {exc}") from exc


def _dump(value: Any) -> Any:
    return msgspec.to_builtins(value)


def build_server(root: RootChoice, *, opener: Callable[[RootChoice], MemoryService] | None = None) -> MCPServer[App]:
    """An MCP server for the project at ``root``. ``opener`` opens the service (tests inject one)."""

    running = _RUNNING

    async def push_changes(app: App) -> None:
        """Catch up with the journal and tell subscribed clients which resources changed."""
        service = app.service_
        if service is None:
            return
        await anyio.to_thread.run_sync(service.catch_up)
        everything, changed = service.project.drain_changes()
        if not everything and not changed:
            return
        uris = {SUMMARY_URI, *(MEMORY_URI.format(memory_id=m) for m in changed)}
        for uri in sorted(uris):
            await server._subscriptions.publish(ResourceUpdated(uri=uri))
        for uri, sessions in list(app.subscriptions.items()):
            if not (everything and uri.startswith("memory://")) and uri not in uris:
                continue
            for session in list(sessions):
                try:
                    await session.send_resource_updated(uri)
                except Exception:  # the client went away
                    sessions.discard(session)

    @asynccontextmanager
    async def lifespan(_: MCPServer[App]) -> AsyncIterator[App]:
        app = App(root=root, opener=opener or open_service)
        running.append(app)
        loader = threading.Thread(target=app.load, name="eventmem-open", daemon=True)
        loader.start()
        stop = anyio.Event()

        async def watch() -> None:
            await anyio.to_thread.run_sync(app.ready.wait)
            await watch_journal(root.root / ".eventmem", lambda: push_changes(app), stop)

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(watch)
                try:
                    yield app
                finally:
                    stop.set()
                    tasks.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(loader.join)
            running.remove(app)
            if app.service_ is not None:
                await anyio.to_thread.run_sync(app.service_.close)

    server: MCPServer[App] = MCPServer(
        "eventmem",
        title="eventmem project memory",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
    )

    # -- the save_context / retrieve_context family --------------------------------------------

    @server.tool(
        title="Save context",
        description=(
            "Save something worth remembering about this project (a decision, a fix, an error and its "
            "cause, a convention, the state of the current task). Give a one-line summary if you can; "
            "otherwise one is extracted. Returns the new memory's id."
        ),
        annotations=ADDITIVE,
    )
    def save_context(
        ctx: Context[App, Any],
        context_text: Annotated[str, Field(description="The full text to remember.")],
        summary: Annotated[str | None, Field(description="One or two sentences; optional.")] = None,
        tags: Annotated[list[str] | None, Field(description="A few lower-case tags.")] = None,
        kind: Annotated[str, Field(description=KIND_HELP)] = "general",
    ) -> dict[str, Any]:
        service = _app(ctx).service
        memory = _call(lambda: service.save(context_text, summary=summary, tags=tags, kind=kind, by=_client_name(ctx)))
        return {"status": "success", "id": memory.id, "summary": memory.summary}

    @server.tool(
        title="Retrieve context",
        description=(
            "Find what this project's memory knows about a question or topic: hybrid semantic and "
            "keyword search, best first. Use it before starting work and when something looks familiar."
        ),
        annotations=READ_ONLY,
    )
    def retrieve_context(
        ctx: Context[App, Any],
        query: Annotated[str, Field(description="What you want to know, in words or identifiers.")],
        limit: Annotated[int, Field(description="How many results, 1 to 100.")] = 5,
    ) -> dict[str, Any]:
        service = _app(ctx).service
        hits = _call(lambda: service.recall(query, limit=limit))
        results = [
            {
                "id": h.id,
                "summary": h.summary,
                "score": h.score,
                "kind": h.kind,
                "tags": h.tags,
                "created_at": h.created_at,
                "scope": h.scope,
            }
            for h in hits
        ]
        out: dict[str, Any] = {"status": "success", "results": results}
        if warnings := service.warnings():
            out["warnings"] = warnings
        return out

    # -- the team-memory family ----------------------------------------------------------------

    @server.tool(
        title="Store memory",
        description=(
            "Store a typed memory: a decision, fix, error, solution, problem, code_pattern, workflow, "
            "convention or general note, with tags and an importance from 0 to 1. Give ttl_seconds for "
            "something that should fade (it is promoted to long-term if it proves useful). scope "
            "'global' stores it in your user-wide memory, shared across projects."
        ),
        annotations=ADDITIVE,
    )
    def store_memory(
        ctx: Context[App, Any],
        content: Annotated[str, Field(description="The memory itself, complete enough to act on later.")],
        type: Annotated[str, Field(description=KIND_HELP)] = "general",
        title: Annotated[str, Field(description="A short title; optional.")] = "",
        summary: Annotated[str | None, Field(description="One or two sentences; optional.")] = None,
        tags: Annotated[list[str] | None, Field(description="A few lower-case tags.")] = None,
        importance: Annotated[float, Field(description="0 (trivia) to 1 (critical).")] = 0.5,
        ttl_seconds: Annotated[int | None, Field(description="Seconds until it expires; omit for long-term.")] = None,
        scope: Annotated[str, Field(description="'project' (default) or 'global'.")] = "project",
    ) -> dict[str, Any]:
        service = _app(ctx).service
        memory = _call(
            lambda: service.save(
                content,
                title=title,
                summary=summary,
                tags=tags,
                kind=type,
                importance=importance,
                ttl_seconds=ttl_seconds,
                scope=scope,
                by=_client_name(ctx),
            )
        )
        return {"status": "success", "memory": _dump(memory)}

    @server.tool(
        title="Recall memories",
        description=(
            "Semantic + keyword recall with filters applied before ranking: type (one or several), "
            "tags (all must match), scope ('project', 'global' or 'all'), min_importance, "
            "created_after/created_before. Expired and superseded memories are never returned."
        ),
        annotations=READ_ONLY,
    )
    def recall_memories(
        ctx: Context[App, Any],
        query: Annotated[str, Field(description="What you want to know.")],
        limit: Annotated[int, Field(description="How many results, 1 to 100.")] = 5,
        type: Annotated[str | list[str] | None, Field(description="Only these types.")] = None,
        tags: Annotated[str | list[str] | None, Field(description="Only memories with all these tags.")] = None,
        scope: Annotated[str | None, Field(description="'project', 'global' or 'all' (default).")] = None,
        min_importance: Annotated[float | None, Field(description="Only memories at least this important.")] = None,
        include_content: Annotated[bool, Field(description="Return each memory's full content.")] = True,
        created_after: Annotated[str | None, Field(description="Created at or after this ISO-8601 time.")] = None,
        created_before: Annotated[str | None, Field(description="Created before this ISO-8601 time.")] = None,
    ) -> dict[str, Any]:
        service = _app(ctx).service

        def run() -> dict[str, Any]:
            filters = _filters(type, tags, scope, min_importance, created_after, created_before)
            hits = service.recall(query, limit=limit, filters=filters, include_content=include_content)
            return {"status": "success", "results": _dump(hits)}

        out = _call(run)
        if warnings := service.warnings():
            out["warnings"] = warnings
        return out

    @server.tool(
        title="Get memory",
        description="Fetch one memory by id, with its full content, times and status.",
        annotations=READ_ONLY,
    )
    def get_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
    ) -> dict[str, Any]:
        service = _app(ctx).service
        return {"status": "success", "memory": _dump(_call(lambda: service.get(memory_id)))}

    @server.tool(
        title="Update memory",
        description=(
            "Change fields of a memory; fields you leave out stay as they are. A new content is "
            "re-summarized and re-embedded. ttl_seconds 0 makes it long-term. The history is kept."
        ),
        annotations=CHANGING,
    )
    def update_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
        content: str | None = None,
        title: str | None = None,
        summary: str | None = None,
        tags: list[str] | None = None,
        type: Annotated[str | None, Field(description=KIND_HELP)] = None,
        importance: float | None = None,
        ttl_seconds: Annotated[int | None, Field(description="New TTL in seconds; 0 = long-term.")] = None,
    ) -> dict[str, Any]:
        service = _app(ctx).service
        ttl: int | str | None = "unchanged" if ttl_seconds is None else (None if ttl_seconds == 0 else ttl_seconds)
        memory = _call(
            lambda: service.update(
                memory_id,
                content=content,
                title=title,
                summary=summary,
                tags=tags,
                kind=type,
                importance=importance,
                ttl_seconds=ttl,  # type: ignore[arg-type]
                by=_client_name(ctx),
            )
        )
        return {"status": "success", "memory": _dump(memory)}

    @server.tool(
        title="Delete memory",
        description=(
            "Delete a memory that is wrong or no longer useful. It stops being returned; its history "
            "stays in the journal and it can be restored."
        ),
        annotations=DESTRUCTIVE,
    )
    def delete_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
        reason: Annotated[str, Field(description="Why; kept in the history.")] = "",
    ) -> dict[str, Any]:
        service = _app(ctx).service
        memory = _call(lambda: service.delete(memory_id, reason=reason, by=_client_name(ctx)))
        return {"status": "success", "id": memory.id, "deleted": True}

    # -- resources and subscriptions -----------------------------------------------------------

    @server.resource(
        SUMMARY_URI,
        name="memory-summary",
        title="Project memory summary",
        description="The most important and most recent memories of this project, by type.",
        mime_type="text/markdown",
    )
    def memory_summary() -> str:
        # static resources get no Context in the SDK: use the app the lifespan opened
        if not running:
            raise ResourceNotFoundError("the server is not running")
        service = running[-1].service
        service.catch_up()
        return render_summary(service)

    @server.resource(
        MEMORY_URI,
        name="memory",
        title="One memory",
        description="One memory by id, as JSON.",
        mime_type="application/json",
    )
    def memory_item(memory_id: str, ctx: Context[App, Any]) -> str:
        service = _app(ctx).service
        try:
            memory = service.get(memory_id)
        except EventmemError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return msgspec.json.encode(memory).decode()

    async def subscribe(
        ctx: ServerRequestContext[App, Any], params: mcp_types.SubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        ctx.lifespan_context.subscriptions.setdefault(str(params.uri), set()).add(ctx.session)
        return mcp_types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[App, Any], params: mcp_types.UnsubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        ctx.lifespan_context.subscriptions.get(str(params.uri), set()).discard(ctx.session)
        return mcp_types.EmptyResult()

    server._lowlevel_server.add_request_handler("resources/subscribe", mcp_types.SubscribeRequestParams, subscribe)
    server._lowlevel_server.add_request_handler(
        "resources/unsubscribe", mcp_types.UnsubscribeRequestParams, unsubscribe
    )
    return server
