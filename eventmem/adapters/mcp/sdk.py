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
    """The answer to a line the SDK could not read, which the SDK drops and leaves the client waiting:
    JSON-RPC 2.0 answers it with the request's id where it can still be read, and with ``null`` where
    it cannot (a line that is not JSON, an array, an object with no readable id). ``None``: nothing to
    answer (a blank line; a malformed answer to a request of ours, since no reply goes to a reply).

    A lone surrogate escape (``"\\ud800"``, text that is not Unicode) is JSON to Python's reader but
    not to the SDK's: that request is refused with its id, as any other it cannot take."""
    if not isinstance(error, pydantic.ValidationError):
        return None
    details = error.errors(include_url=False)
    if not details:
        return None
    why = str(details[0].get("msg", ""))[:200]
    data: object = _message_in(details)
    if details[0].get("type") == "json_invalid":  # (the SDK could not parse the line: ``data`` is the line)
        line = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
        if not line.strip():
            return None
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # (not JSON, or nested deeper than the reader goes)
            return _error_answer(
                None, mcp_types.PARSE_ERROR, f"the line is not JSON ({why}): send one JSON-RPC message a line"
            )
        message = (
            f"the request could not be read ({why}): it must be strict JSON in Unicode text "
            "(no lone surrogate such as \\ud800, no NaN)"
        )
    else:  # (parsed, and not a message: ``data`` is what the line held)
        message = f"not a JSON-RPC 2.0 request ({why})"
    if isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data):
        return None
    request_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    return _error_answer(request_id, mcp_types.INVALID_REQUEST, message)


def _error_answer(request_id: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message))
    )


def _message_in(details: list[Any]) -> object:
    """What the line held, from the SDK's validation errors: the input of an error about the message
    itself (its shape, or a field it lacks), not a part's (a ``params`` that is not an object)."""
    for detail in sorted(details, key=lambda d: len(d.get("loc", ()))):
        loc = detail.get("loc", ())
        if len(loc) <= 1 or (len(loc) == 2 and detail.get("type") == "missing"):
            return detail.get("input")
    return details[0].get("input")
