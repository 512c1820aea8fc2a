"""What the MCP tools share: the app the lifespan opens, and small adapters to the service.

Tools stay thin: they call the service through :func:`call`, which turns an error the model can fix
into a tool error carrying the service's message.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.session import ServerSession
from mcp.types import ToolAnnotations

from eventmem.errors import EventmemError, InvalidInput
from eventmem.events import KINDS
from eventmem.project import RootChoice
from eventmem.query import Filters
from eventmem.service import MemoryService

__all__ = [
    "ADDITIVE",
    "CHANGING",
    "DESTRUCTIVE",
    "KIND_HELP",
    "READ_ONLY",
    "App",
    "app_of",
    "as_list",
    "call",
    "client_name",
    "dump",
    "make_filters",
    "terminate",
]

log = logging.getLogger("eventmem.mcp")
T = TypeVar("T")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
CHANGING = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

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
    views_ready: bool = False
    """The ``.ai`` view is kept current from now on (it is first rendered a little after start,
    so that a large project's first calls are not slowed by it)."""

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


def client_name(ctx: Context[Any, Any] | None) -> str:
    if ctx is None:
        return ""
    try:
        params = ctx.session.client_params
    except Exception:
        return ""
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", "")
    return str(name or "")


def app_of(ctx: Context[Any, Any]) -> App:
    app = ctx.request_context.lifespan_context
    assert isinstance(app, App)
    return app


def call(fn: Callable[[], T]) -> T:
    """Run a service call; errors the caller can fix become tool errors with a clear message."""
    try:
        return fn()
    except ToolError:
        raise
    except EventmemError as exc:
        raise ToolError(str(exc)) from exc


def as_list(value: str | list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def make_filters(
    type: str | list[str] | None,
    tags: str | list[str] | None,
    scope: str | None,
    min_importance: float | None,
    created_after: str | None = None,
    created_before: str | None = None,
    include_superseded: bool = False,
) -> Filters:
    kinds = tuple(k.strip().lower() for k in (as_list(type) or ()))
    tag_list = tuple(t.strip().lower() for t in (as_list(tags) or ()))
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


def dump(value: Any) -> Any:
    return msgspec.to_builtins(value)
