"""Helpers for tests that talk to the server through an MCP client."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from mcp import Client
from mcp.types import CallToolResult, TextContent


def text_of(result: CallToolResult) -> str:
    """The text blocks of a tool result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call_tool(
    client: Client, tool: str, arguments: dict[str, Any], *, statuses: Collection[str] = ("success",)
) -> dict[str, Any]:
    """Call a tool that must not fail; returns its structured content, whose status is one of ``statuses``."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    assert content["status"] in statuses, content
    return content
