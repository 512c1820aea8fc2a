"""The benchmark's baseline: an MCP stdio server on the same SDK that does nothing but a list append.

``tools/bench.py`` times eventmem's round trips next to this server's, so what is left after the
ratio is eventmem's own work, not the SDK, JSON-RPC framing, the pipe or the worker-thread hop.
Tools are plain (sync) functions returning dicts, like eventmem's, so both take the same path.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer

server: MCPServer[Any] = MCPServer("noop", version="0", log_level="WARNING")
_saved: list[str] = []


@server.tool()
def save(text: str) -> dict[str, Any]:
    """Remember a text (appends it to a list)."""
    _saved.append(text)
    return {"status": "success", "id": str(len(_saved))}


@server.tool()
def retrieve(query: str) -> dict[str, Any]:
    """The last five texts saved, whatever the query."""
    return {"status": "success", "results": [{"id": str(i), "summary": t} for i, t in enumerate(_saved[-5:])]}


if __name__ == "__main__":
    server.run("stdio")
