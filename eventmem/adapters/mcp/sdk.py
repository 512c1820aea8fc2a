"""The one place eventmem reaches below the MCP SDK's public API (mcp 2.3), each for a public API the
SDK does not offer yet. Everything else uses the public surface: ``MCPServer(instructions=...,
subscriptions=...)``, ``tool()``, ``resource()``, ``prompt()``, ``middleware``, ``list_tools()``.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Self

import anyio
import mcp.types as mcp_types
import pydantic
from mcp.server import MCPServer
from mcp.server.extension import RequestHandler
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

__all__ = ["registered_tool", "run_stdio_answering_every_request", "serve_resource_subscriptions"]


def registered_tool(server: MCPServer[Any], name: str) -> Tool | None:
    """The tool ``server`` registered as ``name``, with its argument validator (``None`` if none).

    Missing: a public lookup of one registered tool. ``MCPServer.list_tools()`` is asynchronous and
    gives the wire form only, without the validator that explains a refused call."""
    return server._tool_manager.get_tool(name)


def serve_resource_subscriptions(
    server: MCPServer[Any], subscribe: RequestHandler, unsubscribe: RequestHandler
) -> None:
    """Serve ``resources/subscribe`` and ``resources/unsubscribe`` with these handlers.

    Missing: ``MCPServer`` does not pass the lowlevel server's ``on_subscribe_resource`` and
    ``on_unsubscribe_resource`` through, and an ``Extension`` may not bind a spec method."""
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", mcp_types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", mcp_types.UnsubscribeRequestParams, unsubscribe)


def run_stdio_answering_every_request(server: MCPServer[Any]) -> None:
    """``server.run("stdio")``, except that the end of stdin does not drop the requests still being
    answered: a client may write its requests and close its end (a script piping into ``eventmem
    serve``, a hook), and each request it sent is answered before the session ends.

    Missing: the SDK cancels every handler in flight once the read stream ends; the wrapped streams
    below hold that end back until each request read has had its answer written (or the client
    cancelled it)."""
    lowlevel = server._lowlevel_server

    async def serve() -> None:
        unanswered = _Unanswered()
        async with stdio_server() as (read, write):
            answers = _WriteNotingAnswers(write, unanswered)
            await lowlevel.run(
                _ReadUntilAnswered(read, unanswered, answers),
                answers,
                lowlevel.create_initialization_options(),
            )

    anyio.run(serve)


class _Unanswered:
    """The ids of the requests read and not yet answered (nor cancelled by the client)."""

    def __init__(self) -> None:
        self.ids: set[str | int] = set()
        self._changed = anyio.Event()

    def read(self, message: object) -> None:
        method, request_id = getattr(message, "method", None), getattr(message, "id", None)
        if method is not None and request_id is not None:
            self.ids.add(request_id)
        elif method == "notifications/cancelled":
            params = getattr(message, "params", None) or {}
            self.settle(params.get("requestId") if isinstance(params, dict) else None)

    def settle(self, request_id: object) -> None:
        if request_id in self.ids:
            self.ids.discard(request_id)
            self._changed.set()
            self._changed = anyio.Event()

    async def none_left(self) -> None:
        while self.ids:
            await self._changed.wait()


class _ReadUntilAnswered:
    """A read stream whose end waits until every request read from it was answered."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], unanswered: _Unanswered, answers: _WriteNotingAnswers
    ) -> None:
        self._inner = inner
        self._unanswered = unanswered
        self._answers = answers

    @property
    def last_context(self) -> Any:  # (the dispatcher reads the sender's context where a stream has one)
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._unanswered.none_left()
            raise
        if isinstance(item, SessionMessage):
            self._unanswered.read(item.message)
        elif (refusal := _refusal_of(item)) is not None:
            await self._answers.send(refusal)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _WriteNotingAnswers:
    """A write stream that marks a request answered once its response or error is written."""

    def __init__(self, inner: WriteStream[SessionMessage], unanswered: _Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self._inner.send(item)
        finally:  # (written, or stdout is gone: either way nothing more will come of that request)
            message = item.message
            if getattr(message, "method", None) is None:  # (a response or an error, not a request of ours)
                self._unanswered.settle(getattr(message, "id", None))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _refusal_of(error: Exception) -> SessionMessage | None:
    """The answer to a request line the SDK could not read, if its id can still be read: a lone
    surrogate escape (``"\\ud800"``, text that is not Unicode) is JSON to Python's reader but not to
    the SDK's, which drops the line and leaves the client waiting. ``None``: no id to answer."""
    if not isinstance(error, pydantic.ValidationError):
        return None
    details = error.errors(include_url=False)
    given = details[0].get("input") if details else None
    if isinstance(given, str | bytes):  # (a line the SDK could not parse)
        try:
            data = json.loads(given)
        except (ValueError, RecursionError):  # (not JSON, or nested deeper than the reader goes)
            return None
    else:  # (parsed, and not a message: the object itself)
        data = given
    request_id = data.get("id") if isinstance(data, dict) and isinstance(data.get("method"), str) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    why = str(details[0].get("msg", ""))[:200]
    if details[0].get("type") == "json_invalid":  # (what Python's reader took: a lone surrogate)
        message = f"the request could not be read ({why}): text must be Unicode, with no lone surrogate (\\ud800)"
    else:
        message = f"not a JSON-RPC 2.0 request ({why})"
    refusal = mcp_types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message)
    )
    return SessionMessage(refusal)
