"""The benchmark's baseline: an MCP stdio server on the same SDK that does nothing but a list append.

``tools/bench.py`` times eventmem's round trips next to this server's, so what is left after the
ratio is eventmem's own work, not the SDK, JSON-RPC framing, the pipe or the worker-thread hop.
Tools are plain (sync) functions returning dicts, like eventmem's, so both take the same path.

``save`` and ``retrieve`` take one string (the baseline the targets are set against);
``save_context`` and ``retrieve_context`` take the same parameters as eventmem's tools of those
names (the context, a resolved parameter, typed and described arguments) and do the same nothing:
the difference between the two pairs is what the SDK itself spends on a richer signature.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Resolve
from pydantic import Field

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


async def no_summary(ctx: Context[Any, Any], context_text: str, summary: str | None) -> str | None:
    """Stands in for eventmem's sampling resolver, which asks for nothing unless configured to."""
    return None


@server.tool()
def save_context(
    ctx: Context[Any, Any],
    sampled: Annotated[str | None, Resolve(no_summary)],
    context_text: Annotated[str, Field(description="The full text to remember.")],
    summary: Annotated[str | None, Field(description="One or two sentences; optional.")] = None,
    tags: Annotated[list[str] | None, Field(description="A few lower-case tags.")] = None,
    kind: Annotated[str, Field(description="The memory's type.")] = "general",
) -> dict[str, Any]:
    """Remember a text (appends it to a list), with eventmem's ``save_context`` parameters."""
    _saved.append(context_text)
    return {"status": "success", "id": str(len(_saved)), "summary": summary or context_text[:200]}


@server.tool()
def retrieve_context(
    ctx: Context[Any, Any],
    query: Annotated[str, Field(description="What you want to know, in words or identifiers.")],
    limit: Annotated[int, Field(description="How many results, 1 to 100.")] = 5,
) -> dict[str, Any]:
    """The last texts saved, shaped like eventmem's ``retrieve_context`` results."""
    shape = {"score": 0.5, "kind": "general", "tags": [], "created_at": "", "scope": "project"}
    results = [{"id": str(i), "summary": t[:200], **shape} for i, t in enumerate(_saved[-limit:])]
    return {"status": "success", "results": results}


if __name__ == "__main__":
    server.run("stdio")
