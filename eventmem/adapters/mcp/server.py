"""The stdio MCP server: thin tools over :class:`~eventmem.service.MemoryService`.

The lifespan opens the project in a background thread, so ``initialize`` is answered at once; a
tool call waits until the memory is loaded. Tools are plain functions (the SDK runs them in a worker
thread); each one validates nothing itself, calls the service, and turns an error the model can fix
into a tool error with the service's message. Nothing here writes to stdout: it belongs to the
protocol, and logs go to stderr.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import mcp.types as mcp_types
import msgspec
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from eventmem import __version__
from eventmem.adapters.mcp.app import App, ArgumentErrors, ArrivalOrder, Running, app_of
from eventmem.adapters.mcp.sdk import run_stdio_answering_every_request, serve_resource_subscriptions
from eventmem.adapters.mcp.toolsets import context as context_tools
from eventmem.adapters.mcp.toolsets import memory as memory_tools
from eventmem.adapters.mcp.toolsets import project_context as project_context_tools
from eventmem.context.views import render_summary
from eventmem.core.errors import EventmemError, InvalidInput
from eventmem.core.terminal import printable
from eventmem.journal.config import load_config
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.journal.watcher import watch_journal

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = [
    "FAMILIES",
    "PROFILES",
    "build_server",
    "choose_families",
    "configured_tools",
    "serve_stdio",
    "waiting_notice",
]

#: Tool families by name, each registering all its tools. ``serve --tools``, else ``EVENTMEM_TOOLS``,
#: else the ``tools`` setting lists the families and profiles to expose, comma-separated, or ``all``.
FAMILIES: dict[str, Callable[[MCPServer[App]], None]] = {
    "context": context_tools.register,
    "memory": memory_tools.register,
    "project-context": project_context_tools.register,
}
#: Profiles: a few tools picked from several families. ``core``, the default, stays short (eleven
#: tools) so that a model chooses well, and keeps the basic calls of every earlier design working;
#: ``restore_memory`` is in it because ``delete_memory`` tells how a memory is restored.
PROFILES: dict[str, dict[str, tuple[str, ...]]] = {
    "core": {
        "context": ("save_context", "retrieve_context"),
        "memory": ("store_memory", "recall_memories", "get_memory", "update_memory", "delete_memory", "restore_memory"),
        "project-context": ("bootstrap_project_context", "update_current_task", "record_conversation_summary"),
    },
}
DEFAULT_FAMILIES = ("core",)

log = logging.getLogger("eventmem.mcp")
T = TypeVar("T")


def instructions_for(tools: set[str]) -> str:
    """The server's instructions, naming only tools this server exposes."""

    def named(*names: str) -> str:
        return " or ".join(name for name in names if name in tools)

    lines = ["eventmem is this project's memory, shared by every agent and teammate through git."]
    if find := named("retrieve_context", "recall_memories", "search_memories"):
        lines.append(f"At the start of a task, retrieve what is known ({find}).")
    if save := named("save_context", "store_memory"):
        lines.append(
            "When you make a decision, fix a bug, learn a convention or hit an error worth remembering, "
            f"save it ({save}) with a short summary and a few tags."
        )
    lines.append("Keep secrets out: they are scrubbed, and <private>…</private> spans are dropped.")
    steps = [
        f"{named(*group)} {when}"
        for group, when in (
            (("run_project_open_workflow", "bootstrap_project_context"), "at the start of a session"),
            (("update_current_task",), "as the work moves on"),
            (("run_conversation_end_workflow", "record_conversation_summary"), "at the end"),
        )
        if named(*group)
    ]
    if steps:
        lines.append(
            "The project's shared context (project, architecture, current task, coding style, decisions, "
            "recent changes, conversation summaries, todo): " + ", ".join(steps) + "."
        )
    return "\n".join(lines)


SUMMARY_URI = "memory://summary"
MEMORY_URI = "memory://memories/{memory_id}"
VIEW_START_DELAY_SECONDS = 2.0
"""How long after start the ``.ai`` view is first brought up to date (see ``render_views_after_start``)."""


def choose_families(spec: str | None) -> tuple[str, ...]:
    """Tool families and profiles from a comma-separated spec (``default`` / ``all`` / names)."""
    if not spec or spec.strip() in ("", "default"):
        return DEFAULT_FAMILIES
    names: list[str] = []
    for part in spec.split(","):
        name = part.strip().lower()
        if not name:
            continue
        if name == "all":
            return tuple(FAMILIES)
        if name == "default":
            names += [n for n in DEFAULT_FAMILIES if n not in names]
            continue
        if name not in FAMILIES and name not in PROFILES:
            known = ", ".join([*PROFILES, *FAMILIES])
            raise InvalidInput(f"unknown tool family {name!r}; choose from: {known}, default, all")
        if name not in names:
            names.append(name)
    return tuple(names) or DEFAULT_FAMILIES


def configured_tools(root: RootChoice) -> str:
    """The families to expose when ``serve --tools`` is not given: ``EVENTMEM_TOOLS``, else the
    ``tools`` setting of the project's config (an unreadable config leaves it to the default)."""
    try:
        return load_config(ProjectPaths(root.root).config_file).tools
    except InvalidInput:
        value = os.environ.get("EVENTMEM_TOOLS", "")
        return "" if "${" in value else value


class _PickedTools:
    """The server as a family's ``register`` sees it when only some of its tools are wanted: the
    others are never built (building a tool's schemas is most of a server's start-up work)."""

    def __init__(self, server: MCPServer[App], picks: set[str]) -> None:
        self._server = server
        self._picks = picks

    def tool(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            if (kwargs.get("name") or fn.__name__) in self._picks:
                return self._server.tool(*args, **kwargs)(fn)
            return fn

        return decorator

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class _ToolNames:
    """Stands in for the server while the families register, to learn which tools they add: the
    instructions name only those, and a server takes its instructions when it is made. Nothing is
    built (no schema); prompts and resources are ignored."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def tool(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.names.add(kwargs.get("name") or (args[0] if args else None) or fn.__name__)
            return fn

        return decorator

    def __getattr__(self, name: str) -> Any:
        def ignored(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
            return lambda fn: fn

        return ignored


def register_tools(server: MCPServer[App], chosen: tuple[str, ...]) -> None:
    """Register the chosen families whole, and the tools the chosen profiles pick from the others."""
    for family, register in FAMILIES.items():
        picks = {tool for name in chosen if name in PROFILES for tool in PROFILES[name].get(family, ())}
        if family in chosen:
            register(server)
        elif picks:
            register(cast("MCPServer[App]", _PickedTools(server, picks)))


def waiting_notice(root: RootChoice) -> str:
    """The one line ``eventmem serve`` prints to stderr when started by hand on a terminal."""
    return (
        f"eventmem: serving the memory of {root.root} over MCP on stdio; waiting for an MCP client. "
        "An MCP client starts this itself: connect one with `claude mcp add eventmem -- eventmem serve` "
        "(other clients: see the README's Set-up). Ctrl-C stops."
    )


def open_in_background(root: RootChoice) -> MemoryService:
    """The default opener: :func:`~eventmem.service.open_service` with vectors in the background, the
    service's modules (numpy, FAISS, the projectors) imported only now, in the lifespan's loader,
    after ``initialize`` is answered (see ``build_server``'s ``after_handshake``)."""
    from eventmem.context.project_context import write_section
    from eventmem.service import open_service

    return open_service(root, background_vectors=True, sections=write_section)


def serve_stdio(
    root: RootChoice, *, tools: str | None = None, opener: Callable[[RootChoice], MemoryService] | None = None
) -> None:
    """``eventmem serve``: the server over stdio until the client goes away. SIGTERM lets a save in
    progress finish, then exits (stdin's reader thread cannot be joined); Ctrl-C stops quietly.
    ``opener`` opens the service (default: :func:`open_service` with vectors in the background)."""
    if sys.stdin.isatty():
        print(printable(waiting_notice(root)), file=sys.stderr, flush=True)
    running = Running()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: running.terminate())
    try:
        run_stdio_answering_every_request(
            build_server(root, tools=tools, running=running, opener=opener, after_handshake=True)
        )
    except KeyboardInterrupt:
        pass


def build_server(
    root: RootChoice,
    *,
    opener: Callable[[RootChoice], MemoryService] | None = None,
    tools: str | None = None,
    running: Running | None = None,
    after_handshake: bool = False,
) -> MCPServer[App]:
    """An MCP server for the project at ``root``. ``opener`` opens the service (tests inject one);
    ``tools`` chooses the tool families (default: :func:`configured_tools`); ``running`` is the
    registry its lifespan enters its app in (default: a new one; the caller passes its own to reach
    the open memory from outside a request, as the SIGTERM handler does). With ``after_handshake``
    (one client, over stdio) the service is opened once a message after ``initialize`` arrives (its
    answer is out by then), so that nothing heavy competes with the first answer."""

    running = Running() if running is None else running
    handshake = threading.Event()
    if not after_handshake:
        handshake.set()

    async def open_after_handshake(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "initialize":
            handshake.set()
        return await call_next(ctx)

    async def push_changes(app: App, paths: set[str] | None) -> None:
        """Catch up with the journal and tell subscribed clients which resources changed.

        Segments this process has already applied (its own appends) need no catch-up: a stat tells,
        and the call that is likely running meanwhile is not slowed by a second thread."""
        service = app.service_
        if service is None:
            return
        if paths is None or not service.is_current(paths):
            await anyio.to_thread.run_sync(service.catch_up)
        everything, changed = service.drain_changes()
        if not everything and not changed:
            return
        uris = {SUMMARY_URI, *(MEMORY_URI.format(memory_id=m) for m in changed)}
        if app.views_ready:
            uris |= await anyio.to_thread.run_sync(project_context_tools.view_updates, app, everything, changed)
        await announce(app, uris, everything)

    async def render_views_after_start(app: App, stop: anyio.Event) -> None:
        """Bring the ``.ai`` view up to date a little after start (the journal may have moved while
        no server ran), then keep it so on every change."""
        with anyio.move_on_after(VIEW_START_DELAY_SECONDS):
            await stop.wait()
        service = app.service_
        if stop.is_set() or service is None:
            return
        app.views_ready = True
        uris = await anyio.to_thread.run_sync(project_context_tools.view_updates, app, True, set())
        await announce(app, uris, False)

    async def announce(app: App, uris: set[str], everything: bool) -> None:
        for uri in sorted(uris):
            await bus.publish(ResourceUpdated(uri=uri))
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
        # a slow embedding model loads in the background: tools answer with keywords meanwhile
        app = App(root=root, opener=opener or open_in_background)
        running.apps.append(app)
        stop = anyio.Event()

        def load() -> None:
            handshake.wait()
            if stop.is_set():  # (the client left before it asked anything)
                app.ready.set()
            else:
                app.load()

        loader = threading.Thread(target=load, name="eventmem-open", daemon=True)
        loader.start()

        async def watch() -> None:
            await anyio.to_thread.run_sync(app.ready.wait)
            tasks.start_soon(render_views_after_start, app, stop)
            await watch_journal(root.root / ".eventmem", functools.partial(push_changes, app), stop)

        async def compact() -> None:
            """Expire and archive every ``compact_interval_seconds`` (0 turns it off), from the start."""
            await anyio.to_thread.run_sync(app.ready.wait)
            service = app.service_
            interval = service.config.compact_interval_seconds if service is not None else 0
            while service is not None and interval > 0 and not stop.is_set():
                try:
                    await anyio.to_thread.run_sync(functools.partial(service.compact, archive="daily"))
                except Exception:  # a full disk must not stop the server; try again next time
                    log.exception("compaction failed")
                with anyio.move_on_after(interval):
                    await stop.wait()

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(watch)
                tasks.start_soon(compact)
                try:
                    yield app
                finally:
                    stop.set()
                    handshake.set()  # (a loader still waiting for the handshake gives up: see load())
                    tasks.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(loader.join)
            running.apps.remove(app)
            if app.service_ is not None:
                await anyio.to_thread.run_sync(app.service_.close)

    chosen = choose_families(tools if tools is not None else configured_tools(root))
    names = _ToolNames()
    register_tools(cast("MCPServer[App]", names), chosen)
    bus = InMemorySubscriptionBus()  # (the SDK's default, made here to publish on it)
    server: MCPServer[App] = MCPServer(
        "eventmem",
        title="eventmem project memory",
        version=__version__,
        instructions=instructions_for(names.names),
        lifespan=lifespan,
        log_level="WARNING",
        subscriptions=bus,
    )
    server.middleware.append(open_after_handshake)
    server.middleware.append(ArrivalOrder(server))  # a recall sent after a save sees it
    server.middleware.append(ArgumentErrors(server))  # argument errors in one line

    register_tools(server, chosen)

    # -- resources and subscriptions -----------------------------------------------------------

    @server.resource(
        SUMMARY_URI,
        name="memory-summary",
        title="Project memory summary",
        description="The most important and most recent memories of this project, by type.",
        mime_type="text/markdown",
    )
    def memory_summary() -> str:
        service = running.service()  # (static resources get no Context in the SDK)
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
        service = app_of(ctx).service
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

    project_context_tools.register_resources(server, running)
    serve_resource_subscriptions(server, subscribe, unsubscribe)
    return server
