"""Helpers for tests that talk to the server through an MCP client: in-process (``connect``) or over
stdio to an ``eventmem serve`` subprocess (``serve``)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, Implementation, TextContent

from eventmem.adapters.mcp.server import build_server
from eventmem.journal.project import RootChoice

DEFAULT_TOOLS = {  # tools every profile offers
    "save_context",
    "retrieve_context",
    "store_memory",
    "recall_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
}
PYTEST_CLIENT = Implementation(name="pytest-agent", version="1.0")
STDIO_CLIENT = Implementation(name="stdio-test-client", version="1.0")

ToolClient = Client | ClientSession


def text_of(result: CallToolResult) -> str:
    """The text blocks of a tool result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call_tool(
    client: ToolClient, tool: str, arguments: dict[str, Any], *, statuses: Collection[str] = ("success",)
) -> dict[str, Any]:
    """Call a tool that must not fail; returns its structured content, whose status is one of ``statuses``."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    assert content["status"] in statuses, content
    return content


async def call(client: ToolClient, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content."""
    return await call_tool(client, tool, arguments)


async def call_error(client: ToolClient, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail with a tool error; returns the error text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) should have failed: {result.structured_content}"
    return text_of(result)


@asynccontextmanager
async def connect(
    project: Path,
    *,
    client_info: Implementation | None = None,
    tools: str | None = None,
    root: RootChoice | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """A client connected in-process to the server of ``project`` (or of ``root``), offering ``tools``;
    ``options`` go to the client (``mode``, ``sampling_callback``, ...)."""
    server = build_server(root or RootChoice(project, "test"), tools=tools)
    if client_info is not None:
        options["client_info"] = client_info
    async with Client(server, **options) as client:
        yield client


def server_env(**extra: str) -> dict[str, str]:
    """The test's environment (PATH, and conftest's HOME and EVENTMEM_GLOBAL_DIR) plus ``extra``."""
    env = dict(os.environ)
    env.update(extra)
    for name in ("PATH", "HOME", "EVENTMEM_GLOBAL_DIR"):
        assert env.get(name), f"{name} must reach the server"
    return env


@asynccontextmanager
async def serve(
    cwd: Path,
    env: dict[str, str],
    errlog: Path,
    *,
    args: Sequence[str] = (),
    client_info: Implementation = STDIO_CLIENT,
    **options: Any,
) -> AsyncIterator[ClientSession]:
    """A ClientSession on ``eventmem serve *args`` started in ``cwd``; its stderr goes to ``errlog``.
    ``options`` go to the session (``message_handler``, ...)."""
    command = ["-m", "eventmem", "serve", *args]
    params = StdioServerParameters(command=sys.executable, args=command, cwd=cwd, env=env)
    with errlog.open("w", encoding="utf-8") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write, client_info=client_info, **options) as session,
        ):
            yield session


async def vectors_ready(client: ToolClient) -> None:
    """Return once ``retrieve_context`` no longer says that vectors are incomplete: a server embeds a
    fresh clone's memories, or a merged branch's, in the background, answering from keywords
    meanwhile, and no call waits for it. (Its question matches no memory: no access is counted.)"""
    for _ in range(1200):
        answer = await call(client, "retrieve_context", query="qqxvectorsreadyqqx", limit=1)
        if "warnings" not in answer:
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"the memories were never all embedded: {answer}")


def assert_clean_stderr(errlog: Path) -> None:
    """The server wrote no traceback to its stderr."""
    text = errlog.read_text(encoding="utf-8")
    assert "Traceback" not in text, text
