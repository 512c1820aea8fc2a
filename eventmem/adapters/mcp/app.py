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
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import anyio
import msgspec
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.session import ServerSession
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError
from pydantic_core import ErrorDetails

from eventmem.adapters.mcp.sdk import registered_tool
from eventmem.core.errors import EventmemError, InvalidInput
from eventmem.core.events import KINDS, METADATA_KEY_PATTERN
from eventmem.core.limits import CONTENT_BYTES_CEILING, LIMITS
from eventmem.core.query_rules import Filters
from eventmem.core.validation import shown
from eventmem.journal.project import RootChoice

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = [
    "ADDITIVE",
    "CHANGING",
    "DESTRUCTIVE",
    "KIND_HELP",
    "READ_ONLY",
    "App",
    "ArgumentErrors",
    "ArrivalOrder",
    "EntryText",
    "MetadataMap",
    "Running",
    "TagText",
    "app_of",
    "as_list",
    "bounded",
    "call",
    "client_name",
    "dump",
    "make_filters",
    "one_line",
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
    announced: dict[str, str] | None = None
    """The digest of each ``.ai`` file as last announced to subscribers (``None``: nothing rendered yet)."""

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


@dataclass
class Running:
    """The apps one server's lifespans opened (one at a time for ``eventmem serve``). The registry is
    made with the server and handed to whatever must find the open memory without a request: the
    static resources (the SDK gives them no Context) and the SIGTERM handler (through a closure)."""

    apps: list[App] = field(default_factory=list)

    def service(self) -> MemoryService:
        """The service of the latest app; a resource read before the server started is not found."""
        if not self.apps:
            raise ResourceNotFoundError("the server is not running")
        return self.apps[-1].service

    def terminate(self) -> NoReturn:
        """Exit at once, but only between writes: wait for any save in progress, then leave.

        Used for SIGTERM. Every acknowledged save is already on disk (and a killed process loses
        nothing either), so there is nothing to flush; waiting for the store locks keeps a save that
        is being written from being cut off before it is acknowledged.
        """
        for app in self.apps:
            if app.service_ is not None:
                app.service_.hold_writes()
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
    return str(name or "")[: int(LIMITS["by"].high)]  # a label the client chose: cut, not refused


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


# -- bounds in the schemas, and argument errors in one line ------------------------------------------


TagText = Annotated[str, Field(max_length=int(LIMITS["tag"].high))]
"""One tag as a tool takes it (its schema shows the tag's ``maxLength``)."""
EntryText = Annotated[str, Field(max_length=CONTENT_BYTES_CEILING)]
"""One entry of a project-context list (a recent change, a decision), bounded like a memory's content."""
MetadataMap = dict[
    Annotated[
        str,
        Field(min_length=1, max_length=int(LIMITS["metadata_key"].high), pattern=METADATA_KEY_PATTERN),
    ],
    Annotated[str, Field(max_length=int(LIMITS["metadata_value"].high))],
]
"""A memory's metadata as a tool takes it: short names to text (bounded with :func:`bounded`)."""


def bounded(name: str, description: str, *, low: float | None = None) -> Any:
    """A parameter's ``Field`` with the bounds of the limit ``name`` (``maxLength``/``minLength`` for
    text, ``maxItems`` for lists, ``minimum``/``maximum`` for numbers). ``content`` is bounded by the
    highest ``max_memory_bytes`` allowed (a character is at least a byte); the service checks the
    project's own setting. ``low`` overrides the lower bound (``ttl_seconds`` 0 in an update)."""
    entry = LIMITS[name]
    bottom = entry.low if low is None else low
    if entry.unit in ("number", "whole number"):
        if entry.unit == "whole number":
            return Field(description=description, ge=int(bottom), le=int(entry.high))
        return Field(description=description, ge=bottom, le=entry.high)
    high = CONTENT_BYTES_CEILING if name == "content" else int(entry.high)
    if entry.unit == "items" or not bottom or name == "content":  # (content: the service asks for a visible character)
        return Field(description=description, max_length=high)
    return Field(description=description, min_length=int(bottom), max_length=high)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def expected(schema: dict[str, Any]) -> str:
    """What a parameter's JSON schema accepts, in words: ``a whole number from 1 to 100``."""
    if "anyOf" in schema:
        kinds = [expected(option) for option in schema["anyOf"] if option.get("type") != "null"]
        return " or ".join(kinds) or "null"
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type")
    if kind in ("integer", "number"):
        words = "a whole number" if kind == "integer" else "a number"
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"{words} from {_number(low)} to {_number(high)}"
        if low is not None:
            return f"{words} of at least {_number(low)}"
        return f"{words} of at most {_number(high)}" if high is not None else words
    if kind == "string":
        low, top = schema.get("minLength"), schema.get("maxLength")
        if low and top is not None:
            return f"a string of {low:,} to {top:,} characters"
        return "a string" + (f" of at most {top:,} characters" if top is not None else "")
    if kind == "array":
        items, top = schema.get("items", {}), schema.get("maxItems")
        noun = {"string": "strings", "integer": "whole numbers", "number": "numbers"}.get(items.get("type"), "items")
        what = f"a list of at most {top:,} {noun}" if top is not None else f"a list of {noun}"
        return what + (f", each of at most {items['maxLength']:,} characters" if "maxLength" in items else "")
    if kind == "boolean":
        return "true or false"
    return "an object" if kind == "object" else "a value"


def one_line(exc: ValidationError, schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    """The argument errors of one call in a line, per argument: what was expected, what was given."""
    properties: dict[str, Any] = schema.get("properties", {})
    by_argument: dict[str, list[ErrorDetails]] = {}
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else ""
        by_argument.setdefault(name, []).append(error)
    parts: list[str] = []
    for name, errors in by_argument.items():
        if any(e["type"] == "missing" for e in errors):
            parts.append(f"{name} is required")
            continue
        prop = properties.get(name, {})
        keyed = [e for e in errors if len(e["loc"]) > 1 and isinstance(e["loc"][1], str)]
        if keyed and len(keyed) == len(errors):  # an entry of a map (metadata) is wrong: name its key
            parts.append(_map_entry(name, keyed[0]))
            continue
        items = [e for e in errors if len(e["loc"]) > 1 and isinstance(e["loc"][-1], int)]
        if items and len(items) == len(errors):  # one item of a list is wrong
            where = items[0]["loc"][-1]
            item_schema: dict[str, Any] = next(
                (o.get("items", {}) for o in [prop, *prop.get("anyOf", [])] if "items" in o), {}
            )
            parts.append(f"{name}[{where}]: expected {expected(item_schema)}, got {shown(items[0]['input'])}")
            continue
        parts.append(f"{name}: expected {expected(prop)}, got {shown(arguments.get(name))}")
    return "; ".join(parts)


def _map_entry(name: str, error: ErrorDetails) -> str:
    """What is wrong with one entry of a map argument (``metadata``): its key, and why."""
    key = str(error["loc"][1])
    if len(error["loc"]) > 2 and error["loc"][2] == "[key]":
        if error["type"] == "string_too_long":
            return f"{name} key {shown(key)}: expected at most {_number(int(LIMITS['metadata_key'].high))} characters"
        return f"{name} key {shown(key)}: expected letters, digits and _.- starting with a letter or digit"
    if error["type"] == "string_too_long":
        return f"{name}.{key}: expected at most {_number(int(LIMITS['metadata_value'].high))} characters"
    return f"{name}.{key}: expected a string, got {shown(error['input'])}"


def _takes_boolean(schema: dict[str, Any]) -> bool:
    if "anyOf" in schema:
        return any(_takes_boolean(option) for option in schema["anyOf"])
    return schema.get("type") in (None, "boolean")


def refused_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    """What the schema's validator would let through but a tool must not take, in a line (``""``: nothing):
    an argument the tool does not have (silently dropped, it would lose what the caller meant), and
    true or false where a number or text is expected (taken as 1 or 0)."""
    properties: dict[str, Any] = schema.get("properties", {})
    parts: list[str] = []
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        names = ", ".join(shown(name) for name in unknown)
        parts.append(
            f"unknown argument{'s' if len(unknown) > 1 else ''} {names}: this tool takes {', '.join(properties)}"
        )
    for name, value in arguments.items():
        if isinstance(value, bool) and name in properties and not _takes_boolean(properties[name]):
            parts.append(f"{name}: expected {expected(properties[name])}, got {shown(value)}")
    return "; ".join(parts)


class ArgumentErrors:
    """Middleware: a tool call whose arguments do not fit the tool's schema answers with
    :func:`one_line` instead of the validator's multi-line dump. Only failed calls pay: their
    arguments are validated again to read the errors. Before the call, an unknown argument and a
    boolean where a number is expected are refused (:func:`refused_arguments`)."""

    def __init__(self, server: MCPServer[Any]) -> None:
        self.server = server

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            name, arguments = ctx.params.get("name"), ctx.params.get("arguments") or {}
            tool = registered_tool(self.server, name) if isinstance(name, str) else None
            if tool is not None and isinstance(arguments, dict):
                if refused := refused_arguments(tool.parameters, arguments):
                    text = f"Error executing tool {name}: {refused}"
                    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True).model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
            return result
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name, arguments = params.get("name"), params.get("arguments") or {}
        tool = registered_tool(self.server, name) if isinstance(name, str) else None
        if tool is None or not isinstance(arguments, dict):
            return result
        try:
            tool.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            text = f"Error executing tool {name}: {one_line(exc, tool.parameters, arguments)}"
            return {**result, "content": [{"type": "text", "text": text}]}
        except Exception:  # a check that fails on its own is the call's original error to report
            return result
        return result


class ArrivalOrder:
    """Middleware: tool calls take effect in the order they arrived. The SDK runs each call in a
    thread of its own as it comes, so a client that sends a save and then a recall without waiting
    for the save's answer (a script, a hook, a client's parallel calls) could be answered as if the
    save came after. Each call waits until every call that changes the memory (a tool not marked
    read-only) and arrived before it has finished; read-only calls wait for no other and hold none
    back. The waits are taken in arrival order: the middleware is entered without a pause in each
    request's task, and the tasks start in the order the requests were read."""

    def __init__(self, server: MCPServer[Any]) -> None:
        self.server = server
        self._last_change: anyio.Event | None = None
        """Set when the last call that changes the memory to arrive has finished. Such calls form one
        chain (each waits for the one before), so waiting for the last waits for them all."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
            return await call_next(ctx)
        before = self._last_change
        mine = anyio.Event() if self._changes(ctx.params.get("name")) else None
        if mine is not None:
            self._last_change = mine
        try:
            if before is not None:
                await before.wait()
            return await call_next(ctx)
        finally:
            if mine is not None:
                if before is not None and not before.is_set():  # (cancelled while waiting: the chain holds)
                    with anyio.CancelScope(shield=True):
                        await before.wait()
                mine.set()

    def _changes(self, name: object) -> bool:
        tool = registered_tool(self.server, name) if isinstance(name, str) else None
        hints = tool.annotations if tool is not None else None
        return tool is not None and not (hints is not None and hints.read_only_hint)
