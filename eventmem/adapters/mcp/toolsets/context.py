"""The save_context / retrieve_context family: save, summarize, embed, recall."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Resolve
from pydantic import Field

from eventmem.adapters.mcp.app import (
    ADDITIVE,
    KIND_HELP,
    READ_ONLY,
    App,
    TagText,
    app_of,
    bounded,
    call,
    client_name,
)
from eventmem.adapters.mcp.sampling import SampledSummary, context_text_summary, summary_text
from eventmem.adapters.mcp.toolsets.memory import section_note

__all__ = ["register"]


def register(server: MCPServer[App]) -> None:
    # -- the save_context / retrieve_context family --------------------------------------------

    @server.tool(
        title="Save context",
        description=(
            "Save something worth remembering about this project (a decision, a fix, an error and its "
            "cause, a convention, the state of the current task). Give a one-line summary if you can; "
            "otherwise one is extracted. Returns the new memory's id."
        ),
        annotations=ADDITIVE,
    )
    def save_context(
        ctx: Context[App, Any],
        sampled: Annotated[SampledSummary, Resolve(context_text_summary)],
        context_text: Annotated[str, bounded("content", "The full text to remember.")],
        summary: Annotated[str | None, bounded("summary", "One or two sentences; optional.")] = None,
        tags: Annotated[list[TagText] | None, bounded("tags", "A few lower-case tags.")] = None,
        kind: Annotated[str, Field(description=KIND_HELP)] = "general",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        summary = summary or summary_text(sampled)  # the caller's, else the client model's (if enabled)
        saved = call(
            lambda: service.save_result(
                context_text, summary=summary, tags=tags, kind=kind, by=client_name(ctx), content_field="context_text"
            )
        )
        out: dict[str, Any] = {"status": "success", "id": saved.memory.id, "summary": saved.memory.summary}
        if saved.section:
            out |= section_note(saved.section, saved.memory.id)
        return out

    @server.tool(
        title="Retrieve context",
        description=(
            "Find what this project's memory knows about a question or topic: hybrid semantic and "
            "keyword search, best first. Use it before starting work and when something looks familiar."
        ),
        annotations=READ_ONLY,
    )
    def retrieve_context(
        ctx: Context[App, Any],
        query: Annotated[str, bounded("query", "What you want to know, in words or identifiers.")],
        limit: Annotated[int, bounded("limit", "How many results, 1 to 100.")] = 5,
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        hits = call(lambda: service.recall(query, limit=limit, access=True))
        results = [
            {
                "id": h.id,
                "summary": h.summary,
                "score": h.score,
                "kind": h.kind,
                "tags": h.tags,
                "created_at": h.created_at,
                "scope": h.scope,
            }
            for h in hits
        ]
        out: dict[str, Any] = {"status": "success", "results": results}
        if warnings := service.warnings():
            out["warnings"] = warnings
        return out
