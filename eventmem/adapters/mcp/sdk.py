"""The one place eventmem reaches below the MCP SDK's public API (mcp 2.3), each for a public API the
SDK does not offer yet. Everything else uses the public surface: ``MCPServer(instructions=...,
subscriptions=...)``, ``tool()``, ``resource()``, ``prompt()``, ``middleware``, ``list_tools()``.
"""

from __future__ import annotations

from typing import Any

import mcp.types as mcp_types
from mcp.server import MCPServer
from mcp.server.extension import RequestHandler
from mcp.server.mcpserver.tools import Tool

__all__ = ["registered_tool", "serve_resource_subscriptions"]


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
